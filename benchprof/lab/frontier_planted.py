"""How well each neuron score finds the neurons a planted model's abilities live in (docs/frontier.md): the planted
recovery of `scripts/frontier_planted.py`, its ground truth read from planted.json, and its figures over several
builds."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchprof.stages.neurons import (
    FRONTIER_SCORES,
    GENERAL,
    ITERATIVE,
    STATISTICS,
    Neurons,
    general_statistic,
    general_text,
    iterative_contrast,
    model_neurons,
    neuron_scores,
    reads_general,
    statistic_of,
    top_neurons,
)

if TYPE_CHECKING:
    import numpy as np
    import torch
    from numpy.typing import NDArray
    from transformers import PreTrainedTokenizerBase


def planted_probe(
    folder: Path, items: int
) -> tuple[dict[str, Any], torch.nn.Module, PreTrainedTokenizerBase, dict[str, list[dict[str, Any]]]]:
    """A planted model folder (`plant_real.py apply`) as its recovery reads it: planted.json, the model in float32
    and its tokenizer, and the records: each planted ability's first `items` probe items (never planted), and
    each generated ability's first `items` train items (the contrast)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from benchprof.abilities import ABILITIES, splits
    from benchprof.abilities.invented import invented_splits
    from benchprof.lab.planted import planted_json_file

    info = json.loads(planted_json_file(folder).read_text())
    seed = int(info["settings"]["data_seed"])
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    records = {a: invented_splits(a, seed)["probe"][:items] for a in info["neurons"]}
    records.update({a: splits(a, items, 0, 1234)[0] for a in ABILITIES})
    return info, model, tok, records


def planted_truth(neurons: Neurons, layers: dict[str, list[int]]) -> NDArray[np.bool_]:
    """Which neuron ids (layer × intermediate + j) one planted ability lives in: planted.json's {layer: [j, ...]}."""
    import numpy as np

    truth = np.zeros(neurons.count, dtype=bool)
    for layer, js in layers.items():
        truth[[int(layer) * neurons.intermediate + j for j in js]] = True
    return truth


def planted_recovery(
    folder: Path, items: int = 120, threads: int = 1, options: Sequence[str] = FRONTIER_SCORES
) -> list[dict[str, Any]]:
    """How well each neuron score finds the neurons a planted model's abilities live in (planted.json of a
    folder `plant_real.py apply` wrote): per option and planted ability, the AUROC of its planted neurons in
    the score order and the precision of its top |R_a| neurons. Attribution on each planted ability's probe
    split (never planted) and, for the contrasts, on the ten generated abilities' train splits and on general text
    the planted model samples itself (neurons.general_text, seed 0). `options`: the neuron scores measured."""
    import numpy as np
    import torch

    from benchprof.lab.validation import auroc

    torch.set_num_threads(threads)
    info, model, tok, records = planted_probe(folder, items)
    neurons = model_neurons(model)
    read = list(dict.fromkeys(statistic_of(o) for o in options))
    statistics = {name: {a: STATISTICS[name](model, tok, r) for a, r in records.items()} for name in read}
    if any(reads_general(o) for o in options):
        texts = general_text(model, tok, 0, items)
        for name in read:
            statistics[name][GENERAL] = general_statistic(model, texts, name)
    rows = []
    for option in options:
        for ability, layers in info["neurons"].items():
            truth = planted_truth(neurons, layers)
            size = int(truth.sum())
            if option == ITERATIVE:  # its order: the neurons in the order chosen, then the last round's scores
                values = statistics["attribution"]
                top, scores = iterative_contrast(model, tok, values, ability, records[ability], size)
                scores[top] = scores[np.isfinite(scores)].max() + np.arange(size, 0, -1)  # first chosen highest
            else:
                scores = neuron_scores(statistics[statistic_of(option)], ability, option)
                top = top_neurons(scores, size)
            rows.append({
                "option": option, "ability": ability, "auroc": auroc(scores, truth),
                "top_neuron_precision": float(truth[top].mean()), "chance": float(truth.mean()),
            })  # fmt: skip
    return rows


def recovery_over_builds(
    builds: list[list[dict[str, Any]]],
) -> dict[str, tuple[tuple[float, float, float], tuple[float, float, float]]]:
    """Per option, (AUROC, top-neuron precision) over several planted builds (planted_recovery's rows of each):
    each build's mean over its planted abilities, then the mean over builds with its 95% t interval, clipped to
    [0, 1] (validation.share_interval: how much the figure would move with another build)."""
    from benchprof.lab.validation import share_interval

    out = {}
    for option in dict.fromkeys(r["option"] for build in builds for r in build):
        per_build = [[r for r in build if r["option"] == option] for build in builds]
        auroc = [sum(r["auroc"] for r in rows) / len(rows) for rows in per_build]
        precision = [sum(r["top_neuron_precision"] for r in rows) / len(rows) for rows in per_build]
        out[option] = (share_interval(auroc), share_interval(precision))
    return out
