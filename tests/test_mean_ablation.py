"""Mean ablation (stages/mean_ablation.py) against independent computations on the demo model: the means against each
item run alone with its neurons recomputed from the MLP's input, the hooked model against one whose neurons are zeroed
and whose down_proj carries the held neurons' mean output as a bias, and the frontier's records under --ablation mean
against the same regions scored by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from benchprof import BenchprofError
from benchprof.abilities import generate
from benchprof.core.prompts import eval_prompt
from benchprof.core.storage import read_records
from benchprof.stages.damage import ablated
from benchprof.stages.mean_ablation import held_at_means, pooled_means
from benchprof.stages.neurons import model_neurons, neuron_ids_region, neuron_mean_output

DEMO = Path(__file__).resolve().parents[1] / "benchprof" / "assets" / "demo-model"


def neuron_means(model: torch.nn.Module, tok, records: list[dict], batch_items: int = 16) -> np.ndarray:
    """μ per neuron over `records`, as the tool pools it: each item's token mean, then the mean over the items."""
    return pooled_means({"reference": neuron_mean_output(model, tok, records, batch_items)})


@pytest.fixture(scope="module")
def demo() -> tuple[torch.nn.Module, object]:
    return AutoModelForCausalLM.from_pretrained(DEMO, dtype=torch.float32).eval(), AutoTokenizer.from_pretrained(DEMO)


def test_means_are_each_items_token_mean_of_the_neuron_averaged_over_items(demo):
    model, tok = demo
    records = generate("Temporal_Reasoning", 7, 1, seed=5)[0]  # prompts of unequal length: padding is exercised
    got = neuron_means(model, tok, records, batch_items=3)
    neurons = model_neurons(model)
    inputs: list[torch.Tensor] = []
    hooks = [m.register_forward_pre_hook(lambda _m, args: inputs.append(args[0])) for m in neurons.mlps]
    per_item = []
    try:
        for record in records:
            ids = tok(eval_prompt(record), add_special_tokens=False)["input_ids"]
            ids += tok(" " + record["options"][record["label"]], add_special_tokens=False)["input_ids"]
            inputs.clear()
            with torch.no_grad():
                model(input_ids=torch.tensor([ids]))
                per_item.append(
                    torch.cat(
                        [(m.act_fn(m.gate_proj(x[0])) * m.up_proj(x[0])).mean(0) for m, x in zip(neurons.mlps, inputs)]
                    )
                )
    finally:
        for hook in hooks:
            hook.remove()
    want = torch.stack(per_item).double().mean(0).numpy()
    assert got.shape == (neurons.count,)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    assert np.abs(got).max() > 1e-3  # the neurons do not average to zero: a mean differs from a zero ablation


def logits(model: torch.nn.Module, tok, text: str) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=torch.tensor([tok(text)["input_ids"]])).logits[0]


