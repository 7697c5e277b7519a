"""Tests of benchprof/stats/impact.py: AIS above chance, the control-adjusted AIS, p_correct and the chance level and
test, against hand computations and scipy."""

import math

import numpy as np
import pytest

from benchprof.stats.impact import adjusted_ais, ais_above_chance, ais_to_chance, chance_level, chance_test, p_correct


def test_adjusted_ais():
    assert adjusted_ais(0.30, [0.05, 0.10, -0.03]) == pytest.approx(0.30 - 0.04)


def test_p_correct_equals_a_hand_softmax():
    loglikelihoods = [[-1.0, -2.0, -0.5], [-3.0, -1.0]]  # two items, 3 and 2 options
    label = [2, 0]
    expected = [
        math.exp(-0.5) / (math.exp(-1.0) + math.exp(-2.0) + math.exp(-0.5)),
        math.exp(-3.0) / (math.exp(-3.0) + math.exp(-1.0)),
    ]
    np.testing.assert_allclose(p_correct(loglikelihoods, label), expected, rtol=1e-12)
    # acc_norm's normalisation: -1/2, -2/4, -0.5/1 are equal, so each option gets 1/3; -3/3 = -1/1 -> 1/2
    normalised = p_correct(loglikelihoods, label, lengths=[[2, 4, 1], [3, 1]])
    np.testing.assert_allclose(normalised, [1 / 3, 1 / 2], rtol=1e-12)
    # per character -1 and -1.5, put back on the mean length 3: -3 and -4.5 (not a temperature of 3)
    np.testing.assert_allclose(p_correct([[-4.0, -3.0]], [0], lengths=[[4, 2]]), [1 / (1 + math.exp(-1.5))], rtol=1e-12)
    # a rectangular array gives the same, and very negative log-likelihoods do not underflow
    np.testing.assert_allclose(p_correct(np.array([[-1001.0, -1000.0]]), [1]), [1 / (1 + math.exp(-1))])
    with pytest.raises(ValueError, match="label"):
        p_correct(loglikelihoods, [3, 0])
    with pytest.raises(ValueError, match="shape"):
        p_correct(loglikelihoods, label, lengths=[[1, 1, 1], [1, 1, 1]])


def test_p_correct_under_lengths_follows_acc_norm_and_keeps_the_confidence():
    """acc_norm's choice is the argmax of ℓ_j / L_j: p_correct's most probable option is that choice on every
    item, and with equal lengths p_correct is the raw softmax (not squashed by the length)."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        n_options = int(rng.integers(2, 6))
        ll = -rng.gamma(2.0, 6.0, size=n_options)
        lengths = rng.integers(3, 60, size=n_options)
        label = int(rng.integers(n_options))
        probs = [p_correct([ll], [j], lengths=[lengths])[0] for j in range(n_options)]
        assert sum(probs) == pytest.approx(1.0)
        assert int(np.argmax(probs)) == int(np.argmax(ll / lengths))
        same = np.full(n_options, int(lengths[0]))
        np.testing.assert_allclose(p_correct([ll], [label], lengths=[same]), p_correct([ll], [label]), rtol=1e-12)


def test_chance_level_and_chance_test_against_scipy():
    stats = pytest.importorskip("scipy.stats")
    assert chance_level([4, 4, 2, 5]) == pytest.approx((0.25 + 0.25 + 0.5 + 0.2) / 4)
    with pytest.raises(ValueError):
        chance_level([4, 0])

    accuracy = np.array([1] * 33 + [0] * 67, dtype=float)  # 33 of 100 at chance 0.25
    expected = stats.binomtest(33, 100, 0.25, alternative="greater").pvalue
    assert chance_test(accuracy, 0.25) == pytest.approx(expected, rel=1e-9)
    hand = sum(math.comb(100, i) * 0.25**i * 0.75 ** (100 - i) for i in range(33, 101))
    assert chance_test(accuracy, 0.25) == pytest.approx(hand, rel=1e-9)
    assert chance_test(np.array([1] * 20 + [0] * 80, dtype=float), 0.25) > 0.5  # below chance

    p_right = np.random.default_rng(0).beta(2, 5, 200)
    expected = stats.ttest_1samp(p_right, 0.25, alternative="greater").pvalue
    assert chance_test(p_right, 0.25) == pytest.approx(expected, rel=1e-9)
    assert math.isnan(chance_test([1.0], 0.25))


def test_ais_above_chance():
    assert ais_above_chance(0.65, 0.45, 0.25) == pytest.approx(0.5)
    assert math.isnan(ais_above_chance(0.25, 0.20, 0.25))  # at chance: nothing to remove
    np.testing.assert_allclose(ais_above_chance([0.8, 0.2], [0.6, 0.1], 0.0), [0.25, 0.5])
    assert ais_above_chance(np.array([[0.5]]), np.array([0.4, 0.3]), 0.25).shape == (1, 2)


def test_ais_to_chance_stops_removal_at_chance():
    """By hand: Quantitative's region on SmolLM2 (0.373 → 0.137, chance 0.25) removes (0.373 − 0.25) / 0.373 to
    chance, not the raw (0.373 − 0.137) / 0.373; above chance it is the raw AIS; a gain is a negative AIS as raw."""
    assert ais_to_chance(0.373, 0.137, 0.25) == pytest.approx(0.123 / 0.373)
    assert ais_to_chance(0.6, 0.45, 0.25) == pytest.approx(0.15 / 0.6)  # the raw AIS
    assert ais_to_chance(0.6, 0.7, 0.25) == pytest.approx(-1 / 6)
    assert math.isnan(ais_to_chance(0.25, 0.1, 0.25))  # at chance: nothing to remove
    np.testing.assert_allclose(ais_to_chance([0.8, 0.5], [0.1, 0.4], 0.25), [0.55 / 0.8, 0.1 / 0.5])
