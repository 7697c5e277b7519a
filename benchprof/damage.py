"""Stage `damage`: not implemented yet (issue 5)."""

from __future__ import annotations

from typing import Any, Optional

from . import BenchprofError


def damage(config: str = "config.yml", ability: Optional[str] = None, k: Any = None,
           region: Optional[str] = None, model: Optional[str] = None, save: bool = False,
           force: bool = False) -> None:
    """Zero a region's weights. With --save, write each ablated model as a full HF checkpoint.

    Evaluation applies regions in memory by itself; use --save for vLLM or to share a variant.

    Arguments:
        config: path of config.yml.
        ability: only this ability (or a comma-separated list).
        k: only these k values.
        region: only this region (top, bottom, random).
        model: only this model (name or tag).
        save: write checkpoints under <ability>/damaged/k<k>/<region>/.
        force: rewrite checkpoints that exist.
    """
    raise BenchprofError("benchprof damage: not implemented yet (issue 5)")
