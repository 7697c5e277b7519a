"""Stage `evaluate`: not implemented yet (issue 5)."""

from __future__ import annotations

from typing import Any, Optional

from . import BenchprofError


def evaluate(config: str = "config.yml", ability: Optional[str] = None, k: Any = None,
             region: Optional[str] = None, model: Optional[str] = None, benchmark: Optional[str] = None,
             limit: Optional[int] = None, backend: Optional[str] = None, shard: str = "0/1",
             force: bool = False) -> None:
    """Score the original model and every ablated variant on every benchmark with lm-eval.

    Arguments:
        config: path of config.yml.
        ability: only variants of this ability (or a comma-separated list).
        k: only these k values.
        region: only this region (top, bottom, random).
        model: only this model (name or tag).
        benchmark: only this benchmark (or a comma-separated list).
        limit: score at most this many documents per benchmark (quick runs).
        backend: hf (in-memory ablation, default) or vllm (damage --save checkpoints).
        shard: i/n runs the i-th of n slices of the job list (several nodes).
        force: rerun finished jobs.
    """
    raise BenchprofError("benchprof evaluate: not implemented yet (issue 5)")
