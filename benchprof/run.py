"""`benchprof run`: every stage in order, each skipping work whose manifest still matches."""

from __future__ import annotations

import time

from .config import ABILITIES, load_config


def run(config: str = "config.yml", eval_only: bool = False, force: bool = False) -> None:
    """Run every stage in order: data, finetune, extract, evaluate, aggregate.

    Each stage skips work whose manifest still matches, so a rerun resumes where it stopped.

    Arguments:
        config: path of config.yml.
        eval_only: run evaluate and aggregate only (what ./run.sh -e does); data for the ability
            benchmarks is still generated if missing.
        force: redo every stage's work.
    """
    from .aggregate import aggregate
    from .data import ensure_data
    from .evaluate import evaluate
    from .extract import extract
    from .finetune import finetune

    started = time.time()
    cfg = load_config(config)  # fail on a bad config before any work
    needed = list(dict.fromkeys(cfg.abilities() + [b for b in cfg.evals.benchmarks if b in ABILITIES]
                                + [a for c in cfg.evals.composites.values() for a in c["abilities"]]))
    ensure_data(cfg, needed)
    if not eval_only:
        finetune(config, force=force)
        extract(config, force=force)
    evaluate(config, force=force)
    aggregate(config)
    print(f"run: all stages done for {len(cfg.models)} model(s) in {time.time() - started:.0f}s; "
          f"outputs under {cfg.output_root}")
