"""Tests of benchprof/stats/paired.py: McNemar and its clustered form, the sign-flip test of the mean and paired_test,
against hand computations, full enumeration and scipy, and their false-positive rates over many simulated datasets."""

import itertools
import math

import numpy as np
import pytest

from benchprof.stats.paired import (
    clustered_mcnemar_p,
    flip_counts,
    mcnemar_exact,
    mcnemar_p,
    mean_difference_p,
    one_sided_p,
    paired_test,
    sign_flip_exact_p,
    sign_flip_integer_p,
)


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


def test_sign_flip_exact_p_matches_full_enumeration_and_scipy():
    """All 2^m sign patterns of the unit differences equally likely; p = share with |sum| ≥ the observed |sum|."""
    from scipy import stats

    diff = np.array([0.3, -0.1, 0.25, 0.4, -0.05, 0.6, 0.35, -0.2, 0.0])
    nonzero = diff[diff != 0]
    sums = [abs(sum(s * d for s, d in zip(signs, nonzero))) for signs in itertools.product([-1, 1], repeat=8)]
    by_hand = np.mean(np.array(sums) >= abs(nonzero.sum()) - 1e-12)
    assert sign_flip_exact_p(diff) == pytest.approx(by_hand, rel=1e-12)
    scipy_p = stats.permutation_test(
        (nonzero,), np.sum, permutation_type="samples", n_resamples=np.inf, alternative="two-sided"
    ).pvalue
    assert sign_flip_exact_p(diff) == pytest.approx(scipy_p, rel=1e-9)
    assert sign_flip_exact_p(np.zeros(5)) == 1.0
    assert sign_flip_exact_p(np.ones(6)) == pytest.approx(2 / 2**6)
    with pytest.raises(ValueError, match="at most 14"):
        sign_flip_exact_p(np.ones(15))


def test_mean_difference_p_is_exact_for_few_units_and_a_t_test_beyond():
    from scipy import stats

    rng = np.random.default_rng(4)
    before = rng.uniform(0, 1, 10)
    after = before - rng.normal(0.1, 0.2, 10)
    assert mean_difference_p(before, after) == pytest.approx(sign_flip_exact_p(before - after), rel=1e-12)
    before, after = rng.uniform(0, 1, 40), rng.uniform(0, 1, 40)
    assert mean_difference_p(before, after) == pytest.approx(stats.ttest_1samp(before - after, 0).pvalue, rel=1e-12)
    # clusters: the test of the clusters' summed differences (20 clusters of two items)
    clusters = np.repeat(np.arange(20), 2)
    summed = (before - after).reshape(20, 2).sum(axis=1)
    assert mean_difference_p(before, after, clusters) == pytest.approx(stats.ttest_1samp(summed, 0).pvalue, rel=1e-12)
    # rows are separate tests; nothing differing gives 1; a shift every unit shares is as extreme as can be
    rows = mean_difference_p(np.ones((2, 20)), np.stack([np.ones(20), np.full(20, 0.5)]))
    assert rows[0] == 1.0 and rows[1] == pytest.approx(2 / 2**20)


def brute_force_sign_flip_p(d: list[int]) -> float:
    """Every one of the 2^m sign patterns, enumerated: the share whose |sum| reaches the observed one."""
    import itertools

    observed = abs(sum(d))
    sums = [abs(sum(s * x for s, x in zip(signs, d))) for signs in itertools.product((1, -1), repeat=len(d))]
    return sum(total >= observed for total in sums) / len(sums)


def test_the_integer_sign_flip_test_equals_every_pattern_enumerated():
    rng = np.random.default_rng(5)
    for _ in range(150):
        d = [int(x) for x in rng.integers(-4, 5, size=rng.integers(1, 13)) if x != 0] or [1]
        assert sign_flip_integer_p(d) == pytest.approx(brute_force_sign_flip_p(d), abs=1e-12), d
    with pytest.raises(ValueError, match="whole numbers"):
        sign_flip_integer_p([0.5, 1.0])


