"""lab/validation.py: the recovery metrics against hand computations (the planted model: tests/test_planted.py,
tests/test_realplant.py)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from benchprof.lab.validation import (
    auroc,
    jaccard_pairs,
    mean_interval,
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


def test_mean_interval_by_hand_and_its_coverage() -> None:
    # [1, 2, 3]: mean 2, s = 1, t(0.975, 2) = 4.302653 (a printed table's value): half-width 4.302653 / sqrt(3)
    mean, low, high = mean_interval([1.0, 2.0, 3.0])
    assert mean == 2.0
    assert high - mean == pytest.approx(4.302653 / np.sqrt(3), abs=1e-6)
    assert mean - low == pytest.approx(high - mean)
    assert np.isnan(mean_interval([0.5])[1]) and np.isnan(mean_interval([])[0])
    assert mean_interval([0.2, float("nan"), 0.4])[0] == pytest.approx(0.3)
    # coverage over 4,000 sets of three normal builds with a known mean: 0.95 up to simulation error (±0.007)
    rng = np.random.default_rng(5)
    covered = [lo <= 0.3 <= hi for _, lo, hi in (mean_interval(rng.normal(0.3, 0.05, 3)) for _ in range(4000))]
    assert abs(np.mean(covered) - 0.95) < 0.012


def test_share_interval_clips_to_zero_and_one_and_keeps_nan() -> None:
    from benchprof.lab.validation import share_interval

    mean, low, high = mean_interval([0.9, 1.0, 0.98])
    assert high > 1.0 and share_interval([0.9, 1.0, 0.98]) == (mean, low, 1.0)
    assert (
        share_interval([0.0, 0.1, 0.02])[1] == 0.0
        and share_interval([0.0, 0.1, 0.02])[2] == mean_interval([0.0, 0.1, 0.02])[2]
    )
    single = share_interval([0.5])
    assert single[0] == 0.5 and np.isnan(single[1]) and np.isnan(single[2])  # one build: no interval, not [0, 1]
