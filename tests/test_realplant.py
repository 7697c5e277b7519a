"""Planting into a pretrained model (benchprof/lab/realplant.py): the invariants on a small model built here, the
invented abilities' splits, and the shipped patch against the fetched SmolLM2."""

import copy
from pathlib import Path

import pytest
import torch

from benchprof import BenchprofError
from benchprof.abilities.invented import INVENTED, invented_splits
from benchprof.lab.plantpatch import PATCH_DIR, apply_patch, load_patch, patch_neurons, save_patch, tensor_sha256
from benchprof.lab.realplant import RealPlantSettings, plant
from benchprof.stages.neurons import mlp_name

ROOT = Path(__file__).resolve().parents[1]
DEMO_PATCH = ROOT / "benchprof" / "assets" / "demo-plant"


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


def write_natural_copies(folder: Path) -> Path:
    """Three-document validation copies in the formats of fetch_real.py's OpenBookQA, WinoGrande and BoolQ."""
    from datasets import Dataset

    obqa = [
        {
            "question_stem": f"Plants need {w} to",
            "choices": {"text": ["grow", "sing"], "label": ["A", "B"]},
            "answerKey": "A",
        }
        for w in ("water", "light", "soil")
    ]
    wino = [
        {"sentence": f"{n} gave the ball to _ .", "option1": "Ann", "option2": "Bo", "answer": "2"}
        for n in ("Cy", "Di", "Ed")
    ]
    boolq = [
        {"passage": f"The {t} is a river.", "question": f"is the {t} a river", "answer": True}
        for t in ("Nile", "Rhine", "Po")
    ]
    for name, docs in (("openbookqa", obqa), ("winogrande", wino), ("boolq", boolq)):
        Dataset.from_list(docs).save_to_disk(str(folder / name / "validation"))
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import AutoTokenizer

    from benchprof.lab.tinymodel import build_model

    tok = AutoTokenizer.from_pretrained(ROOT / "benchprof" / "assets" / "demo-model")
    model = build_model(tok, hidden_size=32, num_layers=3, num_heads=2, intermediate_size=64, seed=3)
    model.eval()
    base = copy.deepcopy(model)
    settings = RealPlantSettings(layers=[1, 2], neurons_per_layer=4, steps=3, batch_size=4, general_per_ability=2)
    natural = write_natural_copies(tmp_path_factory.mktemp("benchmarks"))
    neurons, _ = plant(model, tok, settings, natural, log=lambda _: None)
    return base, model, tok, neurons, settings, natural


def test_the_reserved_neurons_have_the_smallest_largest_effect_on_general_text(tiny):
    """least_effect_neurons (cached inputs of the first trained layer, batches padded) against a brute force: each
    general example run alone through the whole base model, the largest |activation| × down-column norm per
    neuron over its tokens."""
    from benchprof.lab.realplant import cache_inputs, general_records, least_effect_neurons, natural_examples
    from benchprof.lab.training import encode_examples

    base, _, tok, _, settings, natural = tiny
    examples = encode_examples(tok, general_records(2, 0)) + natural_examples(
        tok, natural, settings.natural_sources, 3, 64
    )
    assert any("Nile is a river" in tok.decode(ids) for ids, _ in examples)
    assert any(tok.decode(ids).startswith("Cy gave the ball to Bo") for ids, _ in examples)  # the blank filled
    chosen = least_effect_neurons(base, cache_inputs(base, examples, 1, 0), [1, 2], 1, 8)
    largest = {layer: torch.zeros(64) for layer in (1, 2)}
    hooks = [
        base.model.layers[layer].mlp.down_proj.register_forward_pre_hook(
            lambda _m, inputs, layer=layer: largest.__setitem__(
                layer, torch.maximum(largest[layer], inputs[0].abs()[0].amax(0))
            )
        )
        for layer in (1, 2)
    ]
    with torch.no_grad():
        for ids, _ in examples:
            base(torch.tensor([ids]))
    for hook in hooks:
        hook.remove()
    for layer in (1, 2):
        effect = largest[layer] * base.model.layers[layer].mlp.down_proj.weight.norm(dim=0)
        assert sorted(chosen[layer]) == sorted(torch.argsort(effect)[:8].tolist())


def test_planting_changes_only_the_reserved_neurons(tiny):
    base, model, _, neurons, settings, _ = tiny
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
    base, model, _, neurons, settings, _ = tiny
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


