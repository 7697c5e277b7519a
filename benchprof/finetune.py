"""Stage `finetune`: not implemented yet (issue 4)."""

from __future__ import annotations

from typing import Any, Optional

from . import BenchprofError


def finetune(config: str = "config.yml", ability: Optional[str] = None, model: Optional[str] = None,
             scope: Optional[str] = None, loss_on: Optional[str] = None, max_samples: Optional[int] = None,
             batch_size: Optional[int] = None, max_length: Optional[int] = None, dtype: Optional[str] = None,
             gradient_checkpointing: Optional[bool] = None, force: bool = False) -> None:
    """Importance scores I = |theta * sum over batches of dL/dtheta| for every eligible weight.

    Arguments:
        config: path of config.yml.
        ability: only this ability (or a comma-separated list).
        model: only this model (name or tag).
        scope: eligible weights: mlp (default), attention or all linear weights.
        loss_on: all tokens (default, as the authors) or answer tokens only.
        max_samples: use at most this many training items.
        batch_size: items per forward/backward; default settings.train_batch_size.
        max_length: truncate items to this many tokens.
        dtype: model dtype for the pass (auto, float32, bfloat16); gradients accumulate in fp32.
        gradient_checkpointing: trade compute for activation memory.
        force: recompute even when the manifest matches.
    """
    raise BenchprofError("benchprof finetune: not implemented yet (issue 4)")