def test_held_at_means_equals_zeroed_neurons_plus_their_mean_output_as_a_bias(demo):
    """Holding h_lj at μ adds W_down[:, j] μ_j to the layer's output on every token; the neurons' weights zeroed and
    that sum given to down_proj as a bias is the same model, built without a hook."""
    model, tok = demo
    neurons = model_neurons(model)
    rng = np.random.default_rng(0)
    means = rng.normal(0, 0.5, neurons.count).astype(np.float32)
    ids = sorted(int(i) for i in rng.choice(neurons.count, 9, replace=False))
    ids += [neurons.intermediate + 1, neurons.intermediate + 2]  # two in one layer
    text = "Question: which came first, the egg or the hen? Answer: the egg"
    before = logits(model, tok, text)
    with held_at_means(model, ids, means):
        got = logits(model, tok, text)
    assert torch.equal(logits(model, tok, text), before)  # the hooks are removed

    by_layer: dict[int, list[int]] = {}
    for i in ids:
        by_layer.setdefault(i // neurons.intermediate, []).append(i % neurons.intermediate)
    biases = {}
    for layer, js in by_layer.items():
        down = neurons.mlps[layer].down_proj
        biases[layer] = (
            down.weight.detach()[:, js].double()
            @ torch.from_numpy(means[[layer * neurons.intermediate + j for j in js]]).double()
        )
    try:
        with ablated(model, neuron_ids_region(neurons, ids)):
            for layer, bias in biases.items():
                neurons.mlps[layer].down_proj.bias = torch.nn.Parameter(bias.float())
            want = logits(model, tok, text)
    finally:
        for layer in biases:
            neurons.mlps[layer].down_proj.bias = None
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert (got - before).abs().max() > 1e-2  # the held neurons move the output

    with held_at_means(model, ids, np.zeros(neurons.count, dtype=np.float32)):
        held_at_zero = logits(model, tok, text)
    with ablated(model, neuron_ids_region(neurons, ids)):
        zeroed = logits(model, tok, text)
    torch.testing.assert_close(held_at_zero, zeroed, rtol=1e-5, atol=1e-5)  # a mean of 0 is the zero ablation


def test_means_of_another_model_are_refused_in_one_line(demo):
    model, _ = demo
    with (
        pytest.raises(BenchprofError, match="neuron means for a model of"),
        held_at_means(model, [1], np.zeros(3, dtype=np.float32)),
    ):
        pass


def test_frontier_under_mean_ablation_scores_each_region_held_at_the_train_items_means(
    tmp_path, demo, capsys, demo_frontier_config
):
    """`benchprof frontier --ablation mean`: the records of the original model equal a zero-ablation run's, every
    region's equal its neurons held at the means of every train item scored by hand, and the report says so."""
    from benchprof.cli import main
    from benchprof.lab.frontier import score
    from benchprof.stages.data import read_jsonl

    abilities = ["Commonsense_Causal", "Long_Term_Knowledge"]
    config = demo_frontier_config  # 12 train and 30 test items per ability under tmp_path/data, outputs tmp_path/out
    common = ["--sizes", "4", "--draws", "3", "--options", "act_grad_contrast_abs", "--train_items", "12"]
    main(["frontier", str(config), *common, "--test_items", "10", "--folder", "zero"])
    main(["frontier", str(config), *common, "--test_items", "10", "--folder", "mean", "--ablation", "mean"])
    zero = read_records(tmp_path / "out" / "demo" / "zero" / "evaluations.jsonl")
    mean = read_records(tmp_path / "out" / "demo" / "mean" / "evaluations.jsonl")
    assert zero[0]["inputs"] == mean[0]["inputs"] and zero[0]["acc_norm"] == mean[0]["acc_norm"]  # the original
    assert {r["inputs"] for r in zero[1:]}.isdisjoint(r["inputs"] for r in mean[1:])  # another identity when ablated

    model, tok = demo
    train = [r for a in abilities for r in read_jsonl(tmp_path / "data" / a / "train.jsonl")[:12]]
    tests = {a: read_jsonl(tmp_path / "data" / a / "test.jsonl")[:10] for a in abilities}
    means = neuron_means(model, tok, train)
    differs = 0
    for record in mean[1:]:
        with held_at_means(model, record["neurons"], means):
            want = score(model, tok, tests)
        for ability, scores in want.items():  # the means summed in other batches: equal to float32's last bits
            np.testing.assert_allclose(record["loglik"][ability], scores["loglik"], atol=1e-4)
        twin = next(r for r in zero if r["neurons"] == record["neurons"])
        differs += twin["loglik"] != record["loglik"]
    assert differs == len(mean) - 1  # every region scores otherwise than zeroed
    assert "mean ablation" in (tmp_path / "out" / "demo" / "mean" / "frontier.md").read_text()
    capsys.readouterr()
    with pytest.raises(SystemExit):  # one folder, one ablation: its report says which
        main(["frontier", str(config), *common, "--test_items", "10", "--folder", "mean"])
    assert "measured with --ablation mean; give another --folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["frontier", str(config), *common, "--folder", "bad", "--ablation", "half"])
    assert "--ablation: 'half' is not one of zero, mean" in capsys.readouterr().err
    assert not (tmp_path / "out" / "demo" / "bad").exists()


def test_evaluate_under_mean_ablation_holds_the_regions_neurons_at_every_abilitys_train_means(tmp_path, demo):
    """`damage.ablation: mean` in the pipeline: the top region's evaluation (lm-eval through the hf backend) equals
    its neurons held by hand at the means of every ability's first max_samples train items; the zero ablation of the
    same mask scores otherwise and its results are another identity (status: stale under the other ablation)."""
    import yaml
    from test_evaluate import read_samples
    from test_neuron_extract import ABILITIES, K, neurons_of, project

    from benchprof.core.layout import Layout, Variant
    from benchprof.core.loader import load_config
    from benchprof.core.regions import read_region
    from benchprof.stages.choices import item_logliks
    from benchprof.stages.data import read_jsonl
    from benchprof.stages.evaluate import evaluate
    from benchprof.stages.extract import extract
    from benchprof.stages.status import plan_status

    config = project(tmp_path, "act_grad_contrast_abs", test_items=6, regions=("top", "random"))
    raw = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump({**raw, "damage": {"ablation": "mean"}}))
    cfg = load_config(config)
    extract(cfg, ability=ABILITIES[0])
    evaluate(cfg, ability=ABILITIES[0], region="top", benchmark=ABILITIES[0], original=False)
    layout, variant = Layout(tmp_path / "out", "demo"), Variant(ABILITIES[0], K, "top")
    got = [s["loglikelihoods"] for s in read_samples(layout.samples_file(variant, ABILITIES[0]))]

    model, tok = demo
    neurons = model_neurons(model)
    ids = sorted(neurons_of(read_region(layout.mask_file(*variant.parts()))[0], neurons.hidden, neurons.intermediate))
    train = [r for a in ABILITIES for r in read_jsonl(tmp_path / "data" / a / "train.jsonl")[:10]]
    test = read_jsonl(tmp_path / "data" / ABILITIES[0] / "test.jsonl")
    with held_at_means(model, ids, neuron_means(model, tok, train)):
        want = item_logliks(model, tok, test)
    np.testing.assert_allclose(np.array(got, dtype=float), np.array(want), atol=2e-4)

    config.write_text(yaml.safe_dump(raw))  # back to zero ablation: the mean results are not its results
    zero = load_config(config)
    eval_what = f"{ABILITIES[0]}/k{K}/top {ABILITIES[0]}"
    states = {(i.stage, i.what): i.state for i in plan_status(zero)}
    assert states[("eval", eval_what)] == "stale", states
    evaluate(zero, ability=ABILITIES[0], region="top", benchmark=ABILITIES[0], original=False)
    zeroed = [s["loglikelihoods"] for s in read_samples(layout.samples_file(variant, ABILITIES[0]))]
    with ablated(model, neuron_ids_region(neurons, ids)):
        np.testing.assert_allclose(np.array(zeroed, dtype=float), np.array(item_logliks(model, tok, test)), atol=2e-4)
    assert np.abs(np.array(zeroed, dtype=float) - np.array(got, dtype=float)).max() > 1e-3
    assert {(i.stage, i.what): i.state for i in plan_status(zero)}[("eval", eval_what)] == "done"


