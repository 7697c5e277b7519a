"""How far scoring in bfloat16 moves a frontier from float32 (docs/research/performance.md): two folders of one plan
measured with `benchprof frontier --dtype float32` and `--dtype bfloat16`, compared item by item (flips), cell by
cell (each region's AIS on each split against the float32 cell's 95% interval) and claim by claim (the stars and goal
of frontier_report). Reads the folders' plan.json and evaluations.jsonl only. Two profile folders of one config are
compared the same way, from their documents.tar.xz, ais.csv and Claims (compare_profiles)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchprof import BenchprofError

if TYPE_CHECKING:
    from benchprof.profile.rows import AisRow, Profile

SAME_PLAN = (  # what two runs must share to score the same regions on the same items (the seed draws the random ones)
    "model", "data_dir", "abilities", "contrast", "options", "sizes", "draws", "seed", "train_items", "train_from",
    "test_items", "transfer_items", "ablation",
)  # fmt: skip

# what a flip does to the paired test, in both reports
PAIRED = (
    "Both sides of every AIS are scored in one dtype: a flip moves the original and the ablated score alike in "
    "distribution, so the paired test stays a test within that dtype, and what the dtype adds is item-level noise, "
    "which the rows above measure."
)


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
        PAIRED,
    ]
    write_text(md_path, "\n".join(lines) + "\n")
    return [csv_path, md_path]


# what two profile folders may differ in and still be one plan scored in two dtypes
DTYPE_ONLY = ("evals.dtype", "models.0.tag", "settings.output_dir")


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """A config's values by dotted key (list items by their index)."""
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return {prefix: value}
    out: dict[str, Any] = {}
    for key, item in items:
        out.update(_flat(item, f"{prefix}.{key}" if prefix else str(key)))
    return out


def _config(folder: Path) -> dict[str, Any]:
    """A profile folder's config.yml by dotted key; refused in one line when it has none."""
    import yaml

    path = folder / "config.yml"
    if not path.is_file():
        raise BenchprofError(f"{path}: no config to compare the two profiles' plans by")
    return _flat(yaml.safe_load(path.read_text(encoding="utf-8")) or {})


def _documents(folder: Path, into: Path) -> tuple[str, dict[str, Path]]:
    """(the dtype its evaluations were scored in, each samples file by its path under the model's outputs folder) of
    a profile folder's documents.tar.xz unpacked into `into`."""
    import json

    from benchprof.profile.documents import DOCUMENTS, unpack_documents

    if not (folder / DOCUMENTS).is_file() or not (folder / "ais.csv").is_file():
        raise BenchprofError(f"{folder}: not a profile folder with ais.csv and {DOCUMENTS}")
    unpack_documents(folder / DOCUMENTS, into)
    dtypes = {json.loads(p.read_text())["inputs"].get("dtype", "") for p in into.glob("original/eval/*.json")}
    if len(dtypes) != 1:
        raise BenchprofError(f"{folder}: its original evaluations name {len(dtypes)} dtypes, not one")
    return dtypes.pop(), {p.relative_to(into).as_posix(): p for p in into.glob("**/*.samples.jsonl")}


def profile_flips(reference: dict[str, Path], other: dict[str, Path], metrics: dict[str, str]) -> dict[str, list[int]]:
    """Per evaluation ("<ability>/eval/<k>/<region>/<benchmark>" or "original/eval/<benchmark>"), [documents
    scored differently, documents] on the benchmark's primary metric; the two sets must hold the same files."""
    from benchprof.core.results import read_samples

    if set(reference) != set(other):
        raise BenchprofError(f"the two profiles hold different evaluations ({len(set(reference) ^ set(other))} apart)")
    out = {}
    for name in sorted(reference):
        benchmark = name.rsplit("/", 1)[1].removesuffix(".samples.jsonl")
        if benchmark not in metrics:
            continue  # a benchmark no primary row reads (its result kept for the record only)
        a, why_a = read_samples(reference[name], metrics[benchmark])
        b, why_b = read_samples(other[name], metrics[benchmark])
        if a is None or b is None or set(a) != set(b):
            raise BenchprofError(f"{name}: not the same documents in both profiles ({why_a or why_b or 'ids differ'})")
        out[name.removesuffix(".samples.jsonl")] = [sum(a[d] != b[d] for d in a), len(a)]
    return out


