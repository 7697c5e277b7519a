"""The two studies of docs/research/real-model.md beside the main profile of configs/smollm2.yml, on its importance
files.

  ksweep         Long_Term_Knowledge and Commonsense_Causal, top and random regions at the paper's six k
                 values, on ARC-Easy and the two abilities' own splits (100 documents each)
  splits         the unablated model (and Long_Term_Knowledge's top region) on all ten abilities' splits,
                 100 items each: which abilities SmolLM2 has above chance
  ratio, contrast_mean
                 all ten abilities' top regions at k = 0.01024 under another extract.score, on ARC-Easy, PIQA
                 and the three ability splits of the main config (100 documents each)

Each study is a config written to outputs/studies/<name>/config.yml (the main config's values, paths made
absolute) whose output folder starts with hard links to the main run's importance files: benchprof knows
files by content, so the importance pass is not redone. Then `benchprof run` on it, and a summary of its
profile: the mean Jaccard of the top regions of different abilities (overlap.csv) and the AIS rows
(ais.csv). Run the main config first: `benchprof run configs/smollm2.yml`.

Usage: .venv/bin/python scripts/real_model_study.py [--studies splits,ksweep,ratio,contrast_mean]  (this module's main)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from benchprof.core.results import iter_samples
from benchprof.core.sections import PAPER_K_VALUES
from benchprof.core.storage import read_csv

ROOT = Path(__file__).resolve().parents[2]  # the repository: configs/ and outputs/
BASE = ROOT / "configs" / "smollm2.yml"
SPLITS = ["Long_Term_Knowledge", "Commonsense_Causal", "Semantic_Relationship"]


def study_config(name: str) -> dict[str, Any]:
    """The main config changed for study `name`, every path absolute."""
    raw = yaml.safe_load(BASE.read_text())
    here = BASE.parent

    def absolute(path: str) -> str:
        return str((here / path).resolve())

    raw["settings"]["output_dir"] = str(ROOT / "outputs" / "studies" / name / "outputs")
    raw["data"]["dir"] = absolute(raw["data"]["dir"])
    for model in raw["models"]:
        model["name"] = absolute(model["name"])
    raw["evals"]["dataset_paths"] = {b: absolute(p) for b, p in raw["evals"]["dataset_paths"].items()}
    if name == "splits":
        raw["datasets"] = [{"name": "Long_Term_Knowledge"}]
        raw["extract"]["regions"] = ["top"]
        benchmarks = [d["name"] for d in yaml.safe_load(BASE.read_text())["datasets"]]
    elif name == "ksweep":
        raw["datasets"] = [{"name": "Long_Term_Knowledge"}, {"name": "Commonsense_Causal"}]
        raw["settings"]["k_values"] = list(PAPER_K_VALUES)
        raw["extract"]["regions"] = ["top", "random"]
        benchmarks = ["arc_easy", "Long_Term_Knowledge", "Commonsense_Causal"]
    elif name in ("ratio", "contrast_mean"):
        raw["extract"]["score"] = name
        raw["extract"]["regions"] = ["top"]
        benchmarks = ["arc_easy", "piqa", *SPLITS]
    else:
        raise SystemExit(f"--studies: unknown study {name!r} (splits, ksweep, ratio, contrast_mean)")
    raw["evals"]["benchmarks"] = [{"name": b, "limit": 100} for b in benchmarks]
    raw["evals"]["dataset_paths"] = {b: p for b, p in raw["evals"]["dataset_paths"].items() if b in benchmarks}
    raw["aggregate"]["report_k"] = 0.01024
    return raw


def link_importance(main: Path, study: Path, abilities: list[str]) -> None:
    """Hard links (copies across file systems) of the main run's importance folders into the study's."""
    for ability in abilities:
        source, target = main / ability / "importance", study / ability / "importance"
        if not (source / "manifest.json").is_file():
            raise SystemExit(f"{source}: no importance; run `benchprof run configs/smollm2.yml` first")
        target.mkdir(parents=True, exist_ok=True)
        for path in source.iterdir():
            if path.is_file() and not (target / path.name).exists():
                try:
                    os.link(path, target / path.name)
                except OSError:
                    shutil.copy2(path, target / path.name)


def above_chance(eval_dir: Path) -> None:
    """The unablated model's acc_norm on each split against chance (mean 1/#options), one-sided exact binomial."""
    from benchprof.stats.impact import chance_level, chance_test

    for samples in sorted(eval_dir.glob("*.samples.jsonl")):
        rows = [row for _, row in iter_samples(samples)]
        scores = [float(r["acc_norm"]) for r in rows]
        chance = chance_level([len(r["loglikelihoods"]) for r in rows])
        p = chance_test(scores, chance)
        print(
            f"  {samples.name.split('.')[0]:<24} acc_norm {sum(scores) / len(scores):.2f} on {len(scores)} items, "
            f"chance {chance:.2f}, p {p:.2g}{'  above chance' if p < 0.05 else ''}"
        )


def summary(profile: Path) -> None:
    """Mean Jaccard of different abilities' top regions per k, and the AIS rows, from a profile folder."""
    rows = [r for r in read_csv(profile / "overlap.csv") if r["region"] == "top" and r["ability_a"] != r["ability_b"]]
    pairs = list({(r["k"], frozenset((r["ability_a"], r["ability_b"]))): r for r in rows}.values())
    for k in sorted({r["k"] for r in pairs}, key=float):
        values = [float(r["jaccard"]) for r in pairs if r["k"] == k]
        chance = [float(r["expected_jaccard"]) for r in pairs if r["k"] == k]
        if not values:
            continue
        print(
            f"  k={k}: mean Jaccard of top regions {sum(values) / len(values):.3f} over {len(values)} pairs "
            f"(chance {sum(chance) / len(chance):.4f})"
        )
    rows = read_csv(profile / "ais.csv")
    print(f"  {'ability':<24}{'benchmark':<24}{'k':>9} {'region':<8}{'AIS':>8}  interval          star")
    for r in rows:
        print(
            f"  {r['ability']:<24}{r['benchmark']:<24}{float(r['k']):>9.5f} {r['region']:<8}{float(r['ais']):>+8.3f}"
            f"  [{float(r['ci_low']):+.3f}, {float(r['ci_high']):+.3f}]  {'*' if r['significant'] == 'true' else ''}"
        )


def main(studies: str | tuple[str, ...] = "splits,ksweep,ratio,contrast_mean") -> None:
    """Run the studies named (comma-separated) and print each one's summary."""
    main_outputs = ROOT / "outputs" / "smollm2"
    names = list(studies) if isinstance(studies, (list, tuple)) else str(studies).split(",")  # fire: a,b is a tuple
    for name in [s.strip() for s in names if s.strip()]:
        raw = study_config(name)
        folder = ROOT / "outputs" / "studies" / name
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "config.yml"
        config.write_text(yaml.safe_dump(raw, sort_keys=False))
        tag = raw["models"][0]["tag"]
        link_importance(main_outputs, Path(raw["settings"]["output_dir"]) / tag, [d["name"] for d in raw["datasets"]])
        print(f"study {name}: benchprof run {config}", flush=True)
        subprocess.run([sys.executable, "-m", "benchprof", "run", str(config)], check=True)
        if name == "splits":
            above_chance(Path(raw["settings"]["output_dir"]) / tag / "original" / "eval")
        summary(Path(raw["settings"]["output_dir"]) / tag / "profile")
