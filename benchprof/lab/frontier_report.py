"""The frontier's numbers and their tables: per (option, size, ability) the own-split AIS, the mean AIS on the
other abilities' splits, the specificity (own − other), each against the random regions of the same size, and
the goal each ability reaches (frontier.py measures; this module reads its records).

Statistics (stats/): AIS = (s − s_ablated) / s on acc_norm; intervals are paired percentile bootstraps over a
split's items (1,000 resamples, each split resampled on its own generator). "vs random" is the predictive
comparison of stats.control.top_against_random: the ability's own AIS (or its specificity) against the
`draws` random regions of the same size, the draws' AIS on the same split (or their specificity for the same
ability), with the bootstrap variances as item noise. The family of the stars is one (option, size): its rows'
claims (own, transfer, specificity, every ability), Benjamini–Hochberg at 0.05 over it, declared by the plan
before any result. A row whose estimate is not above random is never starred.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
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
OTHERS_NEAR_RANDOM = 0.05  # the other splits' mean AIS within this of the random regions' (either direction)
RESAMPLES = 1000
CLAIMS = ("own_vs_random", "transfer_vs_random", "spec_vs_random")  # each (option, size)'s family of "vs random"
COLUMNS = (
    "option", "size", "weights", "k", "ability",
    "own_ais", "own_low", "own_high", "own_to_chance", "own_below_chance", "random_ais", "own_vs_random",
    "own_vs_random_p", "own_vs_random_q", "transfer_ais", "transfer_low", "transfer_high", "random_transfer",
    "transfer_vs_random", "transfer_vs_random_p", "transfer_vs_random_q",
    "other_ais", "other_harm", "other_help", "random_other", "other_vs_random",
    "specificity", "spec_low", "spec_high", "spec_without_help", "random_specificity", "spec_vs_random",
    "spec_vs_random_p", "spec_vs_random_q", "goal",
)  # fmt: skip


def boot_ais(
    original: Sequence[float], ablated: Sequence[float], seed: int, key: str, resamples: int = RESAMPLES
) -> NDArray[np.float64]:
    """Bootstrap samples of one split's AIS (paired over its items)."""
    import numpy as np

    from benchprof.stats.resampling import bootstrap_ais, cell_rng

    return bootstrap_ais(np.asarray(original), np.asarray(ablated)[None], resamples, cell_rng(seed, key))[0]


def ais(original: Sequence[float], ablated: Sequence[float]) -> float:
    from benchprof.stats.impact import impact_score

    return float(impact_score(sum(original) / len(original), sum(ablated) / len(ablated)))


def cell_stats(
    original: dict[str, list[float]],
    ablated: dict[str, list[float]],
    ability: str,
    abilities: Sequence[str],
    seed: int,
    tag: str,
    resamples: int = RESAMPLES,
    chance: float = math.nan,
) -> dict[str, Any]:
    """One region's numbers for `ability`, with bootstrap samples: its own test split's AIS, its transfer split's
    (abilities.transfer_benchmark; NaN where not scored), the other abilities' test splits' mean AIS, their harm
    (the mean of the positive AIS, the others' losses) and help (the mean of the negative ones, their gains), the
    specificity own − other and the same with the others' gains set to zero (own − harm); with the own split's
    `chance` level, its AIS counted down to chance only and whether the region takes it below chance."""
    import numpy as np

    from benchprof.abilities import transfer_benchmark
    from benchprof.stats.impact import ais_to_chance

    others = [b for b in abilities if b != ability]
    boots = {b: boot_ais(original[b], ablated[b], seed, f"{tag}|{b}", resamples) for b in [ability, *others]}
    other_ais = [ais(original[b], ablated[b]) for b in others]
    own = ais(original[ability], ablated[ability])
    transfer, transfer_boot = math.nan, boots[ability] * math.nan
    if (name := transfer_benchmark(ability)) in original:
        transfer, transfer_boot = (
            ais(original[name], ablated[name]),
            boot_ais(original[name], ablated[name], seed, f"{tag}|{name}"),
        )
    other = float(np.mean(other_ais)) if others else math.nan
    spec_boot = boots[ability] - np.mean([boots[b] for b in others], axis=0) if others else boots[ability] * math.nan
    return {
        "own": own, "own_boot": boots[ability], "transfer": transfer, "transfer_boot": transfer_boot,
        "other": other, "harm": float(np.mean([max(v, 0.0) for v in other_ais])) if others else math.nan,
        "help": float(np.mean([min(v, 0.0) for v in other_ais])) if others else math.nan,
        "spec": own - other, "spec_boot": spec_boot,
        "own_to_chance": float(ais_to_chance(np.mean(original[ability]), np.mean(ablated[ability]), chance)),
        "own_below_chance": bool(np.mean(ablated[ability]) < chance),
    }  # fmt: skip


