"""How well each neuron score finds the neurons a planted model's abilities live in (docs/research/frontier.md): the
planted recovery of `scripts/frontier_planted.py`, its ground truth read from planted.json, and its figures over several
builds."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchprof import BenchprofError
from benchprof.profile.formatting import MISSING_CELL
from benchprof.stages.neurons import (
    FRONTIER_SCORES,
    GENERAL,
    ITERATIVE,
    STATISTICS,
    Neurons,
    general_statistic,
    general_text,
    iterative_contrast,
    model_neurons,
    option_scores,
    reads_general,
    statistics_of,
    top_neurons,
)

if TYPE_CHECKING:
    import numpy as np
    import torch
    from numpy.typing import NDArray
    from transformers import PreTrainedTokenizerBase

    from benchprof.lab.frontier_plan import FrontierPlan


def planted_probe(
    folder: Path, items: int
) -> tuple[dict[str, Any], torch.nn.Module, PreTrainedTokenizerBase, dict[str, list[dict[str, Any]]]]:
    """A planted model folder (`plant_real.py apply`) as its recovery reads it: planted.json, the model in float32
    and its tokenizer, and the records: each planted ability's first `items` probe items (never planted), and
    each generated ability's first `items` train items (the contrast)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from benchprof.abilities import ABILITIES, splits
    from benchprof.abilities.invented import invented_splits
    from benchprof.lab.planted import planted_json_file

    info = json.loads(planted_json_file(folder).read_text())
    seed = int(info["settings"]["data_seed"])
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    records = {a: invented_splits(a, seed)["probe"][:items] for a in info["neurons"]}
    records.update({a: splits(a, items, 0, 1234)[0] for a in ABILITIES})
    return info, model, tok, records


def planted_truth(neurons: Neurons, layers: dict[str, list[int]]) -> NDArray[np.bool_]:
    """Which neuron ids (layer × intermediate + j) one planted ability lives in: planted.json's {layer: [j, ...]}."""
    import numpy as np

    truth = np.zeros(neurons.count, dtype=bool)
    for layer, js in layers.items():
        truth[[int(layer) * neurons.intermediate + j for j in js]] = True
    return truth


def planted_recovery(
    folder: Path, items: int = 120, threads: int = 1, options: Sequence[str] = FRONTIER_SCORES
) -> list[dict[str, Any]]:
    """How well each neuron score finds the neurons a planted model's abilities live in (planted.json of a
    folder `plant_real.py apply` wrote): per option and planted ability, the AUROC of its planted neurons in
    the score order and the precision of its top |R_a| neurons. Attribution on each planted ability's probe
    split (never planted) and, for the contrasts, on the ten generated abilities' train splits and on general text
    the planted model samples itself (neurons.general_text, seed 0). `options`: the neuron scores measured."""
    import numpy as np
    import torch

    from benchprof.lab.validation import auroc

    torch.set_num_threads(threads)
    info, model, tok, records = planted_probe(folder, items)
    neurons = model_neurons(model)
    read = list(dict.fromkeys(s for o in options for s in statistics_of(o)))
    statistics = {name: {a: STATISTICS[name](model, tok, r) for a, r in records.items()} for name in read}
    if any(reads_general(o) for o in options):
        texts = general_text(model, tok, 0, items)
        for name in read:
            statistics[name][GENERAL] = general_statistic(model, texts, name)
    rows = []
    for option in options:
        for ability, layers in info["neurons"].items():
            truth = planted_truth(neurons, layers)
            size = int(truth.sum())
            if option == ITERATIVE:  # its order: the neurons in the order chosen, then the last round's scores
                values = statistics["attribution"]
                top, scores = iterative_contrast(model, tok, values, ability, records[ability], size)
                scores[top] = scores[np.isfinite(scores)].max() + np.arange(size, 0, -1)  # first chosen highest
            else:
                scores = option_scores(statistics, ability, option)
                top = top_neurons(scores, size)
            rows.append({
                "option": option, "ability": ability, "auroc": auroc(scores, truth),
                "top_neuron_precision": float(truth[top].mean()), "chance": float(truth.mean()),
            })  # fmt: skip
    return rows


