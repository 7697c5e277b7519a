#!/usr/bin/env python
"""Iterative selection of a planted ability's neurons (zero, re-score, repeat), against the planted neurons.

act_grad_contrast chooses |R_a| neurons at once. Here it chooses them in ROUNDS equal chunks: each round zeroes the
neurons chosen so far, recomputes the ability's attribution on its probe items (stages/neurons.py), ranks the rest
by t_a − max_b t_b (the other abilities' t from the unablated model) and adds the next chunk. The question: do
neurons that act together show up once the first of them are gone? Prints the top-neuron precision per build and
ability, and the mean over builds with its 95% t interval, clipped to [0, 1] (lab/validation.py share_interval).

.venv/bin/python scripts/frontier_iterative.py /tmp/demo-planted[,/tmp/m1,/tmp/m2] [rounds] [items] [threads]
"""

import sys
from pathlib import Path

import numpy as np
import torch

from benchprof.lab.frontier import planted_probe, planted_truth
from benchprof.lab.validation import share_interval
from benchprof.stages.damage import ablated
from benchprof.stages.neurons import model_neurons, neuron_attribution, neuron_ids_region, neuron_scores


def iterative_precision(folder: Path, rounds: int, items: int) -> dict[str, float]:
    """Top-neuron precision of the iterative selection for each planted ability of one build."""
    info, model, tok, records = planted_probe(folder, items)
    neurons = model_neurons(model)
    attribution = {a: neuron_attribution(model, tok, r) for a, r in records.items()}
    out = {}
    for ability, layers in info["neurons"].items():
        truth = planted_truth(neurons, layers)
        size, chosen = int(truth.sum()), []
        for r in range(rounds):
            with ablated(model, neuron_ids_region(neurons, chosen)):
                values = {**attribution, ability: neuron_attribution(model, tok, records[ability])}
            scores = neuron_scores(values, ability, "act_grad_contrast")
            scores[chosen] = -np.inf
            chosen += [int(i) for i in np.argsort(-scores, kind="stable")[: size * (r + 1) // rounds - len(chosen)]]
        out[ability] = float(truth[chosen].mean())
    return out


if __name__ == "__main__":
    folders = [Path(f) for f in sys.argv[1].split(",")]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    items = int(sys.argv[3]) if len(sys.argv) > 3 else 120
    torch.set_num_threads(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    means = []
    for folder in folders:
        got = iterative_precision(folder, rounds, items)
        print(f"{folder.name}: " + ", ".join(f"{a} {p:.3f}" for a, p in got.items()))
        means.append(sum(got.values()) / len(got))
    mean, low, high = share_interval(means)
    print(f"top-neuron precision, {rounds} rounds: {mean:.3f} [{low:.3f}, {high:.3f}]")
