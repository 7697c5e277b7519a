"""lab/frontier.py and lab/frontier_report.py: the neuron attribution against an independent autograd path, zeroing
against the region format, the scores against their formulas, and the command end to end on the demo model (its
numbers against a hand computation from its own records, and a rerun that redoes nothing)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from benchprof import BenchprofError
from benchprof.abilities import generate
from benchprof.core.config import NEURON_SCORES
from benchprof.core.storage import read_csv, read_records
from benchprof.lab.frontier_report import one_sided
from benchprof.stages.choices import mc_rows, option_logliks
from benchprof.stages.damage import ablated
from benchprof.stages.neurons import (
    FRONTIER_SCORES,
    GENERAL,
    GENERAL_TEXTS,
    GENERAL_TOKENS,
    ITERATIVE,
    ITERATIVE_ROUNDS,
    general_text,
    iterative_contrast,
    model_neurons,
    neuron_attribution,
    neuron_ids_region,
    neuron_scores,
    random_neurons,
    text_attribution,
    top_neurons,
)
from benchprof.stats.control import ControlComparison

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "benchprof" / "assets" / "demo-model"


@pytest.fixture(scope="module")
def demo() -> tuple[torch.nn.Module, object]:
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(DEMO, dtype=torch.float32).eval(), AutoTokenizer.from_pretrained(DEMO)


def objective_through_scales(model, tok, record) -> torch.Tensor:
    """d log P(correct)/d s for s a per-neuron scale on every MLP activation, at s = 1: an independent path to
    Σ_positions h · ∂/∂h (the chain rule through a multiplication by s)."""
    neurons = model_neurons(model)
    scales = [torch.ones(neurons.intermediate, requires_grad=True) for _ in neurons.mlps]
    hooks = [
        m.down_proj.register_forward_pre_hook(lambda _m, args, s=s: (args[0] * s,))
        for m, s in zip(neurons.mlps, scales, strict=True)
    ]
    try:
        rows = mc_rows(tok, [record])
        loglik = option_logliks(model, rows)
        # the objective's normaliser (ATTRIBUTION_OBJECTIVE v1): the characters of " option", delimiter counted
        chars = torch.tensor([len(" " + option) for option in record["options"]], dtype=loglik.dtype)
        objective = torch.log_softmax(loglik / chars, 0)[record["label"]]
        grads = torch.autograd.grad(objective, scales)
    finally:
        for h in hooks:
            h.remove()
    return torch.cat(grads)


def test_packed_option_logliks_equal_one_plain_forward_per_option(demo):
    """option_logliks packs an item's options as branches of its context: each option's summed log-likelihood
    equals a plain forward pass over context + option alone (the sum of log_softmax at its positions)."""
    model, tok = demo
    records = generate("Long_Term_Knowledge", 0, 5, seed=3)[1]
    rows = mc_rows(tok, records)
    with torch.no_grad():
        got = option_logliks(model, rows)
        want = []
        for _, _, c, o, _ in rows:
            logp = torch.log_softmax(model(input_ids=torch.tensor([c + o])).logits[0].float(), -1)
            want.append(sum(float(logp[len(c) - 1 + i, t]) for i, t in enumerate(o)))
    assert len({len(o) for *_, o, _ in rows}) > 1  # options of different lengths: the branches differ
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4)


def test_attribution_equals_the_gradient_of_a_neuron_scale(demo):
    model, tok = demo
    records = generate("Commonsense_Causal", 3, 0, seed=5)[0]
    got = neuron_attribution(model, tok, records, batch_items=2)  # two batches: item rows must not mix
    assert got.shape == (3, model_neurons(model).count)
    for i, record in enumerate(records):
        want = objective_through_scales(model, tok, record).numpy()
        np.testing.assert_allclose(got[i], want, rtol=1e-3, atol=1e-6)
    assert all(p.requires_grad for p in model.parameters())  # the weights' flags are given back


def test_text_attribution_equals_the_gradient_of_a_neuron_scale(demo):
    """G(text, neuron) against d (mean log P(next token)) / d s for a per-neuron scale s on every MLP activation at
    s = 1, each text alone: the same independent path as the answers' attribution, on general text."""
    model, tok = demo
    texts = general_text(model, tok, seed=2)[:3]
    got = text_attribution(model, texts, batch_items=2)  # two batches: texts must not mix
    neurons = model_neurons(model)
    for i, ids in enumerate(texts):
        scales = [torch.ones(neurons.intermediate, requires_grad=True) for _ in neurons.mlps]
        hooks = [
            m.down_proj.register_forward_pre_hook(lambda _m, args, s=s: (args[0] * s,))
            for m, s in zip(neurons.mlps, scales, strict=True)
        ]
        try:
            logits = model(input_ids=torch.tensor([ids])).logits[0].float()
            objective = sum(torch.log_softmax(logits[t], -1)[ids[t + 1]] for t in range(len(ids) - 1)) / (len(ids) - 1)
            want = torch.cat(torch.autograd.grad(objective, scales)).numpy()
        finally:
            for h in hooks:
                h.remove()
        np.testing.assert_allclose(got[i], want, rtol=1e-3, atol=1e-6)
    assert all(p.requires_grad for p in model.parameters())


