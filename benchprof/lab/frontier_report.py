"""The frontier's numbers and their tables: per (option, size, ability) the own-split AIS, the mean AIS on the
other abilities' splits, the specificity (own − other), each against the random regions of the same size, and
the goal each ability reaches (frontier.py measures; this module reads its records).

Statistics (stats/): AIS = (s − s_ablated) / s on acc_norm; intervals are paired percentile bootstraps over a
split's items (1,000 resamples, each split resampled on its own generator). "vs random" is the predictive
comparison of stats.control.top_against_random: the ability's own AIS (or its specificity) against the
`draws` random regions of the same size, the draws' AIS on the same split (or their specificity for the same
ability), with the bootstrap variances as item noise. The family of the stars is every "vs random" row of the
frontier (both claims, every option, size and ability): Benjamini–Hochberg at 0.05 over it. A row whose
estimate is not above random is never starred.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchprof.core.layout import FrontierLayout
from benchprof.core.storage import write_csv, write_text

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from benchprof.lab.frontier_plan import FrontierPlan

ALPHA = 0.05
GOAL_OWN, GOAL_RANDOM = 0.20, 0.05  # own AIS at least, random regions' mean AIS below (issue goal)
RESAMPLES = 1000
COLUMNS = (
    "option", "size", "weights", "k", "ability", "own_ais", "own_low", "own_high", "other_ais", "random_ais",
    "own_vs_random", "own_vs_random_p", "own_vs_random_q", "specificity", "spec_low", "spec_high",
    "random_specificity", "spec_vs_random", "spec_vs_random_p", "spec_vs_random_q", "goal",
)  # fmt: skip


def boot_ais(original: Sequence[float], ablated: Sequence[float], seed: int, key: str) -> NDArray[np.float64]:
    """Bootstrap samples of one split's AIS (paired over its items)."""
    import numpy as np

    from benchprof.stats.resampling import bootstrap_ais, cell_rng

    return bootstrap_ais(np.asarray(original), np.asarray(ablated)[None], RESAMPLES, cell_rng(seed, key))[0]


def ais(original: Sequence[float], ablated: Sequence[float]) -> float:
    from benchprof.stats.impact import impact_score

    return float(impact_score(sum(original) / len(original), sum(ablated) / len(ablated)))


def cell_stats(
    original: dict[str, list[float]], ablated: dict[str, list[float]], ability: str, seed: int, tag: str
) -> dict[str, Any]:
    """Own AIS, other AIS and specificity of one region for `ability`, with bootstrap samples."""
    import numpy as np

    others = [b for b in original if b != ability]
    boots = {b: boot_ais(original[b], ablated[b], seed, f"{tag}|{b}") for b in original}
    own = ais(original[ability], ablated[ability])
    other = float(np.mean([ais(original[b], ablated[b]) for b in others])) if others else math.nan
    own_boot = boots[ability]
    spec_boot = own_boot - np.mean([boots[b] for b in others], axis=0) if others else own_boot * math.nan
    return {"own": own, "other": other, "spec": own - other, "own_boot": own_boot, "spec_boot": spec_boot}


def rows_of(
    plan: FrontierPlan, records: list[dict[str, Any]], weights_per_neuron: int, total: int
) -> list[dict[str, Any]]:
    """One row per (option, size, ability), the random pool's rows per size last; q-values over the family."""
    import numpy as np

    from benchprof.stats.control import top_against_random
    from benchprof.stats.multitest import bh_qvalues
    from benchprof.stats.resampling import percentile_ci

    original = next(r["acc_norm"] for r in records if r["option"] == "original")
    by_key = {(r["option"], r["region"], r["size"]): r["acc_norm"] for r in records}
    rows: list[dict[str, Any]] = []
    for size in plan.sizes:
        draws = [
            by_key[("random", f"draw{d}", size)] for d in range(plan.draws) if ("random", f"draw{d}", size) in by_key
        ]
        pool = {
            a: [cell_stats(original, draw, a, plan.seed, f"random|{size}|{d}|{a}") for d, draw in enumerate(draws)]
            for a in plan.abilities
        }
        for option in plan.options:
            for a in plan.abilities:
                if (option, a, size) not in by_key:
                    continue
                cell = cell_stats(original, by_key[(option, a, size)], a, plan.seed, f"{option}|{size}|{a}")
                own_ci, spec_ci = percentile_ci(cell["own_boot"]), percentile_ci(cell["spec_boot"])
                own_cmp = top_against_random(
                    cell["own"], [c["own"] for c in pool[a]], top_var=float(np.nanvar(cell["own_boot"])),
                    random_vars=[float(np.nanvar(c["own_boot"])) for c in pool[a]],
                )  # fmt: skip
                spec_cmp = top_against_random(
                    cell["spec"], [c["spec"] for c in pool[a]], top_var=float(np.nanvar(cell["spec_boot"])),
                    random_vars=[float(np.nanvar(c["spec_boot"])) for c in pool[a]],
                )  # fmt: skip
                rows.append({
                    "option": option, "size": size, "weights": size * weights_per_neuron,
                    "k": size * weights_per_neuron / total, "ability": a,
                    "own_ais": cell["own"], "own_low": own_ci[0], "own_high": own_ci[1], "other_ais": cell["other"],
                    "random_ais": float(np.mean([c["own"] for c in pool[a]])) if pool[a] else math.nan,
                    "own_vs_random": own_cmp.estimate if own_cmp else math.nan,
                    "own_vs_random_p": one_sided(own_cmp),
                    "specificity": cell["spec"], "spec_low": spec_ci[0], "spec_high": spec_ci[1],
                    "random_specificity": float(np.mean([c["spec"] for c in pool[a]])) if pool[a] else math.nan,
                    "spec_vs_random": spec_cmp.estimate if spec_cmp else math.nan,
                    "spec_vs_random_p": one_sided(spec_cmp),
                })  # fmt: skip
        for d in range(len(draws)):
            for a in plan.abilities:
                c = pool[a][d]
                rows.append({
                    "option": "random", "size": size, "weights": size * weights_per_neuron,
                    "k": size * weights_per_neuron / total, "ability": f"{a} (draw {d})", "own_ais": c["own"],
                    "own_low": percentile_ci(c["own_boot"])[0], "own_high": percentile_ci(c["own_boot"])[1],
                    "other_ais": c["other"], "random_ais": math.nan, "specificity": c["spec"],
                    "spec_low": percentile_ci(c["spec_boot"])[0], "spec_high": percentile_ci(c["spec_boot"])[1],
                    "random_specificity": math.nan,
                })  # fmt: skip
    family = [(i, key) for i, r in enumerate(rows) for key in ("own_vs_random", "spec_vs_random") if f"{key}_p" in r]
    q = [float(v) for v in bh_qvalues([rows[i][f"{key}_p"] for i, key in family])] if family else []
    for (i, key), value in zip(family, q, strict=True):
        rows[i][f"{key}_q"] = float(value)
    for r in rows:
        for column in COLUMNS:
            r.setdefault(column, math.nan)
        r["goal"] = reaches_goal(r) if r["option"] != "random" else ""
    return rows


