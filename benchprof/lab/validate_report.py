"""The validation study's tables: one build's Markdown (`markdown`) and several builds combined with a t interval
over builds (`combine`, scripts/validate.py --combine). Reads and writes the study's own validation.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from benchprof.core.layout import format_k
from benchprof.core.options import WEIGHT_SCORES
from benchprof.lab.validation import mean_interval, share_interval

SCORES = WEIGHT_SCORES  # the order of the tables' rows: the registry's (core/options.py)
SELECTIONS = ("exact", "chunked")


def option(row: dict[str, Any]) -> tuple[str, str, str, float]:
    """A recovery row's (loss_on, score, selection, k): the option it measures."""
    return row["loss_on"], row["score"], row["selection"], row["k"]


def markdown(result: dict[str, Any], abilities: list[str]) -> str:
    """The recovery table (means over the abilities) and the AIS known answer."""
    rows = result["rows"]
    chance = result["chance_precision"]
    lines = [
        f"Chance: precision {chance['weights']:.3f} (|R_a| / eligible MLP weights), neuron precision "
        f"{chance['neurons']:.3f} (R_a's neurons / MLP neurons), AUROC 0.5.",
        "",
        f"Selection chunked: extract.chunk_size {result['chunk_size']} (chunks of max(chunk_size, "
        "floor(sqrt(N / f))) candidates).",
        "",
        "| loss_on | score | selection | k (× \\|R_a\\|) | precision | recall | in other R_b | in tensors w/o R_a "
        "| touched neurons: precision / recall | top neurons: precision | AUROC | Jaccard (chance) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    keys = sorted(
        {option(r) for r in rows},
        key=lambda t: (t[0], SCORES.index(t[1]) if t[1] in SCORES else 9, SELECTIONS.index(t[2]), t[3]),
    )
    for loss, score, selection, k in keys:
        group = [r for r in rows if option(r) == (loss, score, selection, k)]

        def mean(key: str, group: list[dict[str, Any]] = group) -> float:
            return float(np.mean([r[key] for r in group]))

        lines.append(
            f"| {loss} | {score} | {selection} | {format_k(k)} ({group[0]['k_multiple']:g}) | "
            f"{mean('precision'):.3f} | {mean('recall'):.3f} | {mean('in_other_planted'):.3f} | "
            f"{mean('outside_tensors'):.3f} | "
            f"{mean('neuron_precision'):.3f} / {mean('neuron_recall'):.3f} | {mean('top_neuron_precision'):.3f} | "
            f"{mean('auroc'):.3f} | "
            f"{mean('jaccard_mean'):.3f} ({mean('jaccard_chance'):.3f}) |"
        )
    lines += ["", "Per ability at k = |R_a| / total (precision / recall / AUROC):", ""]
    lines.append("| loss_on | score | selection | " + " | ".join(abilities) + " |")
    lines.append("|---|---|---|" + "---|" * len(abilities))
    for loss, score, selection, k in keys:
        if k != result["k_exact"]:
            continue
        cells = []
        for a in abilities:
            key = (loss, score, selection, k, a)
            r = next(r for r in rows if (*option(r), r["ability"]) == key)
            cells.append(f"{r['precision']:.2f} / {r['recall']:.2f} / {r['auroc']:.2f}")
        lines.append(f"| {loss} | {score} | {selection} | " + " | ".join(cells) + " |")
    if result["ais"]:
        lines += [
            "",
            f"AIS known answer at k = {format_k(result['k_exact'])} ({result['metric']}, {len(abilities)} abilities):",
            "",
            "| regions | diagonal dominance | mean own AIS, top | mean own AIS, random | mean off-diagonal AIS | "
            + " | ".join(f"own AIS {a}" for a in abilities)
            + " |",
            "|---|---|---|---|---|" + "---|" * len(abilities),
        ]
        for name, s in result["ais"].items():
            own = " | ".join(f"{s['matrix'][a][a]:+.3f}" for a in abilities)
            lines.append(
                f"| {name} | {s['diagonal']} of {len(abilities)} | {s['own_top']:+.3f} | {s['own_random']:+.3f} | "
                f"{s['off_diagonal']:+.3f} | {own} |"
            )
    if result.get("benchmarks"):
        lines += benchmark_lines(result["benchmarks"], {n: s["benchmarks"] for n, s in result["ais"].items()})
    return "\n".join(lines)


def benchmark_lines(info: dict[str, Any], matrices: dict[str, dict[str, dict[str, float]]]) -> list[str]:
    """The AIS on the real benchmarks of each region set: per benchmark the mean over the abilities and its
    largest, and the mean over both."""
    names = info["names"]
    original = ", ".join(f"{b} {info['original'][b]:.3f}" for b in names)
    lines = [
        "",
        f"AIS on real benchmarks ({info['limit']} documents each; unablated {original}), mean over the abilities "
        "(largest):",
        "",
        "| regions | " + " | ".join(names) + " | mean |",
        "|---|" + "---|" * (len(names) + 1),
    ]
    for name, matrix in matrices.items():
        cells = []
        for b in names:
            values = [matrix[a][b] for a in matrix]
            cells.append(f"{np.mean(values):+.3f} ({max(values):+.3f})")
        overall = np.mean([matrix[a][b] for a in matrix for b in names])
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {overall:+.3f} |")
    return lines


