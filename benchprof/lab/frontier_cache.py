"""The frontier's caches, each tied to what it was computed from (frontier_plan.FrontierInputs), through the pipeline's
own mechanism: a folder's manifest records its inputs and its files' content hashes (storage.write_manifest), and
storage.is_current reuses it only while both still hold. A truncated or edited file, a changed split or a changed
weight is recomputed; a moved project is not. Evaluations are append_record lines keyed by their inputs.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from benchprof.core.layout import FrontierLayout, Output
from benchprof.core.storage import (
    atomic_path,
    clear_manifest,
    is_current,
    read_json,
    write_json,
    write_manifest,
    write_text,
)

if TYPE_CHECKING:
    import numpy as np
    import torch
    from numpy.typing import NDArray
    from transformers import PreTrainedTokenizerBase

    from benchprof.lab.frontier_plan import FrontierInputs, FrontierPlan


def cached_values(
    output: Output, inputs: dict[str, Any], compute: Callable[[], NDArray[np.float32]]
) -> NDArray[np.float32]:
    """compute()'s array, read from `output` while its manifest vouches for it under `inputs`, else computed and
    written there (the old manifest removed first, so a kill never leaves one vouching for new files)."""
    import numpy as np

    (path,) = output.files
    if is_current(output, inputs):
        try:
            return np.load(path)
        except (OSError, ValueError):
            pass  # unreadable although its hash matched (another numpy): computed again
    started = time.time()
    values = compute()
    clear_manifest(path.parent)
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.save(f, values)
    write_manifest(path.parent, inputs, started=started)
    return values


def general_texts(
    plan: FrontierPlan, inputs: FrontierInputs, model: torch.nn.Module, tok: PreTrainedTokenizerBase
) -> list[list[int]]:
    """The general text the model samples itself (neurons.general_text), as many texts as train items, kept."""
    from benchprof.stages.neurons import general_text

    output = FrontierLayout(plan.out).texts_output()
    (path,) = output.files
    wanted = inputs.texts_inputs(plan.seed, plan.train_items)
    if is_current(output, wanted):
        try:
            texts = json.loads(path.read_text())
            if isinstance(texts, list) and len(texts) == plan.train_items:
                return texts
        except (OSError, ValueError):
            pass
    started = time.time()
    texts = general_text(model, tok, plan.seed, plan.train_items)
    clear_manifest(path.parent)
    write_text(path, json.dumps(texts) + "\n")
    write_manifest(path.parent, wanted, started=started)
    return texts


def train_statistics(
    plan: FrontierPlan, inputs: FrontierInputs, model: torch.nn.Module, tok: PreTrainedTokenizerBase
) -> dict[str, dict[str, NDArray[np.float32]]]:
    """Per statistic the plan's options read (neurons.statistics_of; under mean ablation also "mean", the values
    its neurons are held at), each ability's values over its train items and, for the general-text options, general
    text's (key GENERAL), each cached under the frontier's folder."""
    from benchprof.stages.neurons import GENERAL, STATISTICS, general_statistic, reads_general, statistics_of

    layout = FrontierLayout(plan.out)
    statistics: dict[str, dict[str, NDArray[np.float32]]] = {}
    read = [s for o in plan.options for s in statistics_of(o)] + (["mean"] if plan.ablation == "mean" else [])
    for statistic in dict.fromkeys(read):
        compute = STATISTICS[statistic]
        statistics[statistic] = {
            ability: cached_values(
                layout.statistic_output(statistic, ability),
                inputs.statistic_inputs(statistic, ability),
                functools.partial(compute, model, tok, inputs.train[ability], plan.batch_items),
            )
            for ability in dict.fromkeys(plan.abilities + plan.contrast)
        }
    general = list(dict.fromkeys(s for o in plan.options if reads_general(o) for s in statistics_of(o)))
    if general:
        texts = general_texts(plan, inputs, model, tok)
        for statistic in general:
            statistics[statistic][GENERAL] = cached_values(
                layout.statistic_output(statistic, GENERAL),
                inputs.general_inputs(statistic, texts),
                functools.partial(general_statistic, model, texts, statistic, plan.batch_items),
            )
    return statistics


def kept_selection(output: Output, inputs: dict[str, Any], size: int, count: int) -> list[int] | None:
    """A selection's neurons as kept, or None when the file is missing, unreadable, made from other inputs, or
    not `size` distinct neuron ids below `count` (then it is chosen again)."""
    if not is_current(output, inputs):
        return None
    try:
        neurons = read_json(output.manifest).get("neurons")
    except (OSError, ValueError, AttributeError):
        return None
    valid = isinstance(neurons, list) and all(isinstance(i, int) and 0 <= i < count for i in neurons)
    return neurons if valid and len(set(neurons)) == len(neurons) == size else None


def iterative_selections(
    plan: FrontierPlan,
    inputs: FrontierInputs,
    model: torch.nn.Module,
    tok: PreTrainedTokenizerBase,
    attribution: dict[str, NDArray[np.float32]],
) -> dict[tuple[str, int], list[int]]:
    """act_grad_contrast_iter's neurons for every (ability, size) of the plan (neurons.iterative_contrast: up to
    three more attributions of the ability's train items per region), each kept with its inputs in
    <frontier>/act_grad_contrast_iter/<ability>-<size>.json, so that it is chosen once for those inputs."""
    from tqdm import tqdm

    from benchprof.stages.neurons import ITERATIVE, ITERATIVE_ROUNDS, iterative_contrast, model_neurons

    if ITERATIVE not in plan.options:
        return {}
    layout, count = FrontierLayout(plan.out), model_neurons(model).count
    wanted = {
        (a, n): (layout.selection_output(ITERATIVE, a, n), inputs.selection_inputs(ITERATIVE, a, n, plan.contrast))
        for a in plan.abilities
        for n in plan.sizes
    }
    chosen = {key: kept_selection(output, spec, key[1], count) for key, (output, spec) in wanted.items()}
    todo = [key for key, neurons in chosen.items() if neurons is None]
    for ability, size in tqdm(todo, desc="iterative selection", unit="region", leave=False):
        output, spec = wanted[(ability, size)]
        neurons, _ = iterative_contrast(model, tok, attribution, ability, inputs.train[ability], size, plan.batch_items)
        write_json(output.manifest, {"inputs": spec, "rounds": ITERATIVE_ROUNDS, "neurons": neurons})
        chosen[(ability, size)] = neurons
    return {key: sorted(neurons) for key, neurons in chosen.items() if neurons is not None}