def profile_cells(reference: list[AisRow], other: list[AisRow], other_name: str) -> list[dict[str, Any]]:
    """Per ais.csv row with a test (every family): the AIS in each dtype, their difference, the float32 row's 95%
    half-width, the star in each, and the paired test's discordant documents (flips lost + gained) in each."""

    def key(row: AisRow) -> tuple[Any, ...]:
        return row.ability, row.benchmark, row.k, row.region, row.metric

    def discordant(row: AisRow) -> float:  # empty where the row has no paired counts (control rows)
        return math.nan if row.flips_lost is None or row.flips_gained is None else row.flips_lost + row.flips_gained

    theirs = {key(r): r for r in other}
    out = []
    for a in reference:
        b = theirs.get(key(a))
        if b is None:
            raise BenchprofError(f"{other_name}: ais.csv has no row for {', '.join(map(str, key(a)))}")
        if not a.family:
            continue  # a row no test reads
        out.append({
            "ability": a.ability, "benchmark": a.benchmark, "k": a.k, "region": a.region, "metric": a.metric,
            "family": a.family, "ais_float32": a.ais, "ais_bfloat16": b.ais, "difference": b.ais - a.ais,
            "half_width": (a.ci_high - a.ci_low) / 2,
            "star_float32": a.significant is True, "star_bfloat16": b.significant is True,  # None: no test
            "discordant_float32": discordant(a), "discordant_bfloat16": discordant(b),
        })  # fmt: skip
    return out


def claim_sets(profile: Profile) -> dict[str, str]:
    """Each benchmark's verdict as ais.md's Claims give it, without figures: "draws on A, B", "less than random
    on C", "none", "chance" or "untested"."""
    from benchprof.profile.claims import benchmark_claims

    out = {}
    for claim in benchmark_claims(profile):
        parts = [f"draws on {', '.join(sorted(r.ability for r in claim.draws_on))}"] if claim.draws_on else []
        parts += [f"less than random on {', '.join(sorted(r.ability for r in claim.less_than_random))}"] * bool(
            claim.less_than_random
        )
        out[claim.benchmark] = "; ".join(parts) or claim.kind
    return out


