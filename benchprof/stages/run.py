"""`benchprof run`: every stage in order, each skipping work whose manifest still matches."""

from __future__ import annotations

import contextlib
import os
import time

from benchprof.core.config import NEURON_SCORES, Config


def run(cfg: Config, eval_only: bool = False, force: bool = False, dry_run: bool = False) -> None:
    """Run every stage in order: data, finetune, extract, evaluate, aggregate.

    The whole plan is checked first (models, tokenizers, benchmarks, datasets, k values, output
    folders; see preflight.preflight) and nothing is written if a check fails. Each stage then skips
    work whose manifest still matches, so a rerun, after a crash or a kill, resumes where it stopped.
    The importance pass runs in finetune.processes processes (default: one per GPU in
    settings.cuda_visible_devices), which run starts itself with torchrun and the configured strategy.

    Arguments:
        cfg: the config (on the command line: the path of config.yml), loaded once for every stage.
        eval_only: run evaluate and aggregate only (what ./run.sh -e does); data for the ability
            benchmarks is still generated if missing.
        force: redo every stage's work.
        dry_run: check the plan and print what is done, stale and pending (`benchprof status`); run nothing.
    """
    from benchprof.core.console import quiet, warn
    from benchprof.core.layout import Layout
    from benchprof.core.loader import effective_config
    from benchprof.stages import sharding
    from benchprof.stages.aggregate import aggregate
    from benchprof.stages.data import write_data
    from benchprof.stages.evaluate import cuda_available, evaluate
    from benchprof.stages.extract import extract
    from benchprof.stages.finetune import finetune
    from benchprof.stages.preflight import needed_abilities, preflight
    from benchprof.stages.status import status

    started = time.time()
    for warning in preflight(cfg, eval_only=eval_only):  # on the terminal: run's own output goes to its log
        warn(f"benchprof: warning: {warning}")
    if dry_run:
        status(cfg)
        return

    def stage(name: str) -> contextlib.AbstractContextManager[None]:
        """Each stage logs to its own file (console.quiet; nothing changes under --verbose)."""
        return quiet(name, [Layout(cfg.output_root, spec.tag).log_file(name) for spec in cfg.models])

    with stage("data"):
        write_data(cfg, needed_abilities(cfg))
    if not eval_only:
        if cfg.extract.score not in NEURON_SCORES:  # with a neuron score, extract computes its attribution itself
            gpus = len(cfg.settings.devices()) if cuda_available() else 0
            processes = cfg.finetune.process_count(gpus)
            with stage("finetune"):
                if processes > 1 and int(os.environ.get("WORLD_SIZE", "1")) == 1:  # every configured device works
                    devices = cfg.settings.devices() if gpus else []
                    sharding.launch(effective_config(cfg), processes, devices, ["--force"] if force else [])
                else:
                    finetune(cfg, force=force)
        with stage("extract"):
            extract(cfg, force=force)
    with stage("evaluate"):
        evaluate(cfg, force=force)
    with stage("aggregate"):
        aggregate(cfg)
    print(
        f"run: all stages done for {len(cfg.models)} model(s) in {time.time() - started:.0f}s; "
        f"outputs under {cfg.output_root}"
    )
