"""How a planted model's neurons fire off their own ability: what tells a dedicated plant (its neurons silent on
every other text, as realplant builds them) from neurons that fire everywhere (docs/research/frontier.md, "What is not
settled": a plant of that kind was tried and could not be trained)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from benchprof.abilities.invented import invented_splits
from benchprof.lab.realplant import general_records, padded

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


def firing_profile(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    neurons: dict[str, dict[int, list[int]]],
    data_seed: int = 0,
    general_per_ability: int = 10,
) -> dict[str, dict[str, float]]:
    """Per planted ability, how its neurons act off its own text (a dedicated plant's fire on their ability alone),
    general text being prompts of benchprof's ten abilities, own text its test split (both formats):
    - `firing`: the median over its neurons of log(mean h² on general text / mean h² on own text), very negative
      for a neuron silent off its ability, near 0 for one that fires everywhere;
    - `writing`: what its neurons write on general text (per layer the mean over tokens of ‖Σ_j h_j · down column
      j‖², summed over the planted layers) as a share of the same on its own text."""
    import torch

    from benchprof.lab.training import encode_examples

    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    layers = sorted({layer for per in neurons.values() for layer in per})
    seen: dict[int, list[torch.Tensor]] = {layer: [] for layer in layers}
    mask: dict[str, torch.Tensor] = {}

    def activity(records: list[dict[str, Any]]) -> dict[int, torch.Tensor]:
        """Each layer's MLP activations (input of down_proj) on the records' real tokens, stacked."""
        examples = encode_examples(tok, records)
        for layer in layers:
            seen[layer].clear()
        with torch.no_grad():
            for start in range(0, len(examples), 32):
                ids, _, valid = padded(examples[start : start + 32], pad)
                mask["valid"] = valid
                model(ids.to(model.device))
        return {layer: torch.cat(seen[layer]) for layer in layers}

    hooks = [
        model.model.layers[layer].mlp.down_proj.register_forward_pre_hook(
            lambda _m, inputs, layer=layer: seen[layer].append(inputs[0][mask["valid"].to(inputs[0].device)].cpu())
        )
        for layer in layers
    ]
    try:
        general = activity(general_records(general_per_ability, data_seed))
        out = {}
        for ability, per_layer in neurons.items():
            own = activity(invented_splits(ability, data_seed)["test"])
            ratios, written = [], {"general": 0.0, "own": 0.0}
            for layer, ids in per_layer.items():
                down = model.model.layers[layer].mlp.down_proj.weight.detach().cpu()[:, ids]
                sides = {"general": general[layer][:, ids], "own": own[layer][:, ids]}
                levels = {side: (h**2).mean(0) for side, h in sides.items()}
                ratios.append(torch.log(levels["general"] + 1e-12) - torch.log(levels["own"] + 1e-12))
                for side, h in sides.items():
                    written[side] += float(((h @ down.T) ** 2).sum(-1).mean())
            out[ability] = {
                "firing": float(torch.cat(ratios).median()),
                "writing": written["general"] / written["own"],
            }
    finally:
        for hook in hooks:
            hook.remove()
    return out