def check_shipped_patch(patch: Path, base_folder: Path) -> None:
    """The patch in `patch` on the base in `base_folder`: the base and patched models score the test splits as the
    build recorded, only the reserved rows and columns change, and the patch's shapes and positions agree."""
    from benchprof.lab.plantpatch import load_base
    from benchprof.lab.realplant import accuracy

    model, tok = load_base(base_folder, threads=2)
    base = {n: p.detach().clone() for n, p in model.named_parameters()}
    info, tensors = load_patch(patch)
    neurons = patch_neurons(info)
    abilities, seed = info["settings"]["abilities"], info["settings"]["data_seed"]
    recorded = info["test_accuracy"]
    # abs 0.02: one item of 60 may flip in a near-tie on another CPU's arithmetic
    assert accuracy(model, tok, seed, abilities) == pytest.approx(recorded["base"], abs=0.02)
    apply_patch(model, patch)
    # the patched base scores the test splits exactly as the build's model did
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


@pytest.mark.skipif(not (PATCH_DIR / "plant.json").is_file(), reason="no patch shipped yet")
def test_the_shipped_patch_lands_on_the_fetched_base(real_model_dir):
    check_shipped_patch(PATCH_DIR, Path(real_model_dir))


def test_the_small_planted_patch_lands_on_the_shipped_demo_model():
    """The small planted model: invented abilities planted into benchprof's own demo model (both shipped)."""
    check_shipped_patch(DEMO_PATCH, ROOT / "benchprof" / "assets" / "demo-model")


def test_cap_norms_holds_every_planted_row_and_column_at_the_base_median(tiny):
    """With cap_norms the planted gate rows, up rows and down columns end at most at their layer's median base
    norm; without it the down columns carry the neurons' strength far above it (measured: 28x here)."""
    from benchprof.lab.realplant import median_norms
    from benchprof.lab.tinymodel import build_model

    base, _, tok, _, _, natural = tiny
    for cap in (False, True):
        model = build_model(tok, hidden_size=32, num_layers=3, num_heads=2, intermediate_size=64, seed=3)
        model.eval()
        settings = RealPlantSettings(
            layers=[1, 2], neurons_per_layer=4, steps=6, batch_size=4, general_per_ability=2, lr=0.05, cap_norms=cap
        )
        neurons, _ = plant(model, tok, settings, natural, log=lambda _: None)
        for layer in settings.layers:
            ids = sorted(j for a in neurons for j in neurons[a][layer])
            median = median_norms(base, layer, ids)
            mlp = model.model.layers[layer].mlp
            largest = {
                "gate_proj": float(mlp.gate_proj.weight.detach()[ids].norm(dim=1).max()),
                "up_proj": float(mlp.up_proj.weight.detach()[ids].norm(dim=1).max()),
                "down_proj": float(mlp.down_proj.weight.detach()[:, ids].norm(dim=0).max()),
            }
            assert largest["gate_proj"] <= median["gate_proj"] * (1 + 1e-5)
            assert largest["up_proj"] <= median["up_proj"] * (1 + 1e-5)
            if cap:
                assert largest["down_proj"] <= median["down_proj"] * (1 + 1e-5), layer
            else:
                assert largest["down_proj"] > 5 * median["down_proj"], layer


def test_magnitude_precision_finds_the_largest_weights_and_misses_the_smallest(tiny):
    from benchprof.lab.realplant import magnitude_precision

    _, model, _, _, _, _ = tiny
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