def recovery_over_builds(
    builds: list[list[dict[str, Any]]],
) -> dict[str, tuple[tuple[float, float, float], tuple[float, float, float]]]:
    """Per option, (AUROC, top-neuron precision) over several planted builds (planted_recovery's rows of each):
    each build's mean over its planted abilities, then the mean over builds with its 95% t interval, clipped to
    [0, 1] (validation.share_interval: how much the figure would move with another build)."""
    from benchprof.lab.validation import share_interval

    out = {}
    for option in dict.fromkeys(r["option"] for build in builds for r in build):
        per_build = [[r for r in build if r["option"] == option] for build in builds]
        auroc = [sum(r["auroc"] for r in rows) / len(rows) for rows in per_build]
        precision = [sum(r["top_neuron_precision"] for r in rows) / len(rows) for rows in per_build]
        out[option] = (share_interval(auroc), share_interval(precision))
    return out


def planted_effects(folder: Path, planted: Sequence[str]) -> list[dict[str, Any]]:
    """What each region of a frontier measured on a planted model (`benchprof frontier` on a config whose model is a
    planted folder) does, per option, size and planted ability: its AIS on its own planted ability's test split,
    the mean on the other planted abilities' and on the real abilities' splits, each beside the same for the
    random regions of its size, and the own AIS against those random regions (stats.control.top_against_random,
    one-sided p). Reads the folder's plan.json and evaluations.jsonl only; refused in one line, before any file is
    written, for an ability the plan does not hold, a region of the plan without its record (a draw of the random
    baseline included) and records that disagree with the plan (frontier_plan.plan_records)."""
    return planted_rows(*planted_frontier(folder, planted), planted)


def planted_frontier(folder: Path, planted: Sequence[str]) -> tuple[FrontierPlan, list[dict[str, Any]]]:
    """A planted model's frontier folder read and checked for planted_effects: its plan and every record of it."""
    from benchprof.core.layout import FrontierLayout
    from benchprof.lab.frontier_plan import plan_records, recorded_plan

    layout = FrontierLayout(Path(folder))
    if not layout.plan_file.is_file():
        raise BenchprofError(f"{layout.plan_file}: not found; measure the planted model's frontier first")
    plan = recorded_plan(Path(folder))[0]
    unknown = [a for a in planted if a not in plan.abilities]
    if unknown or not planted:
        raise BenchprofError(
            f"{', '.join(unknown) or 'no ability given'}: not an ability of {layout.plan_file} (it holds "
            f"{', '.join(plan.abilities)}); give the planted abilities its frontier measured"
        )
    return plan, plan_records(plan, layout.records_file)  # every region of the plan, each random baseline draw


def planted_rows(
    plan: FrontierPlan, records: list[dict[str, Any]], planted: Sequence[str], resamples: int | None = None
) -> list[dict[str, Any]]:
    """planted_effects' rows from a plan and its records (`resamples`: the bootstrap inside each cell, default
    frontier_report's)."""
    import numpy as np

    from benchprof.lab.frontier_report import RESAMPLES, against_random, ais, cell_stats, split_chance

    boots = RESAMPLES if resamples is None else resamples
    original = next(r["acc_norm"] for r in records if r["option"] == "original")
    chance = split_chance(next(r for r in records if r["option"] == "original"))
    by_key = {(r["option"], r["region"], r["size"]): r["acc_norm"] for r in records}
    abilities = plan.abilities
    real = [a for a in abilities if a not in planted]

    def mean_ais(ablated: dict[str, list[float]], splits: Sequence[str]) -> float:
        return float(np.mean([ais(original[b], ablated[b]) for b in splits])) if splits else math.nan

    rows = []
    for size in plan.sizes:
        draws = [by_key[k] for d in range(plan.draws) if (k := ("random", f"draw{d}", size)) in by_key]
        for option in plan.options:
            for ability in planted:
                if (option, ability, size) not in by_key:
                    continue
                ablated, others = by_key[(option, ability, size)], [b for b in planted if b != ability]
                pool = [
                    cell_stats(original, d, ability, abilities, 0, f"random|{size}|{i}", boots)
                    for i, d in enumerate(draws)
                ]
                cell = cell_stats(
                    original, ablated, ability, abilities, 0, f"{option}|{size}|{ability}", boots,
                    chance=chance.get(ability, math.nan),
                )  # fmt: skip
                estimate, p = against_random(cell, pool, "own") if pool else (math.nan, math.nan)
                rows.append({
                    "option": option, "size": size, "ability": ability, "own_ais": cell["own"],
                    "own_to_chance": cell["own_to_chance"],
                    "random_own": float(np.mean([c["own"] for c in pool])) if pool else math.nan,
                    "own_vs_random": estimate, "own_vs_random_p": p,
                    "other_planted_ais": mean_ais(ablated, others),
                    "random_other_planted": float(np.mean([mean_ais(d, others) for d in draws])) if draws else math.nan,
                    "real_ais": mean_ais(ablated, real),
                    "random_real": float(np.mean([mean_ais(d, real) for d in draws])) if draws else math.nan,
                })  # fmt: skip
    return rows


