"""Recovery metrics against hand computations, and the planted model's construction (issue 19)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch

from benchprof.planted import (
    PlantSettings,
    build,
    load_planted,
    neuron_region,
    neuron_sets,
    planted_json_file,
    region_masks,
    state_hash,
)
from benchprof.validation import (
    auroc,
    jaccard_pairs,
    neuron_counts,
    neuron_set,
    positions_region,
    precision_recall,
    region_mask,
    set_precision_recall,
    share_outside,
    shared_count,
    top_n,
    top_neurons,
)

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "benchprof" / "assets" / "planted-model"


def idx(*values: int) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


def test_precision_recall_by_hand() -> None:
    truth = {"w1": idx(0, 1, 2, 3), "w2": idx(5)}  # 5 weights
    top = {"w1": idx(2, 3, 4), "w2": idx(0, 5), "w3": idx(7)}  # 6 weights, 3 of them in truth
    assert shared_count(top, truth) == 3
    assert precision_recall(top, truth) == (3 / 6, 3 / 5)
    assert precision_recall({}, truth)[1] == 0.0
    assert np.isnan(precision_recall({}, truth)[0])


def test_share_outside_by_hand() -> None:
    truth = {"w1": idx(0, 1), "w2": idx()}  # w2 listed but empty: counts as holding no weight of truth
    top = {"w1": idx(5), "w2": idx(0, 1), "w3": idx(2, 3, 4)}  # 6 weights, 5 in w2 and w3
    assert share_outside(top, truth) == 5 / 6
    assert share_outside({"w1": idx(7, 8)}, truth) == 0.0
    assert np.isnan(share_outside({}, truth))


def test_neuron_set_by_hand() -> None:
    # hidden 3, intermediate 4: gate/up are 4 x 3 (neuron = row), down is 3 x 4 (neuron = column)
    shapes = {
        "model.layers.0.mlp.gate_proj.weight": (4, 3),
        "model.layers.0.mlp.up_proj.weight": (4, 3),
        "model.layers.0.mlp.down_proj.weight": (3, 4),
        "model.layers.1.mlp.down_proj.weight": (3, 4),
        "model.layers.0.self_attn.q_proj.weight": (3, 3),
    }
    region = {
        "model.layers.0.mlp.gate_proj.weight": idx(0, 5),  # rows 0 and 1
        "model.layers.0.mlp.up_proj.weight": idx(11),  # row 3
        "model.layers.0.mlp.down_proj.weight": idx(4, 9),  # (1, 0) and (2, 1): columns 0 and 1
        "model.layers.1.mlp.down_proj.weight": idx(7),  # (1, 3): column 3
        "model.layers.0.self_attn.q_proj.weight": idx(0),  # not an MLP neuron
    }
    got = neuron_set(region, shapes)
    p0, p1 = "model.layers.0.mlp", "model.layers.1.mlp"
    assert got == {(p0, 0), (p0, 1), (p0, 3), (p1, 3)}
    truth = {(p0, 1), (p0, 2), (p1, 3)}
    assert set_precision_recall(got, truth) == (2 / 4, 2 / 3)
    counts = neuron_counts(region, shapes)
    assert counts == {(p0, 0): 2, (p0, 1): 2, (p0, 3): 1, (p1, 3): 1}
    assert top_neurons(counts, 2) == {(p0, 0), (p0, 1)}
    assert top_neurons(counts, 3) == {(p0, 0), (p0, 1), (p0, 3)}  # tie at 1: the smaller name first


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


def brute_auroc(scores: np.ndarray, positive: np.ndarray) -> float:
    pos, neg = scores[positive], scores[~positive]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg))
    return wins / (len(pos) * len(neg))


def test_auroc_by_hand_and_brute_force() -> None:
    assert auroc([3, 2, 1, 0], [True, True, False, False]) == 1.0
    assert auroc([0, 1, 2, 3], [True, True, False, False]) == 0.0
    # positives 2 and 1 (tie with a negative) against negatives 1 and 0: pairs (2,1) (2,0) (1,1)=1/2 (1,0)
    assert auroc([2, 1, 1, 0], [True, True, False, False]) == pytest.approx(3.5 / 4)
    assert np.isnan(auroc([1, 2], [False, False]))
    rng = np.random.default_rng(0)
    for _ in range(20):
        scores = rng.integers(0, 6, size=40).astype(float)  # many ties
        positive = rng.random(40) < 0.3
        if 0 < positive.sum() < 40:
            assert auroc(scores, positive) == pytest.approx(brute_auroc(scores, positive), abs=1e-12)


def test_region_mask_top_n_and_jaccard() -> None:
    mask = region_mask({"b": idx(1), "a": idx(0, 2)}, ["a", "b"], [3, 2])
    assert mask.tolist() == [True, False, True, False, True]
    assert top_n(torch.tensor([1.0, 3.0, 3.0, 0.0, 2.0]), 3).tolist() == [1, 2, 4]  # tie kept in position order
    region = positions_region(idx(4, 0, 2), ["a", "b"], [3, 2])
    assert {n: v.tolist() for n, v in region.items()} == {"a": [0, 2], "b": [1]}
    pairs = jaccard_pairs({"x": {"w": idx(0, 1, 2)}, "y": {"w": idx(2, 3)}}, eligible=10)
    (a, b, j, chance) = pairs[0]
    assert (a, b, j) == ("x", "y", 1 / 4)
    shared = 3 * 2 / 10
    assert chance == pytest.approx(shared / (3 + 2 - shared))


def test_neuron_sets_disjoint() -> None:
    s = PlantSettings(abilities=["a", "b", "c"], layers=[0, 2], neurons_per_layer=5, intermediate=16)
    sets = neuron_sets(s)
    for layer in (0, 2):
        ids = [j for a in "abc" for j in sets[a][layer]]
        assert len(ids) == len(set(ids)) == 15
    with pytest.raises(Exception, match="exceed"):
        neuron_sets(PlantSettings(abilities=["a", "b"], layers=[0], neurons_per_layer=9, intermediate=16))


def check_planted_folder(folder: Path) -> None:
    """The planted sets are disjoint, and zeroing their union gives back the base model bit for bit."""
    from transformers import AutoModelForCausalLM

    regions, info = load_planted(folder)
    abilities = list(regions)
    for a, b in itertools.combinations(abilities, 2):
        assert shared_count(regions[a], regions[b]) == 0
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    union = region_masks(model, list(regions.values()))
    params = dict(model.named_parameters())
    for a in abilities:  # training changed every planted tensor (the fresh neurons are not zero)
        for name, mask in region_masks(model, [regions[a]]).items():
            assert bool(params[name].detach()[mask].ne(0).any())
    assert state_hash(model) != info["base_sha256"]
    with torch.no_grad():
        for name, mask in union.items():
            params[name][mask] = 0.0
    assert state_hash(model) == info["base_sha256"]


def test_tiny_planted_model_outside_weights_identical(tmp_path: Path) -> None:
    settings = PlantSettings(
        abilities=["Commonsense_Causal", "Long_Term_Knowledge"],
        layers=[0, 1],
        neurons_per_layer=4,
        hidden=32,
        intermediate=64,
        num_layers=2,
        heads=2,
        train_size=48,
        test_size=8,
        base_steps=4,
        plant_steps=4,
        batch_size=8,
        threads=1,
        tokenizer=str(ROOT / "benchprof" / "assets" / "demo-model"),
    )
    info = build(settings, tmp_path / "m", check=False, log=lambda _: None)
    assert info["planted_weights"] == {a: 2 * 4 * 3 * 32 for a in settings.abilities}
    check_planted_folder(tmp_path / "m")


@pytest.mark.skipif(not planted_json_file(SHIPPED).is_file(), reason="no shipped planted model")
def test_shipped_planted_model() -> None:
    check_planted_folder(SHIPPED)
