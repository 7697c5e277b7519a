"""benchprof/lab/planted.py: each ability's reserved neurons and their weights in the region format."""

from __future__ import annotations

import pytest
import torch

from benchprof.lab.planted import PlantSettings, neuron_sets
from benchprof.lab.validation import neuron_set
from benchprof.stages.neurons import neuron_region


def test_neuron_region_is_rows_and_columns() -> None:
    hidden, inter = 3, 5
    region = neuron_region({2: [1, 4]}, hidden, inter)
    gate = torch.zeros(inter, hidden, dtype=torch.bool)
    gate[[1, 4], :] = True
    down = torch.zeros(hidden, inter, dtype=torch.bool)
    down[:, [1, 4]] = True
    for module in ("gate_proj", "up_proj"):
        assert torch.equal(region[f"model.layers.2.mlp.{module}.weight"], torch.nonzero(gate.view(-1)).flatten())
    assert torch.equal(region["model.layers.2.mlp.down_proj.weight"], torch.nonzero(down.view(-1)).flatten())
    shapes = {f"model.layers.2.mlp.{m}.weight": (inter, hidden) for m in ("gate_proj", "up_proj")}
    shapes["model.layers.2.mlp.down_proj.weight"] = (hidden, inter)
    assert neuron_set(region, shapes) == {("model.layers.2.mlp", 1), ("model.layers.2.mlp", 4)}


def test_neuron_sets_disjoint() -> None:
    s = PlantSettings(abilities=["a", "b", "c"], layers=[0, 2], neurons_per_layer=5, intermediate=16)
    sets = neuron_sets(s)
    for layer in (0, 2):
        ids = [j for a in "abc" for j in sets[a][layer]]
        assert len(ids) == len(set(ids)) == 15
    with pytest.raises(Exception, match="exceed"):
        neuron_sets(PlantSettings(abilities=["a", "b"], layers=[0], neurons_per_layer=9, intermediate=16))