EFFECT_COLUMNS = (
    "option", "size", "ability", "own_ais", "own_to_chance", "random_own", "own_vs_random", "own_vs_random_p",
    "other_planted_ais", "random_other_planted", "real_ais", "random_real",
)  # fmt: skip


SPARE_MARGIN = 0.05  # how much more than random regions a region may cost the other planted abilities


def removes(row: dict[str, Any]) -> bool:
    """Whether a region removes its planted ability: own AIS ≥ 0.50, counted down to chance only (a region that
    takes the split below chance steers, it does not remove more), and above the random regions (one-sided
    p < 0.05)."""
    from benchprof.lab.frontier_report import to_chance

    return bool(to_chance(row) >= 0.5 and row["own_vs_random_p"] < 0.05)


def spares(row: dict[str, Any]) -> bool:
    """Whether a region spares the other planted abilities: their mean AIS at most 0.05 above the random regions'
    of its size. One-sided: a region that costs them less than random regions do spares them all the more (the
    two-sided band failed such regions). With one planted ability there are no others to spare (both NaN): the
    goal is its removal alone."""
    if math.isnan(row["other_planted_ais"]) and math.isnan(row["random_other_planted"]):
        return True
    return row["other_planted_ais"] - row["random_other_planted"] <= SPARE_MARGIN


def planted_goal_counts(
    plan: FrontierPlan, records: list[dict[str, Any]], planted: Sequence[str], resamples: int = 100
) -> dict[tuple[str, int], list[int]]:
    """Per (option, size), how many regions meet the planted goal (removes and spares) in each of `resamples`
    resamples of the items: every split's items drawn with replacement, the same draw for every region (paired),
    the rows recomputed on them (frontier_report.GOAL_INNER bootstrap resamples inside): how much the count a
    reader sees would move with other items."""
    from benchprof.lab.frontier_report import GOAL_INNER, item_resamples
    from benchprof.stats.resampling import cell_rng

    counts: dict[tuple[str, int], list[int]] = {}
    for again in item_resamples(records, resamples, cell_rng(plan.seed, "planted goal counts")):
        at_goal: dict[tuple[str, int], int] = {}
        for row in planted_rows(plan, again, planted, GOAL_INNER):
            key = (row["option"], row["size"])
            at_goal[key] = at_goal.get(key, 0) + (removes(row) and spares(row))
        for key, count in at_goal.items():
            counts.setdefault(key, []).append(count)
    return counts


def signed(value: float) -> str:
    """An AIS in planted_effects.md: signed, three decimals; MISSING_CELL where it was not scored (NaN)."""
    return MISSING_CELL if math.isnan(value) else f"{value:+.3f}"


def p_cell(p: float) -> str:
    """A p-value in planted_effects.md: two significant digits; MISSING_CELL where no random region was scored."""
    return MISSING_CELL if math.isnan(p) else f"{p:.2g}"