def test_the_ablation_comparison_is_each_abilitys_change_and_a_sign_flip_test_over_them(tmp_path):
    from benchprof.lab.ablation_compare import MEASURES, compare

    header = "option,size,ability," + ",".join(MEASURES)
    values = {  # (own, transfer, breadth) per ability, zero then mean
        "zero": {"A": (0.5, 0.4, 0.20), "B": (0.3, 0.2, 0.10), "C": (0.4, 0.1, 0.05)},
        "mean": {"A": (0.5, 0.3, 0.05), "B": (0.2, 0.2, 0.00), "C": (0.5, 0.2, 0.00)},
    }

    def plan(kind: str, **changed) -> dict:
        inputs = {"model": "m1", "train": {"A": "t1"}, "test": {"A": "e1"}, **changed.pop("inputs", {})}
        return {
            "model": "m", "data_dir": "d", "abilities": ["A", "B", "C"], "contrast": ["A", "B", "C"],
            "options": ["opt", "other"] if kind == "zero" else ["opt"], "sizes": [256], "draws": 3, "seed": 0,
            "train_items": 10, "train_from": 0, "test_items": 10, "transfer_items": 0, "dtype": "float32",
            **({} if kind == "zero" else {"ablation": kind}), "inputs": inputs, **changed,
        }  # fmt: skip

    for kind, rows in values.items():
        (tmp_path / kind).mkdir()
        lines = [header, "other,256,A,9,9,9"] + [f"opt,256,{a}," + ",".join(map(str, v)) for a, v in rows.items()]
        (tmp_path / kind / "frontier.csv").write_text("\n".join(lines) + "\n")
        (tmp_path / kind / "plan.json").write_text(json.dumps(plan(kind)))
    table = compare(tmp_path / "zero", tmp_path / "mean", "opt", 256)
    assert "identities differ" not in table
    assert "| A | +0.500 / +0.500 / +0.000 | +0.400 / +0.300 / -0.100 | +0.200 / +0.050 / -0.150 |" in table
    # breadth falls for all three: p = 2 of the 8 sign patterns reach |sum|; own: changes 0, -0.1, +0.1 -> p = 1
    assert "| mean of 3 | +0.400 / +0.400 / +0.000 (p = 1.000) |" in table
    assert "+0.117 / +0.017 / -0.100 (p = 0.250) |" in table
    with pytest.raises(BenchprofError, match="differ in .*no opt at 128"):
        compare(tmp_path / "zero", tmp_path / "mean", "opt", 128)
    with pytest.raises(BenchprofError, match="measured with --ablation mean and zero, not zero and mean"):
        compare(tmp_path / "mean", tmp_path / "zero", "opt", 256)  # swapped
    (tmp_path / "mean" / "plan.json").write_text(json.dumps(plan("mean", inputs={"test": {"A": "e2"}}, draws=5)))
    with pytest.raises(BenchprofError, match="not one plan; they differ in draws, test items"):
        compare(tmp_path / "zero", tmp_path / "mean", "opt", 256)
    (tmp_path / "mean" / "plan.json").write_text(json.dumps(plan("mean", inputs={"model": "m2"})))
    assert "identities differ (m1, m2)" in compare(tmp_path / "zero", tmp_path / "mean", "opt", 256)