def against_random(cell: dict[str, Any], pool: list[dict[str, Any]], key: str) -> tuple[float, float]:
    """(estimate, one-sided p) of a region's `key` ("own", "transfer", "spec") above the random draws' of its size
    (stats.control.top_against_random, the bootstrap variances as item noise)."""
    import numpy as np

    from benchprof.stats.control import top_against_random

    comparison = top_against_random(
        cell[key], [c[key] for c in pool], top_var=float(np.nanvar(cell[f"{key}_boot"])),
        random_vars=[float(np.nanvar(c[f"{key}_boot"])) for c in pool],
    )  # fmt: skip
    return (comparison.estimate if comparison else math.nan), one_sided(comparison)


def region_row(cell: dict[str, Any], pool: list[dict[str, Any]]) -> dict[str, Any]:
    """A region's row of frontier.csv: its numbers, their intervals, and each claim against the random pool."""
    import numpy as np

    from benchprof.stats.resampling import percentile_ci

    def mean(key: str) -> float:
        return float(np.mean([c[key] for c in pool])) if pool else math.nan

    row = {
        "own_ais": cell["own"], "transfer_ais": cell["transfer"], "other_ais": cell["other"],
        "other_harm": cell["harm"], "other_help": cell["help"], "specificity": cell["spec"],
        "spec_without_help": cell["own"] - cell["harm"], "random_ais": mean("own"), "random_transfer": mean("transfer"),
        "random_other": mean("other"), "random_specificity": mean("spec"),
        "own_to_chance": cell["own_to_chance"], "own_below_chance": cell["own_below_chance"],
    }  # fmt: skip
    row["other_vs_random"] = row["other_ais"] - row["random_other"]
    for key, column in (("own", "own"), ("transfer", "transfer"), ("spec", "spec")):
        row[f"{column}_low"], row[f"{column}_high"] = percentile_ci(cell[f"{key}_boot"])
    for key, claim in zip(("own", "transfer", "spec"), CLAIMS, strict=True):
        if pool and not math.isnan(cell[key]):
            row[claim], row[f"{claim}_p"] = against_random(cell, pool, key)
    return row


def rows_of(
    plan: FrontierPlan, records: list[dict[str, Any]], weights_per_neuron: int, total: int, resamples: int = RESAMPLES
) -> list[dict[str, Any]]:
    """One row per (option, size, ability), the random draws' rows per size last. The family of the stars is one
    (option, size): its rows' claims above random (own, transfer, specificity), Benjamini–Hochberg at ALPHA over
    it, so an option's count at the goal is the same whichever other options and sizes were measured."""
    original = next(r["acc_norm"] for r in records if r["option"] == "original")
    chance = split_chance(next(r for r in records if r["option"] == "original"))
    by_key = {(r["option"], r["region"], r["size"]): r["acc_norm"] for r in records}
    rows: list[dict[str, Any]] = []
    for size in plan.sizes:
        shape = {"size": size, "weights": size * weights_per_neuron, "k": size * weights_per_neuron / total}
        draws = [by_key[key] for d in range(plan.draws) if (key := ("random", f"draw{d}", size)) in by_key]
        pool = {
            a: [cell_stats(original, draw, a, plan.abilities, plan.seed, f"random|{size}|{d}|{a}", resamples,
                           chance.get(a, math.nan))
                for d, draw in enumerate(draws)]
            for a in plan.abilities
        }  # fmt: skip
        for option in plan.options:
            family = []
            for a in plan.abilities:
                if (option, a, size) in by_key:
                    cell = cell_stats(
                        original,
                        by_key[(option, a, size)],
                        a,
                        plan.abilities,
                        plan.seed,
                        f"{option}|{size}|{a}",
                        chance=chance.get(a, math.nan),
                    )
                    family.append({"option": option, **shape, "ability": a, **region_row(cell, pool[a])})
            rows += with_qvalues(family)
        for d in range(len(draws)):
            rows += [
                {"option": "random", **shape, "ability": f"{a} (draw {d})", **region_row(pool[a][d], [])}
                for a in plan.abilities
            ]
    for r in rows:
        for column in COLUMNS:
            r.setdefault(column, math.nan)
        r["goal"] = reaches_goal(r) if r["option"] != "random" else ""
    return rows