def test_general_text_is_sampled_text_of_one_length_reproducible_from_its_seed(demo):
    model, tok = demo
    torch.manual_seed(11)
    before = torch.random.get_rng_state()
    texts = general_text(model, tok, seed=1)
    assert torch.equal(torch.random.get_rng_state(), before)  # the caller's random stream is left as it was
    assert len(texts) == GENERAL_TEXTS and {len(t) for t in texts} == {GENERAL_TOKENS}
    assert {t[0] for t in texts} == {tok.bos_token_id} and len({tuple(t) for t in texts}) == GENERAL_TEXTS
    assert general_text(model, tok, seed=1) == texts and general_text(model, tok, seed=2) != texts
    assert len(general_text(model, tok, seed=1, n=5)) == 5  # as many texts as the abilities' items


def test_a_neuron_region_zeroes_exactly_those_rows_and_columns_and_restores_them(demo):
    """neuron_ids_region through damage.ablated: inside, the gate and up rows and the down column of each neuron
    are 0 (read on the modules themselves) and no other weight moved; after, every weight is back bit for bit."""
    model, _ = demo
    neurons = model_neurons(model)
    ids = [3, neurons.intermediate + 7, 3 * neurons.intermediate - 1]
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    region = neuron_ids_region(neurons, ids)
    assert sum(int(v.numel()) for v in region.values()) == neurons.weights(len(ids))
    expected = {id(p): torch.zeros_like(p, dtype=torch.bool) for p in model.parameters()}  # by hand, per module
    for i in ids:
        mlp, j = neurons.mlps[i // neurons.intermediate], i % neurons.intermediate
        expected[id(mlp.gate_proj.weight)][j] = True
        expected[id(mlp.up_proj.weight)][j] = True
        expected[id(mlp.down_proj.weight)][:, j] = True
    with ablated(model, region):
        for name, p in model.named_parameters():
            mask = expected[id(p)]
            assert torch.all(p[mask] == 0), name
            assert torch.equal(p[~mask], before[name][~mask]), name  # no other weight moved
    for name, p in model.named_parameters():
        assert torch.equal(p, before[name]), name


def test_activity_is_the_mean_squared_neuron_output_over_prompt_and_answer():
    """neuron_activity (batched, padded, hooked at down_proj) against each item run alone, its neurons recomputed
    from the MLP's input as act(gate x) * up x."""
    from benchprof.core.prompts import eval_prompt
    from benchprof.stages.neurons import neuron_activity

    model = AutoModelForCausalLM.from_pretrained(DEMO, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(DEMO)
    records = generate("Temporal_Reasoning", 7, 1, seed=5)[0]  # prompts of unequal length: padding is exercised
    got = neuron_activity(model, tok, records, batch_items=3)
    neurons = model_neurons(model)
    inputs: list[torch.Tensor] = []
    hooks = [m.register_forward_pre_hook(lambda _m, args: inputs.append(args[0])) for m in neurons.mlps]
    try:
        for i, record in enumerate(records):
            ids = tok(eval_prompt(record), add_special_tokens=False)["input_ids"]
            ids += tok(" " + record["options"][record["label"]], add_special_tokens=False)["input_ids"]
            inputs.clear()
            with torch.no_grad():
                model(input_ids=torch.tensor([ids]))
                want = torch.cat(
                    [
                        (m.act_fn(m.gate_proj(x[0])) * m.up_proj(x[0])).pow(2).mean(0)
                        for m, x in zip(neurons.mlps, inputs, strict=True)
                    ]
                )
            np.testing.assert_allclose(got[i], want.numpy(), rtol=1e-4, atol=1e-7)
    finally:
        for hook in hooks:
            hook.remove()
    assert len({len(tok(eval_prompt(r))["input_ids"]) for r in records}) > 1


def test_scores_follow_their_formulas():
    rng = np.random.default_rng(0)
    attribution = {a: rng.normal(size=(6, 10)).astype(np.float32) for a in ("A", "B", "C")}

    def t(v):
        return v.mean(0) / (v.std(0, ddof=1) / math.sqrt(len(v)))

    np.testing.assert_allclose(neuron_scores(attribution, "A", "act_grad"), attribution["A"].mean(0), rtol=1e-6)
    np.testing.assert_allclose(neuron_scores(attribution, "A", "act_grad_t"), t(attribution["A"].astype(float)))
    want = t(attribution["B"].astype(float)) - np.maximum(
        t(attribution["A"].astype(float)), t(attribution["C"].astype(float))
    )
    np.testing.assert_allclose(neuron_scores(attribution, "B", "act_grad_contrast"), want)
    want_contrast = want
    leaned_against = t(attribution["B"].astype(float)) - np.maximum(
        np.abs(t(attribution["A"].astype(float))), np.abs(t(attribution["C"].astype(float)))
    )
    np.testing.assert_allclose(neuron_scores(attribution, "B", "act_grad_contrast_abs"), leaned_against)
    assert np.all(leaned_against <= want + 1e-12)  # a neuron the others lean against never ranks higher
    activity = {a: rng.exponential(size=(6, 10)).astype(np.float32) for a in ("A", "B", "C")}
    others = np.maximum(activity["A"].astype(float).mean(0), activity["C"].astype(float).mean(0))
    want = np.log(activity["B"].astype(float).mean(0) + 1e-12) - np.log(others + 1e-12)
    np.testing.assert_allclose(neuron_scores(activity, "B", "act_contrast"), want, rtol=1e-9)
    with pytest.raises(BenchprofError, match="act_contrast needs at least two abilities"):
        neuron_scores({"A": activity["A"], GENERAL: activity["C"]}, "A", "act_contrast")  # general text is no ability
    # against general text: the contrast scores ignore it, the general scores read it alone
    general = {**attribution, GENERAL: rng.normal(size=(9, 10)).astype(np.float32)}
    np.testing.assert_allclose(neuron_scores(general, "B", "act_grad_contrast"), want_contrast)
    want = t(attribution["B"].astype(float)) - t(general[GENERAL].astype(float))
    np.testing.assert_allclose(neuron_scores(general, "B", "act_grad_general"), want)
    activity[GENERAL] = rng.exponential(size=(9, 10)).astype(np.float32)
    want = np.log(activity["B"].astype(float).mean(0) + 1e-12) - np.log(activity[GENERAL].astype(float).mean(0) + 1e-12)
    np.testing.assert_allclose(neuron_scores(activity, "B", "act_general"), want, rtol=1e-9)
    with pytest.raises(BenchprofError, match="act_grad_general needs the statistic of general text"):
        neuron_scores(attribution, "A", "act_grad_general")
    scores = np.array([0.5, 2.0, 2.0, -1.0, 3.0])
    assert top_neurons(scores, 3) == [1, 2, 4]  # brute force: 3.0, then the tie 2.0 / 2.0
    draw = random_neurons(1000, 50, seed=4)
    assert len(set(draw)) == 50 and draw == random_neurons(1000, 50, seed=4) and draw != random_neurons(1000, 50, 5)
    with pytest.raises(BenchprofError, match="unknown neuron score"):
        neuron_scores(attribution, "A", "magic")
    from benchprof.stages.neurons import SCORES

    assert set(NEURON_SCORES) <= set(SCORES)  # every extract.score of whole neurons has its statistic and contrast


def test_a_unions_top_is_the_union_of_its_parts_tops():
    """act_union's top n against a brute force: the union of act_contrast's and act_grad_contrast_abs's top m grows
    with m; the region holds every neuron of the last union below n in size and only neurons of the first that
    reaches n, the last rank's neurons by lower id. On 200 neurons, for every n, with ties of rank between the
    parts."""
    from benchprof.stages.neurons import option_scores, ranked_neurons

    rng = np.random.default_rng(1)
    statistics = {
        "attribution": {a: rng.normal(size=(8, 200)).astype(np.float32) for a in ("A", "B", "C")},
        "activity": {a: rng.exponential(size=(8, 200)).astype(np.float32) for a in ("A", "B", "C")},
    }
    first = ranked_neurons(neuron_scores(statistics["activity"], "B", "act_contrast"), 200)
    second = ranked_neurons(neuron_scores(statistics["attribution"], "B", "act_grad_contrast_abs"), 200)
    assert len(set(first[:20]) & set(second[:20])) < 20  # the parts disagree: the union is more than either
    scores = option_scores(statistics, "B", "act_union")
    for n in range(1, 201):
        got = set(top_neurons(scores, n))
        unions = [set(first[:m]) | set(second[:m]) for m in range(201)]
        m = next(m for m, u in enumerate(unions) if len(u) >= n)
        last = sorted(unions[m] - unions[m - 1])  # the rank both parts' neurons share: the lower ids first
        assert got == unions[m - 1] | set(last[: n - len(unions[m - 1])]), n
    assert set(top_neurons(scores, 40)) != set(first[:40]) and set(top_neurons(scores, 40)) != set(second[:40])
    # a single score through option_scores is the score itself
    np.testing.assert_array_equal(
        option_scores(statistics, "B", "act_contrast"), neuron_scores(statistics["activity"], "B", "act_contrast")
    )
    assert "act_union" in FRONTIER_SCORES and "act_union" not in NEURON_SCORES  # a frontier option, no extract.score
    with pytest.raises(BenchprofError, match="'act_union' joins two scores"):
        neuron_scores(statistics["activity"], "B", "act_union")  # its parts are ranked apart: option_scores


def test_one_sided_p_from_a_two_sided_comparison():
    above = ControlComparison(0.2, 0.1, 0.3, 0.04, 5, 0.05)
    below = ControlComparison(-0.2, -0.3, -0.1, 0.04, 5, 0.05)
    assert one_sided(above) == pytest.approx(0.02) and one_sided(below) == pytest.approx(0.98)
    assert math.isnan(one_sided(None))


@pytest.mark.slow
def test_frontier_command_on_the_demo_model(tmp_path):
    from benchprof.cli import main
    from benchprof.stats.impact import impact_score

    abilities = ["Commonsense_Causal", "Long_Term_Knowledge"]
    config = tmp_path / "demo.yml"
    config.write_text(
        json.dumps({
            "settings": {"output_dir": str(tmp_path / "out"), "seed": 3},
            "models": [{"name": str(DEMO), "tag": "demo"}],
            "datasets": [{"name": a} for a in abilities],
            "data": {"dir": str(tmp_path / "data"), "train_size": 12, "test_size": 20},
        })
    )  # fmt: skip
    main(["data", str(config)])
    args = ["frontier", str(config), "--sizes", "2,16", "--train_items", "12", "--test_items", "20"]
    main(args)
    folder = tmp_path / "out" / "demo" / "frontier"
    records = read_records(folder / "evaluations.jsonl")
    assert len(records) == 1 + len(NEURON_SCORES) * 2 * 2 + 2 * 3  # original, options x abilities x sizes, draws
    rows = read_csv(folder / "frontier.csv")
    original = next(r["acc_norm"] for r in records if r["option"] == "original")
    row = next(r for r in rows if r["option"] == "act_grad" and r["size"] == "16" and r["ability"] == abilities[0])
    ablated = next(r for r in records if (r["option"], r["region"], r["size"]) == ("act_grad", abilities[0], 16))
    own = impact_score(np.mean(original[abilities[0]]), np.mean(ablated["acc_norm"][abilities[0]]))
    other = impact_score(np.mean(original[abilities[1]]), np.mean(ablated["acc_norm"][abilities[1]]))
    assert float(row["own_ais"]) == pytest.approx(own, abs=1e-6)
    assert float(row["other_ais"]) == pytest.approx(other, abs=1e-6)
    assert float(row["specificity"]) == pytest.approx(own - other, abs=1e-6)
    draws = [r for r in records if r["option"] == "random" and r["size"] == 16]
    random_own = np.mean(
        [impact_score(np.mean(original[abilities[0]]), np.mean(d["acc_norm"][abilities[0]])) for d in draws]
    )
    assert float(row["random_ais"]) == pytest.approx(random_own, abs=1e-6)
    assert (folder / "frontier.png").stat().st_size > 0 and "| act_grad_contrast |" in (
        folder / "frontier.md"
    ).read_text()
    before = (folder / "evaluations.jsonl").read_bytes()
    main(args)  # the rerun scores nothing and writes the same table
    assert (folder / "evaluations.jsonl").read_bytes() == before
    assert read_csv(folder / "frontier.csv") == rows
    # another size grows the plan: its regions are added, the measured ones kept byte for byte
    main(["frontier", str(config), "--options", "act_contrast,act_grad_general", "--sizes", "4", *args[-4:]])
    grown = (folder / "evaluations.jsonl").read_bytes()
    # size 4 for every option and draw, and the new option at all three sizes
    assert grown.startswith(before) and len(grown.splitlines()) == len(records) + len(NEURON_SCORES) * 2 + 3 + 3 * 2
    texts = json.loads((folder / "general" / "texts.json").read_text())
    assert len(texts) == 12 and (folder / "attribution" / GENERAL / "values.npy").is_file()  # as many as train items
    assert json.loads((folder / "plan.json").read_text())["sizes"] == [2, 4, 16]
    # the iterative selection: chosen once per (ability, size) and kept beside the evaluations with its inputs
    iterative = [*args, "--options", ITERATIVE]
    main(iterative)
    lines = (folder / "evaluations.jsonl").read_bytes().splitlines()
    scored = {tuple(r["neurons"]) for r in read_records(folder / "evaluations.jsonl")}
    added = {tuple(r["neurons"]) for r in read_records(folder / "evaluations.jsonl")[len(grown.splitlines()) :]}
    assert {r["option"] for r in read_records(folder / "evaluations.jsonl")[len(grown.splitlines()) :]} == {ITERATIVE}
    for ability in abilities:
        for size in (2, 4, 16):
            kept = json.loads((folder / ITERATIVE / f"{ability}-{size}.json").read_text())
            assert kept["rounds"] == ITERATIVE_ROUNDS and len(set(kept["neurons"])) == size
            # scored once: a region another option chose already (the same neurons) is not scored again
            assert tuple(sorted(kept["neurons"])) in scored
            contrast = next(
                x for x in records if (x["option"], x["region"], x["size"]) == ("act_grad_contrast", ability, 16)
            )
            first = kept["neurons"][: max(1, size // ITERATIVE_ROUNDS)]  # size 2: chunks of 0, 1, 0, 1
            assert set(first) <= set(contrast["neurons"])  # its first round's top
    assert len(added) == len(lines) - len(grown.splitlines())  # no region scored twice
    rows = read_csv(folder / "frontier.csv")
    assert sum(r["option"] == ITERATIVE for r in rows) == 2 * 3
    main(iterative)
    assert len((folder / "evaluations.jsonl").read_bytes().splitlines()) == len(lines)
    # a selection kept by a run killed before its region was scored is scored as kept, not chosen again (here one
    # changed by hand under the same inputs); one whose inputs are another plan's is chosen again
    selection = folder / ITERATIVE / f"{abilities[1]}-4.json"
    kept = json.loads(selection.read_text())
    selection.write_text(json.dumps({**kept, "neurons": [7, 3, 11, 5]}))
    main(iterative)
    last = read_records(folder / "evaluations.jsonl")[-1]
    assert (last["option"], last["region"], last["neurons"]) == (ITERATIVE, abilities[1], [3, 5, 7, 11])
    assert len((folder / "evaluations.jsonl").read_bytes().splitlines()) == len(lines) + 1
    selection.write_text(json.dumps({**kept, "inputs": {**kept["inputs"], "rounds": ITERATIVE_ROUNDS + 1}}))
    main(iterative)
    assert json.loads(selection.read_text()) == kept  # chosen again from the same inputs: the same neurons
    with pytest.raises(SystemExit):
        main([*args[:2], "--ability", "Commonsense_Causal"])  # one ability has no "other" split


def test_iterative_contrast_rescores_with_the_chosen_neurons_zeroed(demo):
    """act_grad_contrast_iter: its first chunk is act_grad_contrast's top; each later chunk is the top of the
    contrast recomputed with the neurons chosen before it zeroed by hand (a copy of the model, their gate and up
    rows and down column set to 0), the others' t unchanged; the model is left as it was."""
    import copy

    model, tok = demo
    abilities = ["Commonsense_Causal", "Long_Term_Knowledge", "Spatial_Reasoning"]
    records = {a: generate(a, 6, 0, 5)[0] for a in abilities}
    values = {a: neuron_attribution(model, tok, r) for a, r in records.items()}
    own, size = abilities[0], 12
    chosen, last = iterative_contrast(model, tok, values, own, records[own], size)
    chunk = size // ITERATIVE_ROUNDS
    assert len(set(chosen)) == size and np.isneginf(last[chosen]).all()
    assert sorted(chosen[:chunk]) == top_neurons(neuron_scores(values, own, "act_grad_contrast"), chunk)
    neurons, by_hand = model_neurons(model), copy.deepcopy(model)
    for r in range(1, ITERATIVE_ROUNDS):
        with torch.no_grad():
            for i in chosen[(r - 1) * chunk : r * chunk]:
                mlp, j = by_hand.model.layers[i // neurons.intermediate].mlp, i % neurons.intermediate
                mlp.gate_proj.weight[j] = 0.0
                mlp.up_proj.weight[j] = 0.0
                mlp.down_proj.weight[:, j] = 0.0
        again = neuron_attribution(by_hand, tok, records[own])
        scores = neuron_scores({**values, own: again}, own, "act_grad_contrast")
        scores[chosen[: r * chunk]] = -np.inf
        assert sorted(chosen[r * chunk : (r + 1) * chunk]) == top_neurons(scores, chunk), r
    assert np.array_equal(neuron_attribution(model, tok, records[own]), values[own])


def test_recovery_over_builds_is_a_t_interval_of_the_builds_ability_means():
    from scipy import stats

    from benchprof.lab.frontier_planted import recovery_over_builds

    builds = [
        [
            {"option": "o", "ability": "A", "auroc": a, "top_neuron_precision": p},
            {"option": "o", "ability": "B", "auroc": b, "top_neuron_precision": q},
        ]
        for a, b, p, q in ((0.9, 0.7, 0.5, 0.3), (0.8, 0.8, 0.2, 0.4), (1.0, 0.6, 0.6, 0.0))
    ]
    (auroc, _low, high), precision = recovery_over_builds(builds)["o"]
    means = np.array([0.8, 0.8, 0.8])  # each build's mean over A and B
    assert auroc == pytest.approx(means.mean()) and high == pytest.approx(means.mean())  # no spread: no width
    p_means = np.array([0.4, 0.3, 0.3])
    half = stats.t.ppf(0.975, 2) * p_means.std(ddof=1) / math.sqrt(3)
    assert precision == pytest.approx((p_means.mean(), p_means.mean() - half, p_means.mean() + half))
    # near 1 the t interval runs past it: shown clipped, the mean untouched
    near_one = [[{"option": "o", "ability": "A", "auroc": a, "top_neuron_precision": 0.5}] for a in (0.98, 1.0, 0.99)]
    mean, low, high = recovery_over_builds(near_one)["o"][0]
    assert mean == pytest.approx(0.99) and high == 1.0 and low < 0.99


@pytest.mark.slow
def test_planted_recovery_on_the_small_planted_model(tmp_path):
    """The small planted model (demo model + two invented abilities in 72 neurons each): one row per option and
    ability, its AUROC equal to the Mann-Whitney statistic of the same scores computed apart."""
    from scipy import stats

    from benchprof.abilities.invented import invented_splits
    from benchprof.lab.frontier_planted import planted_recovery
    from benchprof.lab.plant_command import apply

    folder = tmp_path / "planted"
    apply(base=str(DEMO), out=str(folder), patch=str(ROOT / "benchprof" / "assets" / "demo-plant"))
    rows = planted_recovery(folder, items=12)
    assert [(r["option"], r["ability"]) for r in rows][:2] == [
        ("act_grad", "Invented_Facts"),
        ("act_grad", "Invented_Language"),
    ]
    assert len(rows) == 2 * len(FRONTIER_SCORES) and all(r["chance"] == pytest.approx(72 / 2752) for r in rows)
    # the activation contrast finds the planted neurons (docs/research/frontier.md), the attribution scores do not
    found = {r["ability"]: r for r in rows if r["option"] == "act_contrast"}
    print({a: (round(r["auroc"], 3), round(r["top_neuron_precision"], 3)) for a, r in found.items()})
    assert all(r["auroc"] > 0.9 for r in found.values())
    info = json.loads((folder / "planted.json").read_text())
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(folder)
    records = invented_splits("Invented_Facts", info["settings"]["data_seed"])["probe"][:12]
    scores = neuron_attribution(model, tok, records).astype(float).mean(0)
    truth = np.zeros(scores.size, dtype=bool)
    for layer, js in info["neurons"]["Invented_Facts"].items():
        truth[[int(layer) * 688 + j for j in js]] = True
    u = stats.mannwhitneyu(scores[truth], scores[~truth]).statistic / (truth.sum() * (~truth).sum())
    assert rows[0]["auroc"] == pytest.approx(u, abs=1e-6)


def test_an_options_stars_and_goal_do_not_move_when_another_option_or_size_is_measured(tmp_path):
    """The frontier's family is one (option, size): the rows of act_grad at 16 neurons are the same, q-values and
    goal included, whether act_grad alone was measured, or act_contrast beside it, or another size too. Under one
    family over every row (before), adding an option moved BH's stars elsewhere."""
    from benchprof.lab.frontier_plan import FrontierPlan
    from benchprof.lab.frontier_report import rows_of

    rng = np.random.default_rng(5)
    abilities = ("A", "B", "C")
    original = {a: [float(x) for x in rng.random(80) < 0.7] for a in abilities}

    def ablated(own: str | None, damage: float) -> dict[str, list[float]]:
        return {
            a: [0.0 if x and rng.random() < (damage + (0.5 if a == own else 0.0)) else x for x in original[a]]
            for a in abilities
        }

    records = [{"option": "original", "region": "-", "size": 0, "acc_norm": original}]
    for option, size in (("act_grad", 16), ("act_contrast", 16), ("act_grad", 32)):
        records += [{"option": option, "region": a, "size": size, "acc_norm": ablated(a, 0.05)} for a in abilities]
    for size in (16, 32):
        records += [
            {"option": "random", "region": f"draw{d}", "size": size, "acc_norm": ablated(None, 0.05)} for d in range(4)
        ]

    def rows(options: tuple[str, ...], sizes: tuple[int, ...]) -> list[dict]:
        plan = FrontierPlan("m", tmp_path, abilities, tmp_path, options=options, sizes=sizes, draws=4)
        chosen = [r for r in rows_of(plan, records, 100, 10**6) if (r["option"], r["size"]) == ("act_grad", 16)]
        return [{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()} for r in chosen]

    alone = rows(("act_grad",), (16,))
    assert any(r["own_vs_random_q"] < 0.05 for r in alone)  # there are stars to move
    assert {r["goal"] for r in alone} != {"none"}
    assert rows(("act_grad", "act_contrast"), (16,)) == alone
    assert rows(("act_contrast", "act_grad"), (16, 32)) == alone


def test_the_goal_count_over_item_resamples_is_as_stable_as_the_effects_are(tmp_path):
    """goal_counts: one count per item resample; a region that removes its own split (half its right items) and
    spares the others keeps its ability at the goal in (nearly) every resample, one that does nothing never."""
    from benchprof.lab.frontier_plan import FrontierPlan
    from benchprof.lab.frontier_report import goal_counts, goal_spread

    rng = np.random.default_rng(8)
    abilities = ("A", "B", "C")
    original = {a: [float(x) for x in rng.random(150) < 0.8] for a in abilities}

    def ablated(own: str | None) -> dict[str, list[float]]:
        return {
            a: [0.0 if x and rng.random() < (0.02 + (0.6 if a == own else 0.0)) else x for x in original[a]]
            for a in abilities
        }

    records = [{"option": "original", "region": "-", "size": 0, "acc_norm": original}]
    records += [
        {"option": "act_grad", "region": a, "size": 8, "acc_norm": ablated(a if a != "C" else None)} for a in abilities
    ]
    records += [{"option": "random", "region": f"draw{d}", "size": 8, "acc_norm": ablated(None)} for d in range(5)]
    plan = FrontierPlan("m", tmp_path, abilities, tmp_path, options=("act_grad",), sizes=(8,), draws=5)
    counts = goal_counts(plan, records, 100, 10**6, resamples=20)[("act_grad", 8)]
    assert len(counts) == 20 and all(0 <= n <= 3 for n in counts)
    assert sum(n == 2 for n in counts) >= 18  # A and B at the goal, C (no effect) never
    assert goal_spread([2, 2, 3, 1]) == "1 (25%), 2 (50%), 3 (25%)"


@pytest.mark.slow
def test_planted_effects_on_the_small_plant_by_hand(tmp_path):
    """The frontier on the small planted model (two invented abilities in 72 neurons each, one real ability beside
    them), then planted_effects: each row equal to the AIS computed by hand from evaluations.jsonl, and the
    activation contrast's 72-neuron regions (which hold the planted neurons, docs/research/frontier.md) remove their
    planted ability far more than random regions of that size do."""
    from benchprof.cli import main
    from benchprof.lab.frontier_planted import planted_effects
    from benchprof.lab.plant_command import apply
    from benchprof.stats.impact import impact_score

    planted_model = tmp_path / "planted"
    apply(base=str(DEMO), out=str(planted_model), patch=str(ROOT / "benchprof" / "assets" / "demo-plant"))
    planted = ["Invented_Facts", "Invented_Language"]
    config = tmp_path / "plant.yml"
    config.write_text(
        json.dumps({
            "settings": {"output_dir": "out"}, "models": [{"name": str(planted_model), "tag": "p"}],
            "datasets": [{"name": a} for a in [*planted, "Commonsense_Causal"]],
            "data": {"dir": "data", "train_size": 40, "test_size": 30, "seed": 0},
        })
    )  # fmt: skip
    main(["data", str(config)])
    main(["frontier", str(config), "--options", "act_contrast", "--sizes", "72", "--draws", "3", "--test_items", "30"])
    folder = tmp_path / "out" / "p" / "frontier"
    rows = planted_effects(folder, planted)
    records = read_records(folder / "evaluations.jsonl")
    original = next(r["acc_norm"] for r in records if r["option"] == "original")

    def by_hand(region: dict, split: str) -> float:
        return float(impact_score(np.mean(original[split]), np.mean(region["acc_norm"][split])))

    for row in rows:
        region = next(r for r in records if (r["option"], r["region"]) == ("act_contrast", row["ability"]))
        other = next(a for a in planted if a != row["ability"])
        assert row["own_ais"] == pytest.approx(by_hand(region, row["ability"]))
        assert row["other_planted_ais"] == pytest.approx(by_hand(region, other))
        assert row["real_ais"] == pytest.approx(by_hand(region, "Commonsense_Causal"))
        draws = [r for r in records if r["option"] == "random"]
        assert row["random_own"] == pytest.approx(np.mean([by_hand(d, row["ability"]) for d in draws]))
        assert row["own_ais"] > row["random_own"] + 0.3  # the planted ability is removed, random regions do not
    from benchprof.lab.frontier_planted import write_planted_effects

    goal = sum(
        r["own_ais"] >= 0.5
        and r["own_vs_random_p"] < 0.05
        and r["other_planted_ais"] - r["random_other_planted"] <= 0.05
        for r in rows
    )
    markdown = write_planted_effects(folder, planted)[1].read_text()
    line = next(x for x in markdown.splitlines() if x.startswith("| act_contrast | 72 | ") and " of 2 |" in x)
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[9] == f"{goal} of 2"
    # the count over 100 item resamples: shares of 0, 1 or 2 regions at the goal that add up to 100%
    shares = dict(part.rstrip("%)").split(" (") for part in cells[10].split(", "))
    assert set(shares) <= {"0", "1", "2"} and sum(int(v) for v in shares.values()) in (99, 100, 101)
    assert "nan" not in markdown


@pytest.mark.parametrize(
    ("other", "random_other", "want"),
    [
        (0.10, 0.06, True),  # costs the others 0.04 more than random regions: within 0.05
        (0.00, 0.06, True),  # spares them 0.06 more than random regions: one-sided, that spares them too
        (0.11, 0.06, True),  # costs them 0.05 more: at the margin
        (0.12, 0.06, False),  # costs them 0.06 more
        (0.20, 0.06, False),  # costs them 0.14 more
        (math.nan, math.nan, True),  # one planted ability: no others to spare, the goal is its removal alone
        (0.10, math.nan, False),  # others scored, no random regions to hold them against: not shown to spare
    ],
)
def test_spares_holds_the_others_at_most_005_above_random_one_sided(other, random_other, want):
    from benchprof.lab.frontier_planted import spares

    assert spares({"other_planted_ais": other, "random_other_planted": random_other}) is want


@pytest.mark.parametrize("transfer_items", [0, 50])
def test_the_goal_says_it_leaves_out_the_transfer_split_only_where_none_was_scored(transfer_items):
    """A frontier run with --transfer_items 0 counts abilities at the goal by their test split and specificity alone
    (reaches_goal skips a NaN transfer AIS); the header's statement of the goal must say so, and only then."""
    from benchprof.lab.frontier_plan import FrontierPlan
    from benchprof.lab.frontier_report import markdown

    plan = FrontierPlan(
        model="m", data_dir=Path("d"), abilities=("A", "B"), out=Path("o"), transfer_items=transfer_items
    )
    header = markdown(plan, [])
    assert ("no transfer split was scored: the goal here leaves it out" in header) == (transfer_items == 0)
    assert (f"acc_norm on {transfer_items} transfer items" in header) == (transfer_items > 0)


def test_effects_over_builds_counts_every_region_and_takes_a_t_interval_of_the_build_means():
    """effects_over_builds: the own AIS is the mean over builds of each build's mean over its abilities with
    scipy's t interval; removed and goal count every region of every build by the rules of removes and spares."""
    from scipy import stats

    from benchprof.lab.frontier_planted import effects_over_builds

    def row(ability: str, own: float, p: float, other: float) -> dict:
        return {
            "option": "o", "size": 8, "ability": ability, "own_ais": own, "random_own": 0.02, "own_vs_random_p": p,
            "other_planted_ais": other, "random_other_planted": 0.01, "real_ais": 0.03, "random_real": 0.01,
        }  # fmt: skip

    builds = [
        [row("A", 0.6, 0.01, 0.02), row("B", 0.4, 0.01, 0.02)],  # A at the goal; B not removed (own < 0.50)
        [row("A", 0.7, 0.20, 0.02), row("B", 0.9, 0.01, 0.10)],  # A not above random; B removed, costs others 0.09
        [row("A", 0.8, 0.01, -0.03), row("B", 0.6, 0.01, 0.05)],  # both at the goal (others within 0.05)
    ]
    (summary,) = effects_over_builds(builds)
    means = np.array([0.5, 0.8, 0.7])
    half = stats.t.ppf(0.975, 2) * means.std(ddof=1) / math.sqrt(3)
    assert (summary["own_ais"], summary["own_low"], summary["own_high"]) == pytest.approx(
        (means.mean(), means.mean() - half, means.mean() + half)
    )
    assert (summary["builds"], summary["regions"], summary["removed"], summary["at_goal"]) == (3, 6, 4, 3)
    assert summary["goal_per_build"] == "1/0/2"
    assert (summary["other_minus_random_low"], summary["other_minus_random_high"]) == pytest.approx((-0.04, 0.09))
    assert summary["real_minus_random_low"] == pytest.approx(0.02)


def test_builds_with_a_missing_frontier_are_refused_in_one_line_before_anything_is_written(tmp_path):
    """scripts/planted_effects.py over a committed build and a folder with no frontier: one line naming the missing
    plan.json, exit 1, and neither the first build's planted_effects files nor the summary written."""
    import shutil
    import subprocess
    import sys

    build = tmp_path / "build0"
    shutil.copytree(ROOT / "docs" / "results" / "frontier-demo-plant", build)
    for path in build.glob("planted_effects*"):
        path.unlink()
    script = ROOT / "scripts" / "planted_effects.py"
    done = subprocess.run(
        [sys.executable, str(script), f"{build},{tmp_path / 'nowhere'}", "Invented_Facts,Invented_Language",
         "--out", str(tmp_path / "summary")],
        capture_output=True, text=True,
    )  # fmt: skip
    missing = tmp_path / "nowhere" / "plan.json"
    assert done.returncode == 1
    assert done.stderr == f"error: {missing}: not found; measure the planted model's frontier first\n"
    assert not list(build.glob("planted_effects*"))
    assert not (tmp_path / "summary").exists()


def study_script(name: str, *args: str) -> tuple[int, str]:
    """scripts/<name>.py run as a user runs it: (exit status, stderr)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(ROOT / "scripts" / f"{name}.py"), *args], capture_output=True, text=True)
    return done.returncode, done.stderr


def committed_build(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    """A copy of the small plant's committed frontier, and its files' bytes as they were."""
    import shutil

    folder = tmp_path / "frontier"
    shutil.copytree(ROOT / "docs" / "results" / "frontier-demo-plant", folder)
    return folder, {p.name: p.read_bytes() for p in folder.iterdir()}


def test_planted_effects_refuses_an_ability_the_plan_does_not_hold_and_keeps_its_good_files(tmp_path):
    folder, before = committed_build(tmp_path)
    status, stderr = study_script("planted_effects", str(folder), "Invented_Nothing")
    assert status == 1 and stderr == (
        f"error: Invented_Nothing: not an ability of {folder / 'plan.json'} (it holds Invented_Facts, "
        "Invented_Language, Quantitative_Reasoning, Long_Term_Knowledge, Commonsense_Causal, Analogical_Reasoning, "
        "Semantic_Relationship); give the planted abilities its frontier measured\n"
    )
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert study_script("planted_effects", str(folder), "Invented_Facts,Invented_Language")[0] == 0  # the plan's own
    rows = read_csv(folder / "planted_effects.csv")  # every option's region of each planted ability, none dropped
    assert len(rows) == 9 * 2 and {r["ability"] for r in rows} == {"Invented_Facts", "Invented_Language"}


def test_a_draw_cut_short_is_refused_by_both_study_scripts_before_any_file_is_written(tmp_path):
    """evaluations.jsonl's line of one random draw cut short (a kill while it was appended): the random baseline
    would rest on 4 of the plan's 5 draws, so planted_effects.py and frontier_render.py refuse in one line naming
    the draw, and every file of the folder keeps its bytes."""
    from test_frontier_plan import cut_draw

    folder, before = committed_build(tmp_path)
    cut_draw(folder)
    before["evaluations.jsonl"] = (folder / "evaluations.jsonl").read_bytes()
    for status, stderr in (
        study_script("planted_effects", str(folder), "Invented_Facts,Invented_Language"),
        study_script("frontier_render", str(folder)),
    ):
        assert status == 1 and stderr.count("\n") == 1
        assert "no record of 1 of the plan's 69 regions (random draw4 at 72 neurons); 1 line(s)" in stderr
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_a_plan_naming_other_abilities_is_one_line_in_both_study_scripts(tmp_path):
    """plan.json edited to name an ability its records never scored: one line saying they disagree, not KeyError."""
    folder, before = committed_build(tmp_path)
    recorded = json.loads(before["plan.json"])
    (folder / "plan.json").write_text(json.dumps({**recorded, "abilities": ["Invented_Other", "Invented_Language"]}))
    for status, stderr in (
        study_script("planted_effects", str(folder), "Invented_Language"),
        study_script("frontier_render", str(folder)),
    ):
        assert status == 1 and stderr.count("\n") == 1 and "Traceback" not in stderr
        assert "has no scores for Invented_Other" in stderr and "plan.json and its records disagree" in stderr
    assert (folder / "planted_effects.csv").read_bytes() == before["planted_effects.csv"]
    assert (folder / "frontier.md").read_bytes() == before["frontier.md"]


def test_a_region_that_takes_its_split_below_chance_is_marked_and_counted_down_to_chance_only(tmp_path):
    """Own split 0.5 → 0.05 on four-option items (chance 0.25, read from the records' option log-likelihoods): raw AIS
    0.9, to chance (0.5 − 0.25) / 0.5 = 0.5, marked below chance in frontier.csv and .md; the goal's own part reads
    the AIS to chance, so a region that steers a 0.30 split to 0.0 (raw 1.0, to chance 0.167) misses it."""
    from benchprof.lab.frontier_plan import FrontierPlan
    from benchprof.lab.frontier_report import markdown, reaches_goal, rows_of

    n = 200
    loglik = [[-1.0, -2.0, -3.0, -4.0]] * n
    original = {"A": [float(i % 2 == 0) for i in range(n)], "B": [float(i % 10 < 3) for i in range(n)]}
    steered = {"A": [float(i % 20 == 0) for i in range(n)], "B": [0.0] * n}
    records = [
        {"option": "original", "region": "-", "size": 0, "acc_norm": original, "loglik": {"A": loglik, "B": loglik}}
    ]
    records += [{"option": "act_grad", "region": a, "size": 4, "acc_norm": steered} for a in ("A", "B")]
    records += [
        {"option": "random", "region": f"draw{d}", "size": 4, "acc_norm": {"A": original["A"], "B": original["B"]}}
        for d in range(3)
    ]
    plan = FrontierPlan("m", tmp_path, ("A", "B"), tmp_path, options=("act_grad",), sizes=(4,), draws=3)
    rows = {r["ability"]: r for r in rows_of(plan, records, 10, 10**4) if r["option"] == "act_grad"}
    assert rows["A"]["own_ais"] == pytest.approx(0.9) and rows["A"]["own_to_chance"] == pytest.approx(0.5)
    assert rows["A"]["own_below_chance"] and rows["B"]["own_below_chance"]
    assert rows["B"]["own_ais"] == pytest.approx(1.0) and rows["B"]["own_to_chance"] == pytest.approx(0.05 / 0.3)
    assert "own" in reaches_goal(rows["A"]) and "own" not in reaches_goal(rows["B"])
    assert "↓chance (+0.500 to chance)" in markdown(plan, list(rows.values()))
