"""Tests of benchprof/stats/paired.py: McNemar, the signed-rank test and paired_test, against hand computations and
full enumeration."""

import itertools
import math

import numpy as np
import pytest

from benchprof.stats.paired import flip_counts, mcnemar_exact, mcnemar_p, one_sided_p, paired_test, signed_rank_p


def binomial_two_sided(b, c):
    """min(1, 2·P(X ≤ min(b, c))), X ~ Binom(b + c, 1/2), summed with math.comb."""
    m = b + c
    return min(1.0, 2 * sum(math.comb(m, i) for i in range(min(b, c) + 1)) / 2**m)


def test_mcnemar_counts_flips_and_matches_a_binomial_sum():
    original = [1, 1, 1, 0, 0, 1, 0, 1]
    ablated = [0, 1, 0, 1, 0, 1, 0, 0]
    lost, gained, p = mcnemar_exact(original, ablated)
    assert (lost, gained) == (3, 1)  # items 0, 2, 7 lost; item 3 gained
    assert p == pytest.approx(10 / 16)  # 2·(C(4,0) + C(4,1)) / 2^4

    hand = {(1, 5): 14 / 64, (0, 5): 2 / 32, (3, 3): 1.0, (0, 0): 1.0, (2, 10): 158 / 4096}
    for (b, c), expected in hand.items():
        assert binomial_two_sided(b, c) == pytest.approx(expected)
        assert mcnemar_p(b, c) == pytest.approx(expected, rel=1e-12)
        assert mcnemar_p(c, b) == pytest.approx(expected, rel=1e-12)
    b, c = np.meshgrid(np.arange(40), np.arange(40))
    expected = np.vectorize(binomial_two_sided)(b, c)
    np.testing.assert_allclose(mcnemar_p(b, c), expected, rtol=1e-10)


def test_flip_counts_run_over_regions_and_reject_non_binary_scores():
    original = np.array([1, 0, 1, 1])
    ablated = np.array([[0, 0, 1, 0], [1, 1, 1, 1]])
    lost, gained = flip_counts(original, ablated)
    assert lost.tolist() == [2, 0] and gained.tolist() == [0, 1]
    with pytest.raises(ValueError, match="0 or 1"):
        flip_counts([0.5, 1], [1, 1])
    with pytest.raises(ValueError, match="paired"):
        mcnemar_exact([1, 0], [1, 0, 1])


def test_signed_rank_p_matches_full_enumeration_of_sign_flips():
    """The exact null of the signed-rank statistic W+ (sum of the ranks of |d| with d > 0): all 2^n sign
    patterns equally likely; p = min(1, 2·min(P(W+ ≤ w), P(W+ ≥ w)))."""
    diff = np.array([0.3, -0.1, 0.25, 0.4, -0.05, 0.6, 0.35, -0.2])
    ranks = np.argsort(np.argsort(np.abs(diff))) + 1
    observed = ranks[diff > 0].sum()
    null = [sum(r for r, s in zip(ranks, signs) if s > 0) for signs in itertools.product([-1, 1], repeat=diff.size)]
    exact = min(1.0, 2 * min(np.mean(np.array(null) <= observed), np.mean(np.array(null) >= observed)))
    assert signed_rank_p(diff, np.zeros(diff.size)) == pytest.approx(exact, rel=1e-12)
    # zero differences are dropped, nothing differing gives 1; rows are separate tests
    rows = signed_rank_p(np.ones((2, 6)), np.stack([np.ones(6), np.zeros(6)]))
    assert rows[0] == 1.0 and rows[1] == pytest.approx(2 * 0.5**6)
    # clusters: the test of the clusters' summed differences
    clusters = ["a", "a", "b", "b", "c", "c", "d", "d"]
    summed = diff.reshape(4, 2).sum(axis=1)
    assert signed_rank_p(diff, np.zeros(8), clusters) == pytest.approx(signed_rank_p(summed, np.zeros(4)))


def test_paired_test_picks_mcnemar_for_0_1_scores_and_signed_rank_otherwise():
    original = [1, 1, 1, 0, 0, 1, 0, 1]
    ablated = [0, 1, 0, 1, 0, 1, 0, 0]
    test = paired_test(original, ablated)
    assert (test.flips_lost, test.flips_gained) == (3, 1) and test.p_value == pytest.approx(binomial_two_sided(3, 1))
    assert math.isnan(test.spread)
    # an error indicator (lower is better): 0 -> 1 is the loss, so the same items count the other way
    flipped = paired_test(original, ablated, lower_is_better=True)
    assert (flipped.flips_lost, flipped.flips_gained) == (1, 3) and flipped.p_value == test.p_value
    # continuous scores: the signed-rank test on the differences, and their sd by hand
    before = np.array([0.9, 0.8, 0.7, 0.6, 0.95, 0.5])
    after = np.array([0.5, 0.85, 0.2, 0.6, 0.4, 0.45])
    diff = before - after
    test = paired_test(before, after)
    assert test.flips_lost is None and test.flips_gained is None
    assert test.p_value == pytest.approx(signed_rank_p(diff, np.zeros(6)))
    hand_sd = math.sqrt(sum((d - diff.mean()) ** 2 for d in diff) / 5)
    assert test.spread == pytest.approx(hand_sd, rel=1e-12)


def test_one_sided_p_is_the_exact_binomial_tail_where_the_region_hurts():
    from scipy import stats

    for lost in range(1, 30):
        for gained in range(0, lost):
            exact = stats.binomtest(lost, lost + gained, 0.5, alternative="greater").pvalue
            assert one_sided_p(float(mcnemar_p(lost, gained)), effect=+1.0) == pytest.approx(exact, rel=1e-12)
            # the same flips the other way round (the region helps) never pass
            assert one_sided_p(float(mcnemar_p(gained, lost)), effect=-1.0) >= 0.5
    assert one_sided_p(1.0, 0.0) == 0.5 and math.isnan(one_sided_p(math.nan, 1.0))