def with_qvalues(family: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of one (option, size) with the BH q-value of each claim they hold (CLAIMS), over all of them."""
    from benchprof.stats.multitest import bh_qvalues

    tests = [(row, claim) for row in family for claim in CLAIMS if not math.isnan(row.get(f"{claim}_p", math.nan))]
    for (row, claim), q in zip(
        tests, bh_qvalues([row[f"{claim}_p"] for row, claim in tests]) if tests else [], strict=True
    ):
        row[f"{claim}_q"] = float(q)
    return family


def one_sided(comparison: Any) -> float:
    """The one-sided p-value of "above random" from a two-sided predictive comparison (NaN without one)."""
    if comparison is None or math.isnan(comparison.p_value):
        return math.nan
    half = comparison.p_value / 2
    return half if comparison.estimate > 0 else 1 - half


def starred(row: dict[str, Any], key: str) -> bool:
    q = row.get(f"{key}_q", math.nan)
    return not math.isnan(q) and q < ALPHA and row[key] > 0


def split_chance(record: dict[str, Any]) -> dict[str, float]:
    """Each split's chance level, the mean of 1 / options over its items, from a record's option log-likelihoods
    (records scored before they were kept give none)."""
    from benchprof.stats.impact import chance_level

    logliks = record.get("loglik")
    if not isinstance(logliks, dict):
        return {}
    return {split: chance_level([len(item) for item in items]) for split, items in logliks.items() if items}


def reaches_goal(row: dict[str, Any]) -> str:
    """Which parts of the goal a row meets: "own" (own AIS ≥ 0.20, counted down to chance only where the region takes
    the split below chance, and starred), "transfer" (the same on the transfer
    split; a plan without transfer splits leaves it out), "specific" (specificity starred and the other splits' mean
    AIS within 0.05 of the random regions', in either direction: a region that raises the others as much as it
    lowers its own is not specific), "cheap-random" (random regions' own AIS < 0.05); "all" when every part holds."""
    parts = {
        "own": to_chance(row) >= GOAL_OWN and starred(row, "own_vs_random"),
        "specific": starred(row, "spec_vs_random") and abs(row["other_vs_random"]) <= OTHERS_NEAR_RANDOM,
        "cheap-random": row["random_ais"] < GOAL_RANDOM,
    }
    if not math.isnan(row["transfer_ais"]):
        parts["transfer"] = row["transfer_ais"] >= GOAL_OWN and starred(row, "transfer_vs_random")
    met = [p for p in ("own", "transfer", "specific", "cheap-random") if parts.get(p)]
    return "all" if len(met) == len(parts) else "+".join(met) or "none"


def to_chance(row: dict[str, Any]) -> float:
    """A row's own AIS with removal counted down to chance only; the raw AIS where no chance level is known.
    Below chance the region steers the model to wrong answers, which the raw AIS reads as more removal."""
    value = row.get("own_to_chance", math.nan)
    return row["own_ais"] if value is None or math.isnan(value) else float(value)


GOAL_RESAMPLES, GOAL_INNER = 100, 200  # item resamples of the goal count; bootstrap resamples inside each


def item_resamples(records: list[dict[str, Any]], resamples: int, rng: Any) -> Iterator[list[dict[str, Any]]]:
    """`resamples` copies of a frontier's records with every split's items drawn with replacement, the same draw for
    every region (paired): the records a count is recomputed on to see how much it moves with other items."""
    import numpy as np

    sizes = {name: len(values) for name, values in records[0]["acc_norm"].items()}
    arrays = [{name: np.asarray(values) for name, values in r["acc_norm"].items()} for r in records]
    for _ in range(resamples):
        drawn = {name: rng.integers(0, n, n) for name, n in sizes.items()}
        yield [
            {**r, "acc_norm": {name: values[drawn[name]].tolist() for name, values in a.items()}}
            for r, a in zip(records, arrays, strict=True)
        ]


def goal_counts(
    plan: FrontierPlan,
    records: list[dict[str, Any]],
    weights_per_neuron: int,
    total: int,
    resamples: int = GOAL_RESAMPLES,
) -> dict[tuple[str, int], list[int]]:
    """Per (option, size), the number of abilities at the goal in each of `resamples` resamples of the items: every
    split's items drawn with replacement, the same draw for every region (paired), the whole report recomputed on
    them (GOAL_INNER bootstrap resamples inside). How much the count a reader sees would move with other items."""
    from benchprof.stats.resampling import cell_rng

    counts: dict[tuple[str, int], list[int]] = {}
    for again in item_resamples(records, resamples, cell_rng(plan.seed, "goal counts")):
        at_goal: dict[tuple[str, int], int] = {}
        for row in rows_of(plan, again, weights_per_neuron, total, GOAL_INNER):
            if row["option"] != "random":
                key = (row["option"], row["size"])
                at_goal[key] = at_goal.get(key, 0) + (row["goal"] == "all")
        for key, count in at_goal.items():
            counts.setdefault(key, []).append(count)
    return counts


def goal_spread(counts: list[int]) -> str:
    """A goal count's distribution as the report shows it: "3 (20%), 4 (35%), ..." in order of the count."""
    shares = {n: counts.count(n) / len(counts) for n in sorted(set(counts))}
    return ", ".join(f"{n} ({share:.0%})" for n, share in shares.items())


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (option, size): the mean over the abilities of each AIS (own, transfer, other, its harm and help, random
    regions' own and other), and the abilities meeting the goal."""
    import numpy as np

    out = []
    keys = sorted({(r["option"], r["size"]) for r in rows if r["option"] != "random"}, key=lambda t: (t[0], t[1]))
    for option, size in keys:
        group = [r for r in rows if r["option"] == option and r["size"] == size]

        def mean(column: str, group: list[dict[str, Any]] = group) -> float:
            return float(np.mean([r[column] for r in group]))

        out.append({
            "option": option, "size": size, "k": group[0]["k"], "own": mean("own_ais"),
            "transfer": mean("transfer_ais"), "other": mean("other_ais"), "harm": mean("other_harm"),
            "help": mean("other_help"), "random": mean("random_ais"), "random_other": mean("random_other"),
            "goal": sum(r["goal"] == "all" for r in group), "abilities": len(group),
        })  # fmt: skip
    return out


def below(row: dict[str, Any]) -> str:
    """The mark of an own AIS whose region takes the split below chance, with its AIS counted down to chance."""
    if not row.get("own_below_chance"):
        return ""
    return f" ↓chance ({row['own_to_chance']:+.3f} to chance)"


def markdown(plan: FrontierPlan, rows: list[dict[str, Any]], spread: dict[tuple[str, int], str] | None = None) -> str:
    def star(r: dict[str, Any], key: str) -> str:
        return "*" if starred(r, key) else ""

    def cell(value: float, low: float = math.nan, high: float = math.nan, mark: str = "") -> str:
        if math.isnan(value):
            return "–"
        return f"{value:+.3f}{mark}" + (f" [{low:+.2f}, {high:+.2f}]" if not math.isnan(low) else "")

    transfer = f", acc_norm on {plan.transfer_items} transfer items" if plan.transfer_items else ""
    mean = plan.ablation == "mean"
    # without transfer splits the goal counts own and specificity only (reaches_goal); the header must say so
    goal_transfer = "" if plan.transfer_items else " (no transfer split was scored: the goal here leaves it out)"
    lines = [
        f"# Frontier: {plan.model_given or plan.model}",
        "",
        f"Abilities {', '.join(plan.abilities)}; attribution on {plan.train_items} train items each"
        + (f" (from item {plan.train_from} on)" if plan.train_from else "")
        + ", acc_norm (scored in "
        f"{plan.dtype}) on {plan.test_items} test items each{transfer}; {plan.draws} random regions per size"
        + ("; each region's neurons held at their mean over the train items (mean ablation). " if mean else ". ")
        + "AIS = relative drop; own: "
        "the ability's test split; transfer: its transfer split (formats its train split never uses); other: mean "
        "over the other abilities' test splits, split into harm (their losses) and help (their gains); specificity = "
        "own − other, and own − harm (the others' gains set to zero); ↓chance: the region takes its own split below "
        "chance (steering to wrong answers, not removal), with its AIS counted down to chance only, which the goal "
        "reads. `*`: above the random regions of that size, "
        f"Benjamini–Hochberg q < {ALPHA} within one option and size (its own, transfer and specificity claims; the "
        "family is fixed before any result, so adding an option or a size moves no other star). Goal: own and "
        f"transfer AIS ≥ {GOAL_OWN} and starred{goal_transfer}, specificity starred with the other splits' mean AIS "
        f"within {OTHERS_NEAR_RANDOM} of the random regions' (help counted like harm), random regions' own AIS < "
        f"{GOAL_RANDOM}.",
        "",
        "| option | neurons | k | own AIS | transfer AIS | other AIS (harm / help) | random own / other "
        f"| abilities at the goal | over {GOAL_RESAMPLES} item resamples |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summary(rows):
        lines.append(
            f"| {s['option']} | {s['size']} | {s['k']:.2g} | {s['own']:+.3f} | {cell(s['transfer'])} | "
            f"{s['other']:+.3f} ({s['harm']:+.3f} / {s['help']:+.3f}) | {s['random']:+.3f} / {s['random_other']:+.3f} "
            f"| {s['goal']} of {s['abilities']} | {(spread or {}).get((s['option'], s['size']), '–')} |"
        )
    lines += [
        "",
        "| option | neurons | ability | own AIS [95%] | transfer AIS [95%] | other (harm / help) | other − random "
        "| specificity [95%] | without help | random own | goal |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["option"] == "random":
            continue
        lines.append(
            f"| {r['option']} | {r['size']} | {r['ability']} | "
            f"{cell(r['own_ais'], r['own_low'], r['own_high'], star(r, 'own_vs_random'))}{below(r)} | "
            f"{cell(r['transfer_ais'], r['transfer_low'], r['transfer_high'], star(r, 'transfer_vs_random'))} | "
            f"{r['other_ais']:+.3f} ({r['other_harm']:+.3f} / {r['other_help']:+.3f}) | {cell(r['other_vs_random'])} | "
            f"{cell(r['specificity'], r['spec_low'], r['spec_high'], star(r, 'spec_vs_random'))} | "
            f"{r['spec_without_help']:+.3f} | {cell(r['random_ais'])} | {r['goal']} |"
        )
    return "\n".join(lines) + "\n"


V1_NOTE = (
    "**Scored by the frontier's scorer v1**, whose acc_norm divided each option's log-likelihood by the characters "
    "of ' option' (the space before it counted); lm-eval's, and the pipeline's, divide by the option's own "
    "characters. These figures are on that other metric; the records keep no log-likelihoods to re-derive them "
    "(docs/research/frontier.md#one-scorer)."
)


def scored_by_v1(records: list[dict[str, Any]]) -> bool:
    """Whether any record was scored before the scorer kept the options' log-likelihoods: scorer v1 (V1_NOTE)."""
    return any("loglik" not in r for r in records)


def write_report(
    plan: FrontierPlan,
    records: list[dict[str, Any]],
    weights_per_neuron: int,
    total: int,
    goal_resamples: int = GOAL_RESAMPLES,
) -> list[Path]:
    """frontier.csv (every row), frontier.md (the summary and the rows, each goal count with its distribution over
    `goal_resamples` item resamples, goal_counts), goal_counts.csv and frontier.png (own against other)."""
    from benchprof.profile.plots import frontier_plot

    rows = rows_of(plan, records, weights_per_neuron, total)
    spread = goal_counts(plan, records, weights_per_neuron, total, goal_resamples) if goal_resamples else {}
    layout = FrontierLayout(plan.out)
    csv_path, md_path, png_path = layout.report_files()
    write_csv(csv_path, COLUMNS, rows, digits=6)
    counts = [
        {"option": o, "size": n, "abilities_at_goal": c, "share": found.count(c) / len(found)}
        for (o, n), found in sorted(spread.items())
        for c in sorted(set(found))
    ]
    write_csv(layout.goal_counts_file, ("option", "size", "abilities_at_goal", "share"), counts, digits=6)
    text = markdown(plan, rows, {key: goal_spread(found) for key, found in spread.items()})
    if scored_by_v1(records):
        title, rest = text.split("\n", 1)
        text = f"{title}\n\n{V1_NOTE}\n{rest}"
    write_text(md_path, text)
    frontier_plot(summary(rows), png_path)
    return [csv_path, md_path, layout.goal_counts_file, png_path]