def v1_note(folders: Sequence[Path]) -> list[str]:
    """The lines a planted-effects report opens with when any of its frontier folders was scored by scorer v1
    (frontier_report.V1_NOTE), naming those folders; none otherwise."""
    from benchprof.core.layout import FrontierLayout
    from benchprof.core.storage import read_records
    from benchprof.lab.frontier_report import V1_NOTE, scored_by_v1

    old = [f for f in folders if scored_by_v1(read_records(FrontierLayout(f).records_file))]
    if not old:
        return []
    named = "" if len(old) == len(folders) else f" (builds {', '.join(f.name for f in old)})"
    return [V1_NOTE.replace("**Scored", f"**Scored{named}", 1), ""]


def write_planted_effects(folder: Path, planted: Sequence[str], rows: list[dict[str, Any]] | None = None) -> list[Path]:
    """planted_effects.csv and planted_effects.md beside a planted model's frontier: per option, its mean over the
    planted abilities and each region's row (`rows`: planted_effects' rows of the folder, read there if None)."""
    import numpy as np

    from benchprof.core.storage import write_csv, write_text
    from benchprof.lab.frontier_report import goal_spread

    plan, records = planted_frontier(folder, planted)  # read once: the rows and their spread over item resamples
    rows = planted_rows(plan, records, planted) if rows is None else rows
    spread = planted_goal_counts(plan, records, planted)
    csv_path, md_path = Path(folder) / "planted_effects.csv", Path(folder) / "planted_effects.md"
    write_csv(csv_path, EFFECT_COLUMNS, rows, digits=6)
    lines = [
        f"# What each option's regions remove on the planted model ({', '.join(planted)} planted)",
        "",
        *v1_note([Path(folder)]),
        "AIS = relative drop of acc_norm on a test split; own: the region's planted ability; other planted: the mean "
        "over the other planted abilities; real: the mean over the real abilities' splits; random: the random "
        f"regions of the same size ({MISSING_CELL} where no real split was scored); p: own above random (predictive t, "
        "one-sided); goal: own removed and the other planted abilities' AIS at most 0.05 above random (one-sided: "
        "sparing them more than random regions do meets it); over 100 item resamples: how often each goal count "
        "comes out when every split's items are drawn again (the same draw for every region).",
        "",
        "| option | neurons | own AIS (mean) | random own | other planted | random | real | random | own removed | "
        "goal | over 100 item resamples |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for option in dict.fromkeys(r["option"] for r in rows):
        for size in dict.fromkeys(r["size"] for r in rows if r["option"] == option):
            group = [r for r in rows if (r["option"], r["size"]) == (option, size)]

            def mean(column: str, group: list[dict[str, Any]] = group) -> str:
                return signed(float(np.mean([r[column] for r in group])))

            removed = sum(removes(r) for r in group)
            at_goal = sum(removes(r) and spares(r) for r in group)
            lines.append(
                f"| {option} | {size} | {mean('own_ais')} | {mean('random_own')} | {mean('other_planted_ais')} | "
                f"{mean('random_other_planted')} | {mean('real_ais')} | {mean('random_real')} | "
                f"{removed} of {len(group)} (own ≥ 0.50, p < 0.05) | {at_goal} of {len(group)} | "
                f"{goal_spread(spread[(option, size)]) if (option, size) in spread else MISSING_CELL} |"
            )
    lines += ["", "| option | neurons | ability | own [random] | p | other planted [random] | real [random] |",
              "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        lines.append(
            f"| {r['option']} | {r['size']} | {r['ability']} | {signed(r['own_ais'])} [{signed(r['random_own'])}] | "
            f"{p_cell(r['own_vs_random_p'])} | "
            f"{signed(r['other_planted_ais'])} [{signed(r['random_other_planted'])}] | "
            f"{signed(r['real_ais'])} [{signed(r['random_real'])}] |"
        )
    write_text(md_path, "\n".join(lines) + "\n")
    return [csv_path, md_path]


def effects_over_builds(builds: Sequence[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """What each option's regions do over several builds of one plant (planted_effects' rows of each build), per
    option and size: the own AIS as each build's mean over its planted abilities, then their mean over builds with
    its 95% t interval (validation.mean_interval: how much it would move with another build); how many regions of
    all builds remove their planted ability and how many are at the goal (removes, spares); and the range over every
    region of the other planted abilities' and the real splits' AIS minus the random regions'. An option measured on
    only some builds is summarised over those."""
    import numpy as np

    from benchprof.lab.validation import mean_interval

    out = []
    for option, size in dict.fromkeys((r["option"], r["size"]) for build in builds for r in build):
        per_build = [g for build in builds if (g := [r for r in build if (r["option"], r["size"]) == (option, size)])]
        rows = [r for g in per_build for r in g]
        own, low, high = mean_interval([float(np.mean([r["own_ais"] for r in g])) for g in per_build])
        others = [r["other_planted_ais"] - r["random_other_planted"] for r in rows]
        real = [r["real_ais"] - r["random_real"] for r in rows]
        out.append({
            "option": option, "size": size, "builds": len(per_build), "own_ais": own, "own_low": low,
            "own_high": high, "random_own": float(np.mean([r["random_own"] for r in rows])),
            "regions": len(rows), "removed": sum(removes(r) for r in rows),
            "at_goal": sum(removes(r) and spares(r) for r in rows),
            "goal_per_build": "/".join(str(sum(removes(r) and spares(r) for r in g)) for g in per_build),
            "other_minus_random_low": float(np.min(others)), "other_minus_random_high": float(np.max(others)),
            "real_minus_random_low": float(np.min(real)), "real_minus_random_high": float(np.max(real)),
        })  # fmt: skip
    return out


BUILD_COLUMNS = (
    "option", "size", "builds", "own_ais", "own_low", "own_high", "random_own", "regions", "removed", "at_goal",
    "goal_per_build", "other_minus_random_low", "other_minus_random_high", "real_minus_random_low",
    "real_minus_random_high",
)  # fmt: skip


def span(low: float, high: float) -> str:
    """A range of differences in planted_effects_builds.md (MISSING_CELL where none was scored)."""
    return MISSING_CELL if math.isnan(low) else f"{low:+.3f} to {high:+.3f}"


def write_effects_over_builds(folders: Sequence[Path], planted: Sequence[str], out: Path) -> list[Path]:
    """planted_effects_builds.csv and .md in `out`: effects_over_builds of the frontiers in `folders`, one folder
    per build of one plant (each folder's own planted_effects files are written too, once every folder was read)."""
    from benchprof.core.storage import write_csv, write_text

    builds = [planted_effects(folder, planted) for folder in folders]
    for folder, build in zip(folders, builds, strict=True):
        write_planted_effects(folder, planted, build)
    rows = effects_over_builds(builds)
    csv_path, md_path = Path(out) / "planted_effects_builds.csv", Path(out) / "planted_effects_builds.md"
    write_csv(csv_path, BUILD_COLUMNS, rows, digits=6)
    lines = [
        f"# What each option's regions remove over {len(folders)} builds of the plant ({', '.join(planted)} planted)",
        "",
        *v1_note([Path(f) for f in folders]),
        "own AIS: each build's mean over its planted abilities, then the mean over builds [95% t interval over "
        "builds]; removed: own AIS ≥ 0.50 and above the random regions (one-sided p < 0.05); goal: removed, and the "
        "other planted abilities' AIS at most 0.05 above the random regions' (one-sided; per build: b0/b1/…); "
        f"the ranges run over every region of every build ({MISSING_CELL} where no real split was scored).",
        "",
        "| option | neurons | own AIS [95% t over builds] | random own | removed | other planted − random | "
        "real − random | goal (per build) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        interval = "" if math.isnan(r["own_low"]) else f" [{r['own_low']:+.2f}, {r['own_high']:+.2f}]"
        lines.append(
            f"| {r['option']} | {r['size']} | {signed(r['own_ais'])}{interval} | {signed(r['random_own'])} | "
            f"{r['removed']} of {r['regions']} | "
            f"{span(r['other_minus_random_low'], r['other_minus_random_high'])} | "
            f"{span(r['real_minus_random_low'], r['real_minus_random_high'])} | "
            f"{r['at_goal']} of {r['regions']} ({r['goal_per_build']}) |"
        )
    write_text(md_path, "\n".join(lines) + "\n")
    return [csv_path, md_path]
