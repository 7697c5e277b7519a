"""Planting into a pretrained model (benchprof/realplant.py): the invariants on a small model built here, the
invented abilities' splits, and the shipped patch against the fetched SmolLM2."""

import copy
from pathlib import Path

import pytest
import torch

from benchprof import BenchprofError
from benchprof.invented import INVENTED, invented_splits
from benchprof.planted import mlp_name
from benchprof.plantpatch import PATCH_DIR, apply_patch, load_patch, patch_neurons, save_patch, tensor_sha256
from benchprof.realplant import RealPlantSettings, plant

ROOT = Path(__file__).resolve().parents[1]


def test_invented_splits_are_disjoint_deterministic_and_balanced():
    for ability in INVENTED:
        splits = invented_splits(ability)
        assert splits == invented_splits(ability)
        questions = {s: {r["question"] for r in recs} for s, recs in splits.items()}
        assert not questions["plant"] & questions["test"]
        assert not questions["plant"] & questions["probe"]
        assert not questions["probe"] & questions["test"]
        for records in splits.values():
            for r in records:
                assert r["options"][r["label"]] == r["answer"] and len(set(r["options"])) == 4
    factors: dict[str, set[int]] = {}
    for records in invented_splits("Invented_Units").values():  # one whole factor per unit, in every split
        for r in records:
            words = r["question"].rstrip("?").split()
            n, unit = int(words[5]), words[6]
            assert int(r["answer"]) % n == 0
            factors.setdefault(unit, set()).add(int(r["answer"]) // n)
    assert sorted(f for fs in factors.values() for f in fs) == [3, 4, 6, 7, 9]


@pytest.fixture(scope="module")
def tiny():
    from transformers import AutoTokenizer

    from benchprof.tinymodel import build_model

    tok = AutoTokenizer.from_pretrained(ROOT / "benchprof" / "assets" / "demo-model")
    model = build_model(tok, hidden_size=32, num_layers=3, num_heads=2, intermediate_size=64, seed=3)
    model.eval()
    base = copy.deepcopy(model)
    settings = RealPlantSettings(layers=[1, 2], neurons_per_layer=4, steps=3, batch_size=4, general_per_ability=2)
    neurons, _ = plant(model, tok, settings, log=lambda _: None)
    return base, model, tok, neurons, settings


def test_planting_changes_only_the_reserved_neurons(tiny):
    base, model, _, neurons, settings = tiny
    reserved = {layer: sorted(j for a in neurons for j in neurons[a][layer]) for layer in settings.layers}
    for a in neurons:  # disjoint, the same count per ability and layer
        for b in neurons:
            if a != b:
                for layer in settings.layers:
                    assert not set(neurons[a][layer]) & set(neurons[b][layer])
        assert all(len(ids) == settings.neurons_per_layer for ids in neurons[a].values())
    before, after = dict(base.named_parameters()), dict(model.named_parameters())
    for name, p in after.items():
        mask = torch.zeros_like(p, dtype=torch.bool)
        for layer, ids in reserved.items():
            if name in (mlp_name(layer, "gate_proj"), mlp_name(layer, "up_proj")):
                mask[ids] = True
            if name == mlp_name(layer, "down_proj"):
                mask[:, ids] = True
        assert torch.equal(p[~mask], before[name][~mask]), name
        if mask.any():
            assert not torch.equal(p[mask], before[name][mask]), f"{name}: planting changed nothing"


def test_the_patch_round_trips_bit_identically_and_refuses_other_weights(tiny, tmp_path):
    base, model, _, neurons, settings = tiny
    params = dict(base.named_parameters())
    touched = [mlp_name(layer, m) for layer in settings.layers for m in ("gate_proj", "up_proj", "down_proj")]
    save_patch(tmp_path, model, {n: tensor_sha256(params[n]) for n in touched}, neurons, {"settings": {}})
    fresh = copy.deepcopy(base)
    regions = apply_patch(fresh, tmp_path)
    for name, p in model.state_dict().items():
        assert torch.equal(p, fresh.state_dict()[name]), name
    assert set(regions) == set(neurons)
    assert patch_neurons(load_patch(tmp_path)[0]) == neurons
    other = copy.deepcopy(base)
    with torch.no_grad():
        other.model.layers[1].mlp.up_proj.weight[0, 0] += 1.0
    with pytest.raises(BenchprofError, match="differs from the base"):
        apply_patch(other, tmp_path)
    assert torch.equal(other.model.layers[2].mlp.up_proj.weight, base.model.layers[2].mlp.up_proj.weight)


@pytest.mark.skipif(not (PATCH_DIR / "plant.json").is_file(), reason="no patch shipped yet")
def test_the_shipped_patch_lands_on_the_fetched_base(real_model_dir):
    from benchprof.plantpatch import load_base
    from benchprof.realplant import accuracy

    model, tok = load_base(Path(real_model_dir), threads=2)
    base = {n: p.detach().clone() for n, p in model.named_parameters()}
    info, tensors = load_patch()
    neurons = patch_neurons(info)
    abilities, seed = info["settings"]["abilities"], info["settings"]["data_seed"]
    recorded = info["test_accuracy"]
    # abs 0.02: one item of 60 may flip in a near-tie on another CPU's arithmetic
    assert accuracy(model, tok, seed, abilities) == pytest.approx(recorded["base"], abs=0.02)
    apply_patch(model, PATCH_DIR)
    # the patched fetched base scores the test splits exactly as the build's model did
    assert accuracy(model, tok, seed, abilities) == pytest.approx(recorded["planted"], abs=0.02)
    for name, p in model.named_parameters():
        changed = (p != base[name]).nonzero()
        layer = name.split(".")[2] if name.startswith("model.layers.") else None
        if changed.numel() == 0:
            continue
        assert layer is not None and f"layers.{layer}.neurons" in tensors, f"{name} changed outside the patch"
        ids = set(tensors[f"layers.{layer}.neurons"].tolist())
        column = 1 if name.endswith("down_proj.weight") else 0
        assert set(changed[:, column].tolist()) <= ids, name
    for layer in {int(k.split(".")[1]) for k in tensors if k.endswith(".neurons")}:
        ids = tensors[f"layers.{layer}.neurons"]
        assert sorted(j for a in neurons for j in neurons[a][layer]) == ids.tolist()
        assert tensors[f"layers.{layer}.gate_proj"].shape == (len(ids), model.config.hidden_size)
        assert tensors[f"layers.{layer}.down_proj"].shape == (model.config.hidden_size, len(ids))


def test_magnitude_precision_finds_the_largest_weights_and_misses_the_smallest(tiny):
    from benchprof.realplant import magnitude_precision

    _, model, _, _, _ = tiny
    name = mlp_name(1, "up_proj")
    weight = dict(model.named_parameters())[name].detach().abs().reshape(-1)
    largest_everywhere = torch.cat(
        [p.detach().abs().reshape(-1) for n, p in sorted(model.named_parameters()) if ".mlp." in n]
    ).max()
    with torch.no_grad():  # make 5 weights of one tensor the model's largest MLP weights, by hand
        flat = dict(model.named_parameters())[name].view(-1)
        saved = flat[:5].clone()
        flat[:5] = largest_everywhere + 1.0
    try:
        smallest = torch.argsort(weight)[:5]
        got = magnitude_precision(model, {"big": {name: torch.arange(5)}, "small": {name: smallest}})
    finally:
        with torch.no_grad():
            flat[:5] = saved
    assert got == {"big": 1.0, "small": 0.0}
