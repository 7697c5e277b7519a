"""extract with a neuron score (stages/neurons.py): regions of whole MLP neurons that equal a brute-force ranking
of an independently computed attribution, random regions of the same count, resumption, status."""

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from benchprof import BenchprofError
from benchprof.abilities import generate
from benchprof.core.config import ConfigError
from benchprof.core.layout import Layout
from benchprof.core.loader import load_config, parse_config
from benchprof.core.regions import read_region
from benchprof.stages.data import write_jsonl
from benchprof.stages.extract import extract, neuron_count
from benchprof.stages.neurons import model_neurons, neuron_activity, neuron_attribution, neuron_scores
from benchprof.stages.status import plan_status

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "benchprof" / "assets" / "demo-model"
ABILITIES = ("Long_Term_Knowledge", "Commonsense_Causal", "Semantic_Relationship")
K = 0.004


def project(
    tmp_path: Path,
    score: str = "act_grad_contrast",
    test_items: int = 4,
    max_samples: int = 10,
    regions: tuple[str, ...] = ("top", "bottom", "random"),
    evals: dict | None = None,
    **extract_settings,
) -> Path:
    """A config of the demo model over three abilities' generated data (12 train items each) in tmp_path."""
    for ability in ABILITIES:
        train, test = generate(ability, 12, test_items, seed=2)
        write_jsonl(tmp_path / "data" / ability / "train.jsonl", train)
        write_jsonl(tmp_path / "data" / ability / "test.jsonl", test)
    raw = {
        "settings": {"k_values": [K], "output_dir": str(tmp_path / "out"), "front_removal": 1},
        "models": [{"name": str(DEMO), "tag": "demo"}],
        "datasets": [{"name": a, "path": str(tmp_path / "data" / a)} for a in ABILITIES],
        "evals": {"benchmarks": list(ABILITIES), **(evals or {})},
        "finetune": {"max_samples": max_samples},
        "extract": {"score": score, "regions": list(regions), "random_draws": 2, **extract_settings},
        "aggregate": {"bootstrap": 200},
    }
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump(raw))
    return path