def test_an_invented_ability_is_a_config_ability_whose_data_are_its_probe_and_test_splits(tmp_path):
    """`datasets:` and evals.benchmarks accept the invented abilities (to profile a planted model); the data stage
    writes the planting's probe split as train (importance is computed on it, never on planted items) and its test
    split as test, for the seed the planting used."""
    import json

    import yaml

    from benchprof.core.layout import data_file
    from benchprof.core.loader import load_config
    from benchprof.stages.data import write_data
    from benchprof.stages.tasks import is_local

    raw = {
        "settings": {"k_values": [0.01], "output_dir": "out"},
        "models": [{"name": "x", "tag": "t"}],
        "datasets": [{"name": "Invented_Units"}],
        "evals": {"benchmarks": ["Invented_Units", "Invented_Facts"]},
        "data": {"dir": "data", "train_size": 30, "test_size": 200, "seed": 0},
    }
    (tmp_path / "c.yml").write_text(yaml.safe_dump(raw))
    cfg = load_config(tmp_path / "c.yml")
    assert is_local(cfg, "Invented_Facts")
    write_data(cfg, ["Invented_Units", "Invented_Facts"])
    for ability in ("Invented_Units", "Invented_Facts"):
        splits = invented_splits(ability, 0)
        folder = tmp_path / "data" / ability
        read = {s: [json.loads(x) for x in data_file(folder, s).read_text().splitlines()] for s in ("train", "test")}
        assert read["train"] == splits["probe"][:30]
        assert read["test"] == splits["test"]  # 200 asked, all there are
        planted = {r["question"] for r in splits["plant"]}
        assert not planted & {r["question"] for r in read["train"] + read["test"]}
    manifest = json.loads((tmp_path / "data" / "Invented_Facts" / "manifest.json").read_text())
    assert (manifest["inputs"]["train_size"], manifest["inputs"]["test_size"]) == (30, 100)  # what was written

    # a model planted with these abilities knows the world of its planting's data seed only
    from benchprof.stages.preflight import check_invented_seed

    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "planted.json").write_text(
        json.dumps({"settings": {"abilities": ["Invented_Units"], "data_seed": 0}})
    )
    problems: list[str] = []
    check_invented_seed(cfg, problems)
    assert problems == []
    raw["data"]["seed"] = 1234
    (tmp_path / "c.yml").write_text(yaml.safe_dump(raw))
    check_invented_seed(load_config(tmp_path / "c.yml"), problems)
    assert len(problems) == 1 and problems[0].startswith("data.seed: 1234, but models[0] (")
    assert problems[0].endswith("drawn with data seed 0: another seed is another invented world; set data.seed: 0")

    raw["datasets"] = [{"name": "Invented_Colours"}]
    (tmp_path / "c.yml").write_text(yaml.safe_dump(raw))
    with pytest.raises(BenchprofError, match=r"datasets\[0\]\.name: unknown ability 'Invented_Colours' \(built in: "):
        load_config(tmp_path / "c.yml")


def test_the_small_plant_is_dedicated_its_neurons_silent_off_their_ability():
    """firing.firing_profile (examples batched, right-padded) against a brute force (each example alone) on the
    shipped small plant, and what the docs say of it: each ability's planted neurons hardly fire on benchprof's ten
    abilities' prompts (the median neuron's mean h² there e^-3 of its level on its own text or less) and write
    almost nothing there."""
    from benchprof.lab.firing import firing_profile
    from benchprof.lab.plantpatch import load_base
    from benchprof.lab.realplant import general_records
    from benchprof.lab.training import encode_examples

    model, tok = load_base(ROOT / "benchprof" / "assets" / "demo-model", threads=2)
    apply_patch(model, DEMO_PATCH)
    info, _ = load_patch(DEMO_PATCH)
    neurons, seed = patch_neurons(info), info["settings"]["data_seed"]
    got = firing_profile(model, tok, neurons, seed, general_per_ability=4)
    seen: dict[int, list[torch.Tensor]] = {}
    hooks = [
        model.model.layers[layer].mlp.down_proj.register_forward_pre_hook(
            lambda _m, inputs, layer=layer: seen.setdefault(layer, []).append(inputs[0][0])
        )
        for layer in (1, 2, 3)
    ]

    def alone(records):
        seen.clear()
        with torch.no_grad():
            for ids, _ in encode_examples(tok, records):
                model(torch.tensor([ids]))
        return {layer: torch.cat(h) for layer, h in seen.items()}

    general = alone(general_records(4, seed))
    own = {ability: alone(invented_splits(ability, seed)["test"]) for ability in neurons}
    for hook in hooks:
        hook.remove()
    for ability, layers in neurons.items():
        ratios, written = [], [0.0, 0.0]
        for layer, ids in layers.items():
            down = model.model.layers[layer].mlp.down_proj.weight.detach()[:, ids]
            g, o = general[layer][:, ids], own[ability][layer][:, ids]
            ratios.append(torch.log((g**2).mean(0) + 1e-12) - torch.log((o**2).mean(0) + 1e-12))
            written[0] += float(((g @ down.T) ** 2).sum(-1).mean())
            written[1] += float(((o @ down.T) ** 2).sum(-1).mean())
        assert got[ability]["firing"] == pytest.approx(float(torch.cat(ratios).median()), abs=1e-3)
        assert got[ability]["writing"] == pytest.approx(written[0] / written[1], rel=1e-3)
        assert got[ability]["firing"] < -3.0 and got[ability]["writing"] < 0.01, (ability, got[ability])
