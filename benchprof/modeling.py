"""Loading a model and naming its eligible weights; shared by finetune, extract, damage, evaluate."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from . import BenchprofError

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

# Which linear weights each `finetune.scope` makes eligible (matched on the parameter name).
SCOPES: dict[str, tuple[str, ...]] = {
    "mlp": ("mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"),
    "attention": (
        "self_attn.q_proj.weight",
        "self_attn.k_proj.weight",
        "self_attn.v_proj.weight",
        "self_attn.o_proj.weight",
    ),
}
SCOPES["all"] = SCOPES["mlp"] + SCOPES["attention"]

_LAYER = re.compile(r"\.layers\.(\d+)\.")


def layer_index(name: str) -> int | None:
    """Decoder layer of a parameter name ('model.layers.3.mlp.up_proj.weight' -> 3), or None."""
    m = _LAYER.search(name)
    return int(m.group(1)) if m else None


def is_eligible(name: str, scope: str, n_layers: int, front_removal: int = 0, back_removal: int = 0) -> bool:
    """Is this weight a candidate for a region: in scope, in layers front_removal <= l < L - back_removal."""
    if scope not in SCOPES:
        raise BenchprofError(f"finetune.scope: unknown scope {scope!r} (known: {', '.join(SCOPES)})")
    layer = layer_index(name)
    return layer is not None and name.endswith(SCOPES[scope]) and front_removal <= layer < n_layers - back_removal


def eligible_names(
    names: Iterable[str], scope: str, n_layers: int, front_removal: int = 0, back_removal: int = 0
) -> list[str]:
    return [n for n in names if is_eligible(n, scope, n_layers, front_removal, back_removal)]


def torch_dtype(name: str) -> torch.dtype | str:
    """'bfloat16' -> torch.bfloat16; 'auto' stays 'auto' (the checkpoint's own dtype)."""
    import torch

    return name if name == "auto" else getattr(torch, name)


def pick_device(device: str = "auto") -> str:
    import torch

    if device != "auto":
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


def load_model(
    name: str, tokenizer: str | None = None, dtype: str = "auto", device: str = "cpu"
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """AutoModelForCausalLM and AutoTokenizer from a local folder or hub id, in eval mode."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        model = AutoModelForCausalLM.from_pretrained(name, dtype=torch_dtype(dtype))
        tok = AutoTokenizer.from_pretrained(tokenizer or name)
    except Exception as err:  # OSError, ValueError, safetensors' own errors for a truncated file: one line
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise BenchprofError(f"models.name: cannot load {name!r}: {first}") from None
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    torch.nn.Module.to(model, device)  # (PreTrainedModel.to is typed as a decorator)
    model.eval()
    return model, tok


def num_layers(model: PreTrainedModel) -> int:
    return int(model.config.num_hidden_layers)


def total_params(model: torch.nn.Module) -> int:
    """All parameters (tied weights counted once), the denominator of k."""
    return sum(p.numel() for p in model.parameters())


def fingerprint(model: torch.nn.Module) -> str:
    """A short hash of the model's parameter names, shapes and a few values of each tensor (dtype-blind).

    Masks and importance files record it, so a region is never applied to another model.
    """
    import torch

    h = hashlib.sha256()
    for name, p in model.state_dict().items():
        h.update(f"{name}:{tuple(p.shape)};".encode())
        flat = p.detach().reshape(-1)
        # rounded to bf16, so one checkpoint loaded in fp32 or bf16 has one fingerprint
        sample = flat[:: max(1, flat.numel() // 64)][:64].to(torch.bfloat16).to(torch.float32).cpu()
        h.update(sample.numpy().tobytes())
    return h.hexdigest()[:16]
