"""How far scoring in bfloat16 moves a frontier from float32 (docs/performance.md): two folders of one plan measured
with `benchprof frontier --dtype float32` and `--dtype bfloat16`, compared item by item (flips), cell by cell (each
region's AIS on each split against the float32 cell's 95% interval) and claim by claim (the stars and goal of
frontier_report). Reads the folders' plan.json and evaluations.jsonl only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchprof import BenchprofError

SAME_PLAN = (  # what two runs must share to score the same regions on the same items (the seed draws the random ones)
    "model", "data_dir", "abilities", "contrast", "options", "sizes", "draws", "seed", "train_items", "train_from",
    "test_items", "transfer_items",
)  # fmt: skip


def item_flips(reference: list[dict[str, Any]], other: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """Per region ("option|region|size"), (items scored differently, items) over every split of both records sets;
    the two hold the same regions (frontier_plan.plan_records of one plan)."""
    theirs = {(r["option"], r["region"], r["size"]): r["acc_norm"] for r in other}
    out = {}
    for r in reference:
        key = (r["option"], r["region"], r["size"])
        pairs = [(a, b) for split, a_items in r["acc_norm"].items() for a, b in zip(a_items, theirs[key][split])]
        out["|".join(map(str, key))] = (sum(a != b for a, b in pairs), len(pairs))
    return out


def cell_differences(reference_rows: list[dict[str, Any]], other_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per frontier row (option, size, ability; the random draws' too): own AIS in each dtype, their difference, the
    float32 row's 95% interval half-width, whether the own and specificity stars and the goal agree."""
    from benchprof.lab.frontier_report import starred

    theirs = {(r["option"], r["size"], r["ability"]): r for r in other_rows}
    out = []
    for a in reference_rows:
        b = theirs[(a["option"], a["size"], a["ability"])]
        half = (a["own_high"] - a["own_low"]) / 2
        out.append({
            "option": a["option"], "size": a["size"], "ability": a["ability"], "own_float32": a["own_ais"],
            "own_bfloat16": b["own_ais"], "difference": b["own_ais"] - a["own_ais"], "half_width": half,
            "star_float32": starred(a, "own_vs_random"), "star_bfloat16": starred(b, "own_vs_random"),
            "spec_star_float32": starred(a, "spec_vs_random"), "spec_star_bfloat16": starred(b, "spec_vs_random"),
            "goal_float32": a.get("goal", ""), "goal_bfloat16": b.get("goal", ""),
        })  # fmt: skip
    return out


def compare_dtypes(reference: str | Path, other: str | Path, out: str | Path | None = None) -> list[Path]:
    """Compare a float32 frontier folder with a bfloat16 one of the same plan; writes dtype_agreement.md and .csv in
    `out` (default: the bfloat16 folder). Refused in one line when the folders' plans differ in more than the dtype.

    Arguments:
        reference: the float32 frontier folder.
        other: the bfloat16 frontier folder.
        out: where the two files go.
    """
    import numpy as np

    from benchprof.core.layout import FrontierLayout
    from benchprof.core.storage import write_csv, write_text
    from benchprof.lab.frontier_plan import plan_records, recorded_plan
    from benchprof.lab.frontier_report import rows_of

    plans = [recorded_plan(Path(f)) for f in (reference, other)]
    (plan_a, json_a), (plan_b, json_b) = plans
    differ = [k for k in SAME_PLAN if json_a.get(k) != json_b.get(k)]
    if differ or (plan_a.dtype, plan_b.dtype) != ("float32", "bfloat16"):
        raise BenchprofError(
            f"{reference}, {other}: not one plan in float32 and bfloat16 (dtypes {plan_a.dtype}, {plan_b.dtype}"
            + (f"; they differ in {', '.join(differ)}" if differ else "")
            + ")"
        )
    records = [plan_records(p, FrontierLayout(Path(f)).records_file) for p, f in ((plan_a, reference), (plan_b, other))]
    flips = item_flips(*records)
    shape = json_a["model_shape"]
    rows = [
        rows_of(p, r, int(shape["weights_per_neuron"]), int(shape["total_params"]))
        for p, r in zip((plan_a, plan_b), records, strict=True)
    ]
    cells = cell_differences(*rows)
    flipped, scored = sum(f for f, _ in flips.values()), sum(n for _, n in flips.values())
    original = flips["original|-|0"]
    claims = [c for c in cells if c["option"] != "random"]
    moved = [
        c
        for c in claims
        if c["star_float32"] != c["star_bfloat16"] or c["spec_star_float32"] != c["spec_star_bfloat16"]
    ]
    goals = [c for c in claims if c["goal_float32"] != c["goal_bfloat16"]]
    ratio = [abs(c["difference"]) / c["half_width"] for c in cells if c["half_width"] > 0]
    folder = Path(out) if out is not None else Path(other)
    folder.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = folder / "dtype_agreement.csv", folder / "dtype_agreement.md"
    write_csv(csv_path, tuple(cells[0]), cells, digits=6)
    moved_names = ", ".join(f"{c['option']} {c['ability']}" for c in moved)
    goal_names = ", ".join(f"{c['option']} {c['ability']}: {c['goal_float32']} / {c['goal_bfloat16']}" for c in goals)
    differences = [abs(c["difference"]) for c in cells]
    lines = [
        f"# bfloat16 against float32: {plan_a.model_given or plan_a.model}",
        "",
        f"Float32 {reference}, bfloat16 {other}: the same regions (selected in float32) scored in each dtype.",
        "",
        f"- Items scored differently: {flipped} of {scored} ({flipped / scored:.2%}) over {len(flips)} regions; "
        f"the original model {original[0]} of {original[1]}; the most in one region "
        f"{max(f / n for f, n in flips.values()):.2%}.",
        f"- Own AIS, bfloat16 − float32, over {len(cells)} cells (regions and random draws): median |difference| "
        f"{float(np.median(differences)):.3f}, largest {max(differences):.3f}; as a share of the float32 cell's 95% "
        f"half-width: median {float(np.median(ratio)):.2f}, largest {max(ratio):.2f}.",
        f"- Stars (own and specificity above random): {len(moved)} of {len(claims)} regions differ"
        + (f" ({moved_names})" if moved else "")
        + f"; goal parts: {len(goals)} of {len(claims)} differ"
        + (f" ({goal_names})" if goals else "")
        + ".",
        "",
        "Both sides of every AIS are scored in one dtype, so a flip moves the original and the ablated score alike in "
        "distribution: the paired test stays a test within that dtype; what a flip can change is the item-level noise, "
        "which the rows above measure.",
    ]
    write_text(md_path, "\n".join(lines) + "\n")
    return [csv_path, md_path]