def one_sided(comparison: Any) -> float:
    """The one-sided p-value of "above random" from a two-sided predictive comparison (NaN without one)."""
    if comparison is None or math.isnan(comparison.p_value):
        return math.nan
    half = comparison.p_value / 2
    return half if comparison.estimate > 0 else 1 - half


def starred(row: dict[str, Any], key: str) -> bool:
    q = row.get(f"{key}_q", math.nan)
    return not math.isnan(q) and q < ALPHA and row[key] > 0


def reaches_goal(row: dict[str, Any]) -> str:
    """Which parts of the goal a row meets: own ≥ 0.20 and starred, specificity starred, random < 0.05."""
    parts = [
        "own" if row["own_ais"] >= GOAL_OWN and starred(row, "own_vs_random") else "",
        "specific" if starred(row, "spec_vs_random") else "",
        "cheap-random" if row["random_ais"] < GOAL_RANDOM else "",
    ]
    met = [p for p in parts if p]
    return "all" if len(met) == 3 else "+".join(met) or "none"


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (option, size): mean own, other and random AIS over the abilities, and abilities meeting the goal."""
    import numpy as np

    out = []
    keys = sorted({(r["option"], r["size"]) for r in rows if r["option"] != "random"}, key=lambda t: (t[0], t[1]))
    for option, size in keys:
        group = [r for r in rows if r["option"] == option and r["size"] == size]
        out.append({
            "option": option, "size": size, "k": group[0]["k"], "own": float(np.mean([r["own_ais"] for r in group])),
            "other": float(np.mean([r["other_ais"] for r in group])),
            "random": float(np.mean([r["random_ais"] for r in group])),
            "goal": sum(r["goal"] == "all" for r in group), "abilities": len(group),
        })  # fmt: skip
    return out


def markdown(plan: FrontierPlan, rows: list[dict[str, Any]]) -> str:
    def star(r: dict[str, Any], key: str) -> str:
        return "*" if starred(r, key) else ""

    lines = [
        f"# Frontier: {plan.model_given or plan.model}",
        "",
        f"Abilities {', '.join(plan.abilities)}; attribution on {plan.train_items} train items each, acc_norm on "
        f"{plan.test_items} test items each; {plan.draws} random regions per size. AIS = relative drop; own: the "
        "ability's split; other: mean over the other splits; specificity = own − other; `*`: above the random "
        f"regions of that size, Benjamini–Hochberg q < {ALPHA} over every 'vs random' row.",
        "",
        "| option | neurons | k | own AIS | other AIS | random AIS | abilities at the goal |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in summary(rows):
        lines.append(
            f"| {s['option']} | {s['size']} | {s['k']:.2g} | {s['own']:+.3f} | {s['other']:+.3f} | {s['random']:+.3f} "
            f"| {s['goal']} of {s['abilities']} |"
        )
    lines += [
        "",
        "| option | neurons | ability | own AIS [95%] | other | specificity [95%] | random own | random spec | goal |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["option"] == "random":
            continue
        lines.append(
            f"| {r['option']} | {r['size']} | {r['ability']} | {r['own_ais']:+.3f}{star(r, 'own_vs_random')} "
            f"[{r['own_low']:+.2f}, {r['own_high']:+.2f}] | {r['other_ais']:+.3f} | {r['specificity']:+.3f}"
            f"{star(r, 'spec_vs_random')} [{r['spec_low']:+.2f}, {r['spec_high']:+.2f}] | {r['random_ais']:+.3f} "
            f"| {r['random_specificity']:+.3f} | {r['goal']} |"
        )
    return "\n".join(lines) + "\n"


def write_report(plan: FrontierPlan, records: list[dict[str, Any]], weights_per_neuron: int, total: int) -> list[Path]:
    """frontier.csv (every row), frontier.md (the summary and the rows) and frontier.png (own against other)."""
    from benchprof.profile.plots import frontier_plot

    rows = rows_of(plan, records, weights_per_neuron, total)
    csv_path, md_path, png_path = FrontierLayout(plan.out).report_files()
    write_csv(csv_path, COLUMNS, rows, digits=6)
    write_text(md_path, markdown(plan, rows))
    frontier_plot(summary(rows), png_path)
    return [csv_path, md_path, png_path]
