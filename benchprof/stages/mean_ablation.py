"""Mean ablation of neuron regions: each removed neuron's output held at its mean over a reference set, in place of
zero (Miller, Chughtai & Saunders 2024 found that what an ablation shows depends on its type).

Zeroing neuron j of layer l (its gate and up rows and down column, damage.ablated) sets its activation h_lj, the
input of down_proj, to 0 on every token. Mean ablation sets it to μ_lj instead, the mean of h_lj over the reference
items' tokens (neurons.neuron_mean_output, then pooled_means): the neuron stops carrying anything about the input
and keeps adding its average output to the residual stream. The reference set is every ability's train items (the
text the attribution reads), each item's prompt and correct option; every item weighs the same. Where a neuron is
near zero on most tokens and large on a few, its mean is a value it rarely takes, added on every token
(docs/research/frontier.md, "Zero or mean ablation", measures what that does).

`held_at_means` holds the neurons at μ with a forward pre-hook on each down_proj (the weights are not touched), so
it needs the model in process: the hf backend's evaluation and the frontier, not vLLM's saved checkpoints.
"""

from __future__ import annotations

import contextlib
import typing
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from benchprof import BenchprofError
from benchprof.core.sections import DamageSettings

if TYPE_CHECKING:
    import numpy as np
    import torch
    from numpy.typing import NDArray

    from benchprof.core.config import Config, ModelSpec
    from benchprof.core.regions import Region

# what a removed neuron outputs: 0, or its mean over the reference set (damage.ablation's values)
ABLATIONS: tuple[str, ...] = typing.get_args(typing.get_type_hints(DamageSettings)["ablation"])
POOLED = "the mean over every item of every reference ability, v1"  # how pooled_means joins the per-item means


def ablation_kind(given: object, where: str) -> str:
    """An ablation of ABLATIONS, refused in one line naming `where` (a config key or a flag) otherwise."""
    if given not in ABLATIONS:
        raise BenchprofError(f"{where}: {given!r} is not one of {', '.join(ABLATIONS)}")
    return str(given)


def pooled_means(per_item: dict[str, NDArray[np.float32]]) -> NDArray[np.float32]:
    """μ per neuron from each reference ability's per-item means (neurons.neuron_mean_output, items x neurons): the
    mean over all their items, every item weighing the same (POOLED). Shape (layers × intermediate,)."""
    import numpy as np

    items = sum(len(values) for values in per_item.values())
    if not items:
        raise BenchprofError("mean ablation: the reference set holds no item")
    total = sum(values.sum(0, dtype=np.float64) for values in per_item.values() if len(values))
    return np.asarray(total / items, dtype=np.float32)


@contextlib.contextmanager
def held_at_means(model: torch.nn.Module, ids: Sequence[int], means: NDArray[np.float32]) -> Iterator[torch.nn.Module]:
    """`with held_at_means(model, ids, means): ...` runs the block with neurons `ids` (layer × intermediate + j)
    outputting means[id] on every token, then removes the hooks; the weights are never changed."""
    import torch

    from benchprof.stages.neurons import model_neurons

    neurons = model_neurons(model)
    if len(means) != neurons.count:
        raise BenchprofError(f"mean ablation: {len(means)} neuron means for a model of {neurons.count} neurons")

    def hold(columns: torch.Tensor, values: torch.Tensor) -> Any:
        def pre_hook(_module: Any, args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
            h = args[0].clone()
            h[..., columns.to(h.device)] = values.to(h.device, h.dtype)
            return (h, *args[1:])

        return pre_hook

    hooks = []
    try:
        for layer, js in neurons.by_layer(ids).items():
            columns = torch.tensor(js, dtype=torch.int64)
            values = torch.from_numpy(means[[layer * neurons.intermediate + j for j in js]].copy())
            hooks.append(neurons.mlps[layer].down_proj.register_forward_pre_hook(hold(columns, values)))
        yield model
    finally:
        for hook in hooks:
            hook.remove()


def region_neuron_ids(model: torch.nn.Module, region: Region) -> list[int]:
    """The neuron ids (layer × intermediate + j) of a region of whole neurons (neurons.neuron_ids_region's format),
    refused in one line when the region holds anything else (a weight score's region has no neurons to hold)."""
    import torch

    from benchprof.stages.neurons import mlp_name, model_neurons, neuron_ids_region

    neurons = model_neurons(model)
    ids = sorted(
        layer * neurons.intermediate + int(j)
        for layer in range(len(neurons.mlps))
        if mlp_name(layer, "down_proj") in region
        for j in set((region[mlp_name(layer, "down_proj")] % neurons.intermediate).tolist())
    )
    whole = neuron_ids_region(neurons, ids)
    if set(whole) != set(region) or any(not torch.equal(whole[n], region[n].cpu()) for n in whole):
        raise BenchprofError("damage.ablation: mean holds whole MLP neurons; this region is not whole neurons")
    return ids


def removed(
    model: torch.nn.Module, region: Region, means: NDArray[np.float32] | None
) -> contextlib.AbstractContextManager[torch.nn.Module]:
    """The context that removes `region` from `model` while it is open: its weights zeroed (damage.ablated), or,
    given `means` (reference_means), its neurons held at them."""
    from benchprof.stages.damage import ablated

    if means is None or not region:
        return ablated(model, region)
    return held_at_means(model, region_neuron_ids(model, region), means)


def reference_identity(cfg: Config, spec: ModelSpec, update_cache: bool = True) -> dict[str, Any]:
    """What an evaluation under mean ablation depends on beyond the mask: the values its neurons are held at, a
    function of the model and every ability's train items (each ability's "mean" statistic file's inputs)."""
    from benchprof.core.storage import value_hash
    from benchprof.stages.statistic_files import attribution_inputs

    inputs = {a: attribution_inputs(cfg, spec, a, update_cache, statistic="mean") for a in cfg.abilities()}
    return {"ablation": "mean", "reference": value_hash(inputs), "pooled": POOLED}


def reference_means(cfg: Config, spec: ModelSpec) -> NDArray[np.float32] | None:
    """Under damage.ablation mean, μ of every neuron over every ability's train items (their "mean" statistic files,
    computed where missing or stale, statistic_files.attributions); None under zero ablation."""
    if cfg.damage.ablation != "mean":
        return None
    from benchprof.stages.statistic_files import attributions

    return pooled_means(attributions(cfg, spec, cfg.abilities(), statistic="mean")[0])