def mean_config(tmp_path: Path, **sections) -> dict:
    return {
        "settings": {"output_dir": str(tmp_path / "out"), "k_values": [0.004]},
        "models": [{"name": str(DEMO), "tag": "demo"}],
        "datasets": [{"name": "Long_Term_Knowledge"}, {"name": "Commonsense_Causal"}],
        "evals": {"benchmarks": ["Long_Term_Knowledge"]},
        "extract": {"score": "act_grad_contrast_abs"},
        "damage": {"ablation": "mean"},
        **sections,
    }


@pytest.mark.parametrize(
    "sections, match",
    [
        (
            {"extract": {"score": "importance"}},
            r"^damage\.ablation: mean holds whole neurons at their mean; .* ranks weights",
        ),
        (
            {"evals": {"benchmarks": ["Long_Term_Knowledge"], "backend": "vllm"}},
            r"^damage\.ablation: .*use evals\.backend hf",
        ),
        ({"damage": {"ablation": "half"}}, r"^damage\.ablation: 'half' is not one of zero, mean"),
    ],
)
def test_settings_mean_ablation_cannot_serve_are_one_line(tmp_path, sections, match):
    from benchprof.core.loader import parse_config
    from benchprof.core.schema import ConfigError

    with pytest.raises(ConfigError, match=match):
        parse_config(mean_config(tmp_path, **sections), tmp_path / "config.yml")


def test_what_mean_ablation_cannot_hold_is_refused_before_any_work(tmp_path, demo):
    from benchprof.core.loader import parse_config
    from benchprof.stages.damage import damage
    from benchprof.stages.mean_ablation import region_neuron_ids
    from benchprof.stages.neurons import mlp_name

    cfg = parse_config(mean_config(tmp_path), tmp_path / "config.yml")
    with pytest.raises(BenchprofError, match="^--save: damage.ablation mean holds neurons with hooks"):
        damage(cfg, save=True)
    assert not (tmp_path / "out").exists()
    model, _ = demo
    neurons = model_neurons(model)
    assert region_neuron_ids(model, neuron_ids_region(neurons, [3, neurons.intermediate + 5])) == [
        3,
        neurons.intermediate + 5,
    ]
    weights = {mlp_name(0, "down_proj"): torch.tensor([0, 1, 2])}  # three weights of a weight score's region
    with pytest.raises(BenchprofError, match="this region is not whole neurons"):
        region_neuron_ids(model, weights)


