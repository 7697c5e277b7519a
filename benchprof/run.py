"""Stage `run`: not implemented yet (issue 2)."""

from __future__ import annotations

from typing import Any, Optional

from . import BenchprofError


def run(config: str = "config.yml", eval_only: bool = False, force: bool = False) -> None:
    """Run every stage in order: data, finetune, extract, evaluate, aggregate.

    Each stage skips work whose manifest still matches, so a rerun resumes where it stopped.

    Arguments:
        config: path of config.yml.
        eval_only: run evaluate and aggregate only (what ./run.sh -e does).
        force: redo every stage's work.
    """
    raise BenchprofError("benchprof run: not implemented yet (issue 2)")