COMBINED = (  # (key in a row, header): the figures shown with their interval over builds
    ("precision", "precision"),
    ("recall", "recall"),
    ("top_neuron_precision", "top neurons: precision"),
    ("auroc", "AUROC"),
    ("in_other_planted", "in other R_b"),
    ("outside_tensors", "in tensors w/o R_a"),
    ("jaccard_mean", "Jaccard"),
)


def combine(folders: list[Path], out: Path) -> None:
    """The recovery table over several builds: each figure's mean over the abilities per build, then its mean
    over the builds with a 95% t interval (benchprof.lab.validation.mean_interval; share_interval, clipped to
    [0, 1], for shares). Writes combined.json and combined.md in `out`."""
    results = []
    for folder in folders:
        path = folder / "validation.json"
        if not path.is_file():
            sys.exit(f"validate --combine: {path}: not found; run validate.py --out {folder} first")
        results.append(json.loads(path.read_text()))

    def scored(result: dict[str, Any]) -> tuple[Any, ...]:  # AIS of other metrics or documents do not average
        real = result.get("benchmarks") or {}
        return result.get("metric"), real.get("names"), real.get("limit")

    differing = [str(f) for f, r in zip(folders, results, strict=True) if scored(r) != scored(results[0])]
    if differing:
        sys.exit(f"validate --combine: {', '.join(differing)}: metric or benchmarks differ from {folders[0]}'s")
    key_sets = [{option(r) for r in result["rows"]} for result in results]
    keys = sorted(  # the options every build ran (a build run with fewer --selections or --scores limits them)
        set.intersection(*key_sets),
        key=lambda t: (t[0], SCORES.index(t[1]) if t[1] in SCORES else 9, SELECTIONS.index(t[2]), t[3]),
    )
    if not keys:
        sys.exit(f"validate --combine: {', '.join(map(str, folders))} share no (loss, score, selection, k)")
    per_build: list[dict[tuple[str, str, str, float], dict[str, float]]] = [
        {key: {} for key in keys} for _ in results
    ]  # build -> key -> figure -> mean over abilities
    for b, result in enumerate(results):
        for key in keys:
            group = [r for r in result["rows"] if option(r) == key]
            for name, _ in COMBINED:
                per_build[b][key][name] = float(np.mean([r[name] for r in group]))
    table: list[dict[str, Any]] = []
    lines = [
        f"{len(results)} builds ({', '.join(str(f) for f in folders)}): each figure's mean over the abilities of "
        "a build, then its mean over the builds [95% t interval over builds, clipped to [0, 1]].",
        "",
        "| loss_on | score | selection | k (× \\|R_a\\|) | " + " | ".join(h for _, h in COMBINED) + " |",
        "|---|---|---|---|" + "---|" * len(COMBINED),
    ]
    left_out = sorted(set.union(*key_sets) - set(keys))
    if left_out:
        lines[1:1] = ["", f"{len(left_out)} (loss, score, selection, k) rows left out: not run in every build."]
    multiple = {option(r): r["k_multiple"] for r in results[0]["rows"]}
    for key in keys:
        cells, row = [], {"loss_on": key[0], "score": key[1], "selection": key[2], "k": key[3]}
        for name, _ in COMBINED:
            values = [build[key][name] for build in per_build]
            mean, low, high = share_interval(values)  # every figure here is a share or a probability
            row[name] = {"mean": mean, "ci": [low, high], "builds": values}
            cells.append(f"{mean:.3f} [{low:.3f}, {high:.3f}]")
        table.append(row)
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {multiple[key]:g} | " + " | ".join(cells) + " |")
    ais_names = [n for n in results[0]["ais"] if all(n in r["ais"] for r in results)]
    if ais_names:
        lines += [
            "",
            "AIS known answer at k = |R_a| / total, mean over builds [95% t interval]:",
            "",
            "| regions | diagonal dominance (each build) | mean own AIS, top | mean own AIS, random "
            "| mean off-diagonal AIS |",
            "|---|---|---|---|---|",
        ]
        for n in ais_names:
            cells = []
            for field in ("own_top", "own_random", "off_diagonal"):
                mean, low, high = mean_interval([r["ais"][n][field] for r in results])
                cells.append(f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]")
            diagonal = ", ".join(str(r["ais"][n]["diagonal"]) for r in results)
            lines.append(f"| {n} | {diagonal} | " + " | ".join(cells) + " |")
    real = [n for n in ais_names if all("benchmarks" in r["ais"][n] for r in results)]
    if real:
        lines += ["", "AIS on real benchmarks (mean over abilities and benchmarks), mean over builds [95% t]:", ""]
        lines += ["| regions | mean AIS |", "|---|---|"]
        for n in real:
            per = [np.mean([v for row in r["ais"][n]["benchmarks"].values() for v in row.values()]) for r in results]
            mean, low, high = mean_interval([float(v) for v in per])
            lines.append(f"| {n} | {mean:+.3f} [{low:+.3f}, {high:+.3f}] |")
    out.mkdir(parents=True, exist_ok=True)
    combined = {"builds": [str(f) for f in folders], "rows": table, "left_out": [list(k) for k in left_out]}
    (out / "combined.json").write_text(json.dumps(combined, indent=1))
    (out / "combined.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"validate: {len(results)} builds combined; {out / 'combined.md'}, {out / 'combined.json'}")