def neurons_of(region: dict[str, torch.Tensor], hidden: int, inter: int) -> set[int]:
    """The neuron ids of a region (layer x inter + j), asserting that it holds whole neurons: for each one its
    gate row, its up row and its down column, and nothing else."""
    per_tensor: dict[str, set[int]] = {}
    for name, idx in region.items():
        layer, module = int(name.split(".")[2]), name.split(".")[4]
        js = {int(i) % inter for i in idx} if module == "down_proj" else {int(i) // hidden for i in idx}
        assert len(idx) == len(js) * hidden, name  # whole rows / columns only
        per_tensor[name] = {layer * inter + j for j in js}
    layers = {int(name.split(".")[2]) for name in region}
    for layer in layers:
        gate, up, down = (
            per_tensor.get(f"model.layers.{layer}.mlp.{m}.weight") for m in ("gate_proj", "up_proj", "down_proj")
        )
        assert gate == up == down, layer
    return set().union(*per_tensor.values())


def demo_model():
    """The demo model in float32 and its tokenizer, loaded apart from extract's own load."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(DEMO, dtype=torch.float32).eval(), AutoTokenizer.from_pretrained(DEMO)


def test_neuron_regions_equal_a_brute_force_ranking_of_an_independent_attribution(tmp_path, capsys):
    config = project(tmp_path)
    cfg = load_config(config)
    extract(cfg)
    layout = Layout(tmp_path / "out", "demo")
    model, tok = demo_model()
    shape = model_neurons(model)
    records = {a: generate(a, 12, 4, seed=2)[0][:10] for a in ABILITIES}
    attribution = {a: neuron_attribution(model, tok, records[a]) for a in ABILITIES}
    count = neuron_count(K, shape.total_params, shape.hidden)
    assert count > 4
    eligible = np.arange(shape.count) >= shape.intermediate  # front_removal: 1 layer
    for ability in ABILITIES:
        scores = neuron_scores(attribution, ability, "act_grad_contrast")
        order = [int(i) for i in np.argsort(-scores, kind="stable") if eligible[i]]
        got = {}
        for region in ("top", "bottom", "random", "random2"):
            indices, metadata = read_region(layout.mask_file(ability, K, region))
            got[region] = neurons_of(indices, shape.hidden, shape.intermediate)
            assert len(got[region]) == count and min(got[region]) >= shape.intermediate
            assert int(metadata["selected"]) == 3 * shape.hidden * count
        # the attribution is float32 in both paths: compare with a margin for near-ties at the cut
        assert len(got["top"] & set(order[:count])) >= count - 1
        assert len(got["bottom"] & set(order[-count:])) >= count - 1
        assert got["random"] != got["random2"] and not got["random"] <= got["top"]
    capsys.readouterr()
    extract(cfg)
    assert "0 (ability, k) region set(s), 3 up to date" in capsys.readouterr().out
    states = {(i.stage, i.model + ": " + i.what): i.state for i in plan_status(cfg)}
    assert all(states[("attribution", f"demo: {a}")] == "done" for a in ABILITIES)
    assert all(states[("masks", f"demo: {a} k{K}")] == "done" for a in ABILITIES)
    # another train item for one ability: its attribution and every contrast region that reads it are stale
    train, _ = generate("Commonsense_Causal", 13, 4, seed=3)
    write_jsonl(tmp_path / "data" / "Commonsense_Causal" / "train.jsonl", train)
    states = {(i.stage, i.model + ": " + i.what): i.state for i in plan_status(load_config(config))}
    assert states[("attribution", "demo: Commonsense_Causal")] == "stale"
    assert states[("attribution", "demo: Long_Term_Knowledge")] == "done"
    assert all(states[("masks", f"demo: {a} k{K}")] != "done" for a in ABILITIES)


def test_act_contrast_regions_rank_an_independent_activity_and_have_their_own_status(tmp_path):
    config = project(tmp_path, score="act_contrast")
    cfg = load_config(config)
    extract(cfg)
    layout = Layout(tmp_path / "out", "demo")
    model, tok = demo_model()
    shape = model_neurons(model)
    activity = {a: neuron_activity(model, tok, generate(a, 12, 4, seed=2)[0][:10], batch_items=1) for a in ABILITIES}
    count = neuron_count(K, shape.total_params, shape.hidden)
    eligible = np.arange(shape.count) >= shape.intermediate
    for ability in ABILITIES:
        scores = neuron_scores(activity, ability, "act_contrast")
        order = [int(i) for i in np.argsort(-scores, kind="stable") if eligible[i]]
        top = neurons_of(read_region(layout.mask_file(ability, K, "top"))[0], shape.hidden, shape.intermediate)
        assert len(top & set(order[:count])) >= count - 1  # one item per batch here: float noise at the cut
    assert not layout.attribution_file(ABILITIES[0]).exists()  # the activity is all it reads
    states = {(i.stage, i.model + ": " + i.what): i.state for i in plan_status(cfg)}
    assert all(states[("activity", f"demo: {a}")] == "done" for a in ABILITIES)
    assert all(states[("masks", f"demo: {a} k{K}")] == "done" for a in ABILITIES)


def test_a_k_below_one_neuron_is_refused_naming_k(tmp_path):
    path = project(tmp_path)
    raw = yaml.safe_load(path.read_text())
    raw["settings"]["k_values"] = [1e-7]
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(BenchprofError, match=r"^k=1e-07: selects no whole neuron"):
        extract(load_config(path))


def test_a_neuron_score_refuses_chunked_selection():
    raw = {"models": [{"name": "m"}], "datasets": [{"name": a} for a in ABILITIES]}
    raw["extract"] = {"score": "act_grad_contrast", "selection": "chunked"}
    with pytest.raises(ConfigError, match="^extract.selection: a neuron score"):
        parse_config(raw)