def compare_profiles(reference: Path, other: Path, out: Path) -> list[Path]:
    """A float32 profile folder against a bfloat16 one of the same config (docs/research/performance.md, section 5):
    item flips from both documents.tar.xz, cell differences and stars from both ais.csv, claims from both; writes
    dtype_agreement.md and .csv in `out`."""
    import statistics
    import tempfile

    from benchprof.core.storage import write_csv, write_text
    from benchprof.lab.rerender import folder_profile
    from benchprof.profile.rows import P_CORRECT

    configs = [_config(f) for f in (reference, other)]
    keys = sorted(set(configs[0]) | set(configs[1]))
    differ = [k for k in keys if k not in DTYPE_ONLY and configs[0].get(k) != configs[1].get(k)]
    with tempfile.TemporaryDirectory(prefix="benchprof-dtypes-") as root:
        dtype_a, files_a = _documents(reference, Path(root) / "a")
        dtype_b, files_b = _documents(other, Path(root) / "b")
        if differ or (dtype_a, dtype_b) != ("float32", "bfloat16"):
            raise BenchprofError(
                f"{reference}, {other}: not one config scored in float32 and bfloat16 (dtypes {dtype_a}, {dtype_b}"
                + (f"; config.yml differs in {', '.join(differ[:5])}" if differ else "")
                + ")"
            )
        profile_a, profile_b = folder_profile(reference), folder_profile(other)  # each ais.csv read once
        # each benchmark's primary metric: the one its damage and claim rows test, or (a benchmark at chance, whose
        # rows have no test) the one its top rows give
        rows = profile_a.rows
        metrics = {r.benchmark: r.metric for r in rows if r.region == "top" and r.metric != P_CORRECT}
        metrics.update({r.benchmark: r.metric for r in rows if r.family in ("damage", "claim", "own")})
        flips = profile_flips(files_a, files_b, metrics)
    cells = profile_cells(profile_a.rows, profile_b.rows, str(other))
    claims_a, claims_b = claim_sets(profile_a), claim_sets(profile_b)
    flipped, scored = sum(f for f, _ in flips.values()), sum(n for _, n in flips.values())
    original = [sum(v[i] for k, v in flips.items() if k.startswith("original/")) for i in (0, 1)]
    share = max(f / n for f, n in flips.values())
    moved: dict[str, list[str]] = {}
    for c in cells:
        if c["star_float32"] != c["star_bfloat16"]:
            only = "float32" if c["star_float32"] else "bfloat16"
            moved.setdefault(c["family"], []).append(f"{c['ability']} {c['region']} on {c['benchmark']} ({only} only)")
    ratio = [abs(c["difference"]) / c["half_width"] for c in cells if c["half_width"] > 0]
    differences = [abs(c["difference"]) for c in cells if not math.isnan(c["difference"])]
    discordant = [
        abs(c["discordant_bfloat16"] - c["discordant_float32"]) for c in cells if c["family"] == "damage"
    ]  # the paired test's own count
    changed = [f"{b}: {claims_a[b]} / {claims_b.get(b, 'absent')}" for b in claims_a if claims_a[b] != claims_b.get(b)]
    out.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out / "dtype_agreement.csv", out / "dtype_agreement.md"
    write_csv(csv_path, tuple(cells[0]), cells, digits=6)
    stars = sum(c["star_float32"] for c in cells)
    lines = [
        f"# bfloat16 against float32: the profile {reference.name}",
        "",
        f"Float32 {reference}, bfloat16 {other}: one config (regions selected in float32), its evaluations scored in "
        "each dtype.",
        "",
        f"- Documents scored differently: {flipped} of {scored} ({flipped / scored:.2%}) over {len(flips)} "
        f"evaluations; the original model {original[0]} of {original[1]}; the most in one evaluation {share:.2%}.",
        f"- AIS, bfloat16 − float32, over {len(cells)} tested rows: median |difference| "
        f"{statistics.median(differences):.3f}, largest {max(differences):.3f}; as a share of the float32 row's 95% "
        f"half-width: median {statistics.median(ratio):.2f}, largest {max(ratio):.2f}.",
        f"- The paired test's discordant documents (flips lost + gained) on the damage rows: median |bfloat16 − "
        f"float32| {statistics.median(discordant) if discordant else float('nan'):.1f}, largest "
        f"{max(discordant, default=float('nan')):.0f}.",
        f"- Stars: {sum(map(len, moved.values()))} of {len(cells)} rows differ ({stars} starred in float32)"
        + "".join(f"; {family}: {', '.join(names)}" for family, names in moved.items())
        + ".",
        f"- Claims: {len(changed)} of {len(claims_a)} benchmarks' verdicts differ"
        + (f" ({'; '.join(changed)})" if changed else "")
        + ".",
        "",
        PAIRED,
    ]
    write_text(md_path, "\n".join(lines) + "\n")
    return [csv_path, md_path]


def main(reference: str, other: str, out: str | None = None) -> list[Path]:
    """Compare what float32 and bfloat16 scoring give for one plan: two frontier folders (`benchprof frontier
    --dtype`), or two profile folders of one config scored with evals.dtype float32 and bfloat16 (each holding
    ais.csv, config.yml and documents.tar.xz). Writes dtype_agreement.md and .csv; refused in one line when the two
    differ in more than the dtype.

    Arguments:
        reference: the float32 folder.
        other: the bfloat16 folder.
        out: where the two files go (default: the bfloat16 folder).
    """
    if (Path(reference) / "ais.csv").is_file():
        return compare_profiles(Path(reference), Path(other), Path(out) if out is not None else Path(other))
    return compare_dtypes(reference, other, out)
