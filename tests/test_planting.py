"""benchprof/planting.py: the planted model's construction (issue 19) keeps every weight outside the planted
neurons bit for bit, on a tiny build and on the shipped model."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch

from benchprof.planted import PlantSettings, load_planted, planted_json_file, region_masks, state_hash
from benchprof.planting import build
from benchprof.validation import shared_count

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "benchprof" / "assets" / "planted-model"


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