def test_clustered_mcnemar_is_exact_mcnemar_with_single_item_clusters_at_every_size():
    """One item per cluster: the p-value equals scipy's exact binomial test of the lost items among the changed
    ones, at every number of changed items (it was χ² beyond 14, level up to 0.078)."""
    from scipy import stats

    for m in range(15, 201):
        for lost in sorted({0, m // 4, m // 2 - 1, m // 2, m - 3, m}):
            original = np.array([1] * lost + [0] * (m - lost) + [1] * 7)
            ablated = np.array([0] * lost + [1] * (m - lost) + [1] * 7)
            p = clustered_mcnemar_p(original, ablated, np.arange(original.size))
            assert p == pytest.approx(stats.binomtest(lost, m, 0.5).pvalue, rel=1e-9, abs=1e-300), (m, lost)


def test_clustered_mcnemar_on_clusters_of_several_items_by_enumeration():
    rng = np.random.default_rng(5)
    original = rng.integers(0, 2, 36)
    ablated = np.where(rng.uniform(size=36) < 0.45, 1 - original, original)
    clusters = np.repeat(np.arange(12), 3)
    d = [int((original[c] - ablated[c]).sum()) for c in (clusters == k for k in range(12))]
    assert clustered_mcnemar_p(original, ablated, clusters) == pytest.approx(brute_force_sign_flip_p(d), abs=1e-12)


def test_the_clustered_mcnemar_holds_its_level_at_every_number_of_changed_clusters():
    """Under "the ablation changes nothing" (each cluster's items as likely lost as gained), the rejection rate
    at 0.05 over 4,000 datasets per size, for 15 to 60 changed clusters of 1 to 4 items, stays at or below 0.05
    (plus its Monte Carlo error): an exact test cannot exceed its level."""
    rng = np.random.default_rng(8)
    for changed in (15, 21, 30, 45, 60):
        rejected = 0
        for _ in range(4000):
            sizes = rng.integers(1, 5, changed)
            d = sizes * rng.choice((-1, 1), changed)
            rejected += sign_flip_integer_p(d) < 0.05
        rate = rejected / 4000
        print(f"{changed} changed clusters: level {rate:.4f}")
        assert rate <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / 4000)


def test_the_mean_test_keeps_its_rate_on_skewed_differences_with_mean_zero():
    """The signed-rank test asks about the typical item, not the mean the AIS is: on skewed differences with
    mean 0 it rejected most of the time. The mean test's false-positive rate over 2,000 datasets stays near 5%."""
    from scipy import stats

    rng = np.random.default_rng(6)
    for n in (30, 300):
        d = rng.exponential(1.0, (2000, n)) - 1.0  # mean 0, skewed
        rate = np.mean(mean_difference_p(d, np.zeros_like(d)) < 0.05)
        wilcoxon = np.mean([stats.wilcoxon(row).pvalue < 0.05 for row in d[:400]])
        print(f"n={n}: mean test rejects {rate:.3f}, signed rank {wilcoxon:.3f}")
        assert 0.025 <= rate <= 0.075
        if n == 300:
            assert wilcoxon > 0.5  # what the old test did


def test_mean_test_units_is_sugdens_rule_on_the_sample_skewness():
    from benchprof.stats.paired import mean_test_units

    rng = np.random.default_rng(3)
    changed = rng.exponential(1.0, 40) - 1.0
    d = np.concatenate([changed, np.zeros(60)])  # the unchanged units do not count
    n = changed.size
    m2, m3 = np.mean((changed - changed.mean()) ** 2), np.mean((changed - changed.mean()) ** 3)
    g1 = m3 / m2**1.5 * math.sqrt(n * (n - 1)) / (n - 2)  # the adjusted Fisher-Pearson coefficient, by hand
    assert mean_test_units(d) == math.floor(28 + 25 * g1**2) + 1
    assert mean_test_units(np.zeros(50)) == 0  # nothing changed: nothing to test
    assert mean_test_units(np.full(50, 0.2)) == mean_test_units([0.5, -0.5]) == 29  # no skewness to see: the floor
    assert mean_test_units([0.3, 0.1 + 0.2, 0.3, 0.3]) >= 29  # alike but for rounding: skew is NaN, not a crash


SKEWED_NULLS = {  # mean 0 by construction, each a shape a continuous metric's per-document differences take
    "exponential": lambda rng, size: rng.exponential(1.0, size) - 1.0,
    "lognormal": lambda rng, size: np.exp(rng.normal(0.0, 1.0, size)) - math.exp(0.5),
    "sparse, 10% exponential": lambda rng, size: (rng.random(size) < 0.1) * (rng.exponential(1.0, size) - 1.0),
    "sparse, 5% lognormal": lambda rng, size: (
        (rng.random(size) < 0.05) * (np.exp(rng.normal(0, 1, size)) - math.exp(0.5))
    ),
    "p_correct-like, 30% moved": lambda rng, size: (rng.random(size) < 0.3) * (rng.exponential(0.05, size) - 0.05),
    "normal": lambda rng, size: rng.normal(0.0, 1.0, size),
}


def test_the_paired_mean_test_keeps_its_level_on_skewed_and_sparse_differences_at_n_100():
    """paired_test on a continuous row: the false-positive rate over 2,000 datasets of 100 documents stays
    within 0.05 +- 0.015 in every shape (the rows with too few changes for their skewness get no test). Without
    the size rule the same datasets reject up to 0.10. (The full grid, n = 100 / 300 / 1,000 and the power:
    `python tests/test_stats_paired.py`.)"""
    rng = np.random.default_rng(11)
    for name, draw in SKEWED_NULLS.items():
        d = draw(rng, (2000, 100))
        p = np.array([paired_test(row, np.zeros(100)).p_value for row in d])
        rate, raw = np.mean(p < 0.05), np.mean(mean_difference_p(d, np.zeros_like(d)) < 0.05)
        print(f"{name}: {rate:.3f} ({np.mean(np.isnan(p)):.2f} untested; without the rule {raw:.3f})")
        assert rate <= 0.065, name
    assert raw >= 0.035  # the normal case keeps its power: every dataset is tested


def test_the_clustered_mcnemar_keeps_its_rate_when_facts_flip_together():
    """Items of one fact flip together (here 5 items per fact; a fact flips to lost, to gained or not at all,
    with no net effect): plain McNemar counts 5x too many independent items and rejects far too often; the
    clustered test's rate over 2,000 datasets stays near 5%."""
    rng = np.random.default_rng(7)
    facts, size = 60, 5
    clusters = np.repeat(np.arange(facts), size)
    plain, clustered = [], []
    for _ in range(2000):
        state = rng.choice([-1, 0, 0, 0, 1], facts)  # -1: the fact's items are lost, +1: gained
        original = np.repeat((state == -1).astype(int), size)
        ablated = np.repeat((state == 1).astype(int), size)
        keep = rng.uniform(size=facts * size) < 0.8  # not every item of a flipping fact flips
        original, ablated = np.where(keep, original, 0), np.where(keep, ablated, 0)
        plain.append(paired_test(original, ablated).p_value < 0.05)
        clustered.append(paired_test(original, ablated, clusters).p_value < 0.05)
    print(f"plain McNemar rejects {np.mean(plain):.3f}, clustered {np.mean(clustered):.3f}")
    assert np.mean(plain) > 0.2
    assert 0.02 <= np.mean(clustered) <= 0.075


def test_paired_test_picks_mcnemar_for_0_1_scores_and_the_mean_test_otherwise():
    from scipy import stats

    original = [1, 1, 1, 0, 0, 1, 0, 1]
    ablated = [0, 1, 0, 1, 0, 1, 0, 0]
    test = paired_test(original, ablated)
    assert (test.flips_lost, test.flips_gained) == (3, 1) and test.p_value == pytest.approx(binomial_two_sided(3, 1))
    assert math.isnan(test.spread)
    # an error indicator (lower is better): 0 -> 1 is the loss, so the same items count the other way
    flipped = paired_test(original, ablated, lower_is_better=True)
    assert (flipped.flips_lost, flipped.flips_gained) == (1, 3) and flipped.p_value == test.p_value
    # continuous scores: the test of the mean difference, and their sd by hand
    before = np.array([0.9, 0.8, 0.7, 0.6, 0.95, 0.5])
    after = np.array([0.5, 0.85, 0.2, 0.6, 0.4, 0.45])
    diff = before - after
    test = paired_test(before, after)
    assert test.flips_lost is None and test.flips_gained is None
    # five changed documents: too few for any mean test (at least 29), so none, and how many it would need
    changed = diff[diff != 0]
    m2, m3 = np.mean((changed - changed.mean()) ** 2), np.mean((changed - changed.mean()) ** 3)
    g1 = m3 / m2**1.5 * math.sqrt(5 * 4) / 3
    assert math.isnan(test.p_value) and test.needs_units == math.floor(28 + 25 * g1**2) + 1
    hand_sd = math.sqrt(sum((d - diff.mean()) ** 2 for d in diff) / 5)
    assert test.spread == pytest.approx(hand_sd, rel=1e-12)
    # enough of them: the paired t-test of the mean difference
    rng = np.random.default_rng(8)
    before = rng.uniform(0.3, 0.9, 80)
    after = before - rng.normal(0.02, 0.05, 80)
    test = paired_test(before, after)
    assert test.needs_units == 0 and test.p_value == pytest.approx(stats.ttest_1samp(before - after, 0).pvalue)


def test_one_sided_p_is_the_exact_binomial_tail_where_the_region_hurts():
    from scipy import stats

    for lost in range(1, 30):
        for gained in range(0, lost):
            exact = stats.binomtest(lost, lost + gained, 0.5, alternative="greater").pvalue
            assert one_sided_p(float(mcnemar_p(lost, gained)), effect=+1.0) == pytest.approx(exact, rel=1e-12)
            # the same flips the other way round (the region helps) never pass
            assert one_sided_p(float(mcnemar_p(gained, lost)), effect=-1.0) >= 0.5
    assert one_sided_p(1.0, 0.0) == 0.5 and math.isnan(one_sided_p(math.nan, 1.0))


def test_wilson_matches_scipy_and_newcombes_paired_interval_by_hand():
    from scipy import stats

    from benchprof.stats.paired import paired_difference_interval, wilson_interval

    for k, n in [(0, 10), (3, 10), (10, 10), (37, 120)]:
        ci = stats.binomtest(k, n).proportion_ci(method="wilson")
        assert wilson_interval(k, n) == pytest.approx((ci.low, ci.high), rel=1e-12, abs=1e-15)
    # a = 30 right on both, b = 6 lost, c = 2 gained, d = 12 wrong on both (n = 50)
    original = np.array([1] * 30 + [1] * 6 + [0] * 2 + [0] * 12)
    ablated = np.array([1] * 30 + [0] * 6 + [1] * 2 + [0] * 12)
    p1, p2 = 36 / 50, 32 / 50
    w1 = stats.binomtest(36, 50).proportion_ci(method="wilson")
    w2 = stats.binomtest(32, 50).proportion_ci(method="wilson")
    phi = (30 * 12 - 6 * 2) / math.sqrt(36 * 14 * 32 * 18)
    low = p1 - p2 - math.sqrt((p1 - w1.low) ** 2 - 2 * phi * (p1 - w1.low) * (w2.high - p2) + (w2.high - p2) ** 2)
    high = p1 - p2 + math.sqrt((w1.high - p1) ** 2 - 2 * phi * (w1.high - p1) * (p2 - w2.low) + (p2 - w2.low) ** 2)
    assert paired_difference_interval(original, ablated) == pytest.approx((low, high), rel=1e-12)


def test_the_ais_interval_covers_when_few_items_flip():
    """The percentile bootstrap covered about 80% with 2 expected discordant items; the interval a 0/1 row now
    gets (the hull of the bootstrap and Newcombe's score interval over the original mean, cells.widen_for_sparse_flips)
    covers the true AIS in at least 93% of 600 simulated datasets from 2 expected discordant items upward."""
    from benchprof.stats.paired import paired_difference_interval
    from benchprof.stats.resampling import bootstrap_ais, percentile_ci

    rng = np.random.default_rng(8)
    for n in (100, 1000):
        for discordant in (2, 4, 8):
            lost, gained = discordant / n / 0.7 * 0.8, discordant / n / 0.3 * 0.2  # 4 of 5 flips are losses
            true = (0.7 * lost - 0.3 * gained) / 0.7
            hull, boot = [], []
            for _ in range(600):
                original = (rng.random(n) < 0.7).astype(float)
                flip = rng.random(n) < np.where(original == 1, lost, gained)
                ablated = np.where(flip, 1 - original, original)
                s = original.mean()
                b_low, b_high = percentile_ci(bootstrap_ais(original, ablated[None], 300, rng)[0])
                n_low, n_high = (v / s for v in paired_difference_interval(original, ablated))
                boot.append(b_low <= true <= b_high)
                hull.append(min(b_low, n_low) <= true <= max(b_high, n_high))
            print(f"n={n}, {discordant} discordant expected: bootstrap {np.mean(boot):.3f}, hull {np.mean(hull):.3f}")
            assert np.mean(hull) >= 0.93


if __name__ == "__main__":
    # the full grid of the mean test's rates
    # (docs/research/statistics-simulations.md#the-mean-tests-size-rule-the-full-grid): 2,000 datasets per cell; the
    # power with every document shifted by 0.3 sd (every unit then changed)
    rng = np.random.default_rng(11)
    print("| differences | n | false positives | without the rule | untested | power at +0.3 sd |")
    print("|---|---|---|---|---|---|")
    for n in (100, 300, 1000):
        for name, draw in SKEWED_NULLS.items():
            d = draw(rng, (2000, n))
            p = np.array([paired_test(row, np.zeros(n)).p_value for row in d])
            shifted = d + 0.3 * d.std(1, keepdims=True)
            power = np.mean(np.array([paired_test(row, np.zeros(n)).p_value for row in shifted]) < 0.05)
            raw = np.mean(mean_difference_p(d, np.zeros_like(d)) < 0.05)
            figures = f"{np.mean(p < 0.05):.3f} | {raw:.3f} | {np.mean(np.isnan(p)):.2f} | {power:.3f}"
            print(f"| {name} | {n} | {figures} |")