def test_zero_ablation_keys_are_as_before_and_mean_keys_differ_only_for_a_region():
    """The frontier's keys under zero ablation are the dict they always hashed (so committed results stay reused);
    under mean the original model's key is the same and every region's another."""
    from dataclasses import replace

    from benchprof.core.storage import value_hash
    from benchprof.lab.frontier_plan import FrontierInputs
    from benchprof.stages.choices import SCORER

    tests = {"A": [{"question": "q", "options": ["a", "b"], "label": 0}]}
    zero = FrontierInputs({"files": {"w": "1"}}, {"A": tests["A"]}, tests)
    before = {"model": {"files": {"w": "1"}}, "tests": tests, "neurons": [1, 2], "scorer": SCORER, "dtype": "float32"}
    assert zero.evaluation_key([2, 1]) == value_hash(before)
    split = {"model": {"files": {"w": "1"}}, "split": "A", "items": tests["A"], "neurons": [1, 2], "scorer": SCORER}
    assert zero.split_key("A", [2, 1]) == value_hash({**split, "dtype": "float32"})
    mean = replace(zero, ablation="mean")
    assert mean.evaluation_key([]) == zero.evaluation_key([]) and mean.split_key("A", []) == zero.split_key("A", [])
    assert mean.evaluation_key([1, 2]) != zero.evaluation_key([1, 2])
    assert mean.split_key("A", [1, 2]) != zero.split_key("A", [1, 2])


def test_output_shift_is_what_down_proj_writes_less_with_the_neurons_zeroed_or_held(demo):
    """output_shift against down_proj itself applied to each token's activations as they are, with the neurons set to
    zero and to their means: the per-token norm of the difference, summed over layers, averaged over tokens."""
    from benchprof.lab.ablation_compare import output_shift

    model, tok = demo
    neurons = model_neurons(model)
    records = generate("Temporal_Reasoning", 4, 1, seed=5)[0]  # unequal lengths: padded tokens must not count
    rng = np.random.default_rng(1)
    means = rng.normal(0, 0.3, neurons.count).astype(np.float32)
    ids = sorted(int(i) for i in rng.choice(neurons.count, 12, replace=False))
    got = output_shift(model, tok, records, ids, means, batch_items=3)
    totals, tokens = {"zero": 0.0, "mean": 0.0}, 0
    for record in records:  # one item at a time: no padding at all
        ids_ = tok(eval_prompt(record), add_special_tokens=False)["input_ids"]
        ids_ += tok(" " + record["options"][record["label"]], add_special_tokens=False)["input_ids"]
        seen: list[tuple[int, torch.Tensor]] = []
        hooks = [
            m.down_proj.register_forward_pre_hook(lambda _m, a, i=i, seen=seen: seen.append((i, a[0][0].clone())))
            for i, m in enumerate(neurons.mlps)
        ]
        with torch.no_grad():
            model(input_ids=torch.tensor([ids_]))
        for hook in hooks:
            hook.remove()
        per_token = {"zero": torch.zeros(len(ids_)), "mean": torch.zeros(len(ids_))}
        with torch.no_grad():
            for layer, h in seen:
                js = [i % neurons.intermediate for i in ids if i // neurons.intermediate == layer]
                if not js:
                    continue
                down = neurons.mlps[layer].down_proj
                for kind, value in (
                    ("zero", torch.zeros(len(js))),
                    ("mean", torch.from_numpy(means[[layer * neurons.intermediate + j for j in js]])),
                ):
                    changed = h.clone()
                    changed[:, js] = value
                    per_token[kind] += torch.linalg.vector_norm(down(h) - down(changed), dim=-1)
        for kind in totals:
            totals[kind] += float(per_token[kind].sum())
        tokens += len(ids_)
    assert got == pytest.approx({kind: total / tokens for kind, total in totals.items()}, rel=1e-4)
    assert got["mean"] != pytest.approx(got["zero"], rel=1e-3)
