"""Tests of benchprof/ais.py: the pure statistics, against hand computations, scipy and simulations with known truth."""

import itertools
import math

import numpy as np
import pytest

from benchprof.ais import (
    adjusted_ais,
    ais_above_chance,
    bh_qvalues,
    bootstrap_p_value,
    chance_level,
    chance_test,
    count_above,
    flip_counts,
    holm,
    items_needed,
    material_drop,
    mcnemar_exact,
    mcnemar_p,
    minimum_detectable_ais,
    minimum_detectable_ais_continuous,
    null_calibration,
    p_correct,
    paired_test,
    resample_counts,
    resampled_means,
    signed_rank_p,
    two_level_bootstrap,
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


def test_adjusted_ais_and_material_drop():
    assert adjusted_ais(0.30, [0.05, 0.10, -0.03]) == pytest.approx(0.30 - 0.04)
    assert not material_drop(10, 200) and material_drop(11, 200)  # more than 5% of the resamples
    assert not material_drop(5, 0)  # no bootstrap, nothing dropped that matters


def test_count_above_counts_abilities_over_the_threshold():
    assert count_above([0.3, 0.05, 0.06, -0.2, np.nan], 0.05) == 2  # strictly above; NaN does not count
    counts = count_above([[0.1, 0.2, 0.0], [np.nan] * 3, [0.06, np.nan, 0.07]], 0.05)
    assert counts[0] == 2 and np.isnan(counts[1]) and counts[2] == 2


def test_bh_qvalues_equal_a_hand_computation():
    pvals = [0.01, 0.04, 0.03, 0.005, 0.20, math.nan, 0.50]
    # m = 6 (NaN not counted); sorted 0.005 0.01 0.03 0.04 0.20 0.50, m·p/rank = 0.03 0.03 0.06 0.06 0.24 0.5,
    # already monotone from the top, so in input order:
    expected = [0.03, 0.06, 0.06, 0.03, 0.24, math.nan, 0.5]
    np.testing.assert_allclose(bh_qvalues(pvals), expected, rtol=1e-12)
    # the step-up minimum matters: m·p/rank = 0.03, 0.018, 0.9 -> 0.018, 0.018, 0.9
    np.testing.assert_allclose(bh_qvalues([0.012, 0.01, 0.9]), [0.018, 0.018, 0.9], rtol=1e-12)
    assert bh_qvalues(np.array([[0.01, 0.04], [0.03, 0.005]])).shape == (2, 2)
    assert np.isnan(bh_qvalues([math.nan, math.nan])).all()
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        bh_qvalues([0.5, 1.5])


def test_bh_qvalues_agree_with_scipy():
    stats = pytest.importorskip("scipy.stats")
    if not hasattr(stats, "false_discovery_control"):
        pytest.skip("scipy < 1.11")
    pvals = np.random.default_rng(3).uniform(0, 0.2, 300) ** 2
    np.testing.assert_allclose(bh_qvalues(pvals), stats.false_discovery_control(pvals, method="bh"), rtol=1e-12)


def test_holm_equals_a_hand_computation():
    # m = 4; sorted 0.005 0.01 0.03 0.04, (m - rank + 1)·p = 0.02 0.03 0.06 0.04, running max 0.02 0.03 0.06 0.06
    np.testing.assert_allclose(holm([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02], rtol=1e-12)
    # capped at 1, NaN passes through and is not counted: 2·0.6 -> 1, max(1, 0.7) -> 1
    np.testing.assert_allclose(holm([0.7, math.nan, 0.6]), [1.0, math.nan, 1.0])


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
    # a rectangular array gives the same, and very negative log-likelihoods do not underflow
    np.testing.assert_allclose(p_correct(np.array([[-1001.0, -1000.0]]), [1]), [1 / (1 + math.exp(-1))])
    with pytest.raises(ValueError, match="label"):
        p_correct(loglikelihoods, [3, 0])
    with pytest.raises(ValueError, match="shape"):
        p_correct(loglikelihoods, label, lengths=[[1, 1, 1], [1, 1, 1]])


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


def test_resample_counts_draw_items_clusters_and_strata():
    n, resamples = 12, 500
    counts = resample_counts(n, resamples, np.random.default_rng(5))
    indices = np.random.default_rng(5).integers(0, n, size=(resamples, n))  # the existing bootstrap's draws
    np.testing.assert_array_equal(counts, np.stack([np.bincount(row, minlength=n) for row in indices]))

    clusters = np.repeat([10, 20, 30, 40, 50, 60], 2)  # pairs of items
    strata = np.repeat(["a", "b"], 6)  # clusters 10-30 in a, 40-60 in b
    counts = resample_counts(n, resamples, np.random.default_rng(6), clusters=clusters)
    np.testing.assert_array_equal(counts[:, 0::2], counts[:, 1::2])  # a cluster enters whole
    assert (counts[:, 0::2].sum(axis=1) == 6).all()  # six clusters drawn per resample
    counts = resample_counts(n, resamples, np.random.default_rng(7), strata=strata)
    assert (counts[:, :6].sum(axis=1) == 6).all() and (counts[:, 6:].sum(axis=1) == 6).all()
    assert counts[:, :6].std() > 0  # and resampled within the stratum
    counts = resample_counts(n, resamples, np.random.default_rng(8), clusters=clusters, strata=strata)
    assert (counts[:, 0:6:2].sum(axis=1) == 3).all() and (counts[:, 6::2].sum(axis=1) == 3).all()
    with pytest.raises(ValueError, match="spans"):
        resample_counts(4, 10, np.random.default_rng(0), clusters=[1, 1, 2, 2], strata=[0, 1, 1, 1])


def test_bootstrap_p_value():
    assert bootstrap_p_value(np.arange(1.0, 100.0)) == pytest.approx(2 / 100)  # no sample at or below 0
    assert bootstrap_p_value(np.linspace(-1, 1, 99)) == 1.0
    assert bootstrap_p_value([1.0, math.nan, -1.0, 2.0]) == pytest.approx(min(1, 2 * 2 / 4))
    assert math.isnan(bootstrap_p_value([math.nan]))


def simulate_cell(rng, n, n_draws, truth):
    """Per-item scores with known variance components: item effects, per-run noise, draw-to-draw spread."""
    original = truth["mean"] + rng.normal(0, truth["item_sd"], n)
    top = original - truth["top_drop"] + rng.normal(0, truth["noise_sd"], n)
    draw_drops = rng.normal(truth["random_drop"], truth["draw_sd"], n_draws)  # each random region's own effect
    draws = original - draw_drops[:, None] + rng.normal(0, truth["noise_sd"], (n_draws, n))
    return original, top, draws


def test_two_level_bootstrap_covers_the_true_difference():
    truth = {"mean": 0.6, "item_sd": 0.15, "noise_sd": 0.05, "top_drop": 0.06, "random_drop": 0.02, "draw_sd": 0.015}
    target = (truth["top_drop"] - truth["random_drop"]) / truth["mean"]  # AIS(top) − E[AIS(random region)]
    rng = np.random.default_rng(2024)
    covered = covered_items_only = 0
    datasets = 200
    for _ in range(datasets):
        original, top, draws = simulate_cell(rng, n=200, n_draws=10, truth=truth)
        low, high = np.percentile(two_level_bootstrap(original, top, draws, 1000, rng), [2.5, 97.5])
        covered += low <= target <= high
        # items only: the same bootstrap with the pool fixed at its mean (AIS is linear in s′ at fixed s)
        fixed_pool = draws.mean(axis=0, keepdims=True)
        low, high = np.percentile(two_level_bootstrap(original, top, fixed_pool, 1000, rng), [2.5, 97.5])
        covered_items_only += low <= target <= high
    coverage, coverage_items_only = covered / datasets, covered_items_only / datasets
    print(f"two-level coverage {coverage:.3f}, items-only coverage {coverage_items_only:.3f}")
    assert 0.90 <= coverage <= 0.99
    assert coverage_items_only < 0.90  # the draw-to-draw variation is what the second level adds


def test_cluster_bootstrap_covers_where_items_share_a_cluster_effect():
    clusters = np.repeat(np.arange(40), 5)  # 40 templates × 5 items; the ablation hits a template's items alike
    target = 0.04 / 0.6
    rng = np.random.default_rng(7)
    covered = covered_items = 0
    for _ in range(200):
        original = 0.6 + rng.normal(0, 0.1, 40)[clusters] + rng.normal(0, 0.1, 200)
        top = original - 0.06 - rng.normal(0, 0.04, 40)[clusters] + rng.normal(0, 0.02, 200)
        draws = original - 0.02 + rng.normal(0, 0.02, (10, 200))
        low, high = np.percentile(two_level_bootstrap(original, top, draws, 500, rng, clusters=clusters), [2.5, 97.5])
        covered += low <= target <= high
        low, high = np.percentile(two_level_bootstrap(original, top, draws, 500, rng), [2.5, 97.5])
        covered_items += low <= target <= high
    print(f"clustered items: cluster bootstrap coverage {covered / 200:.3f}, item bootstrap {covered_items / 200:.3f}")
    assert 0.90 <= covered / 200 <= 0.99
    assert covered_items / 200 < 0.85


def test_resampled_means_pair_the_rows_and_chunk_alike():
    values = np.random.default_rng(0).random((3, 40))
    means = resampled_means(values, 300, np.random.default_rng(1))
    counts = resample_counts(40, 300, np.random.default_rng(1))
    np.testing.assert_allclose(means, counts @ values.T / 40)
    chunked = resampled_means(values, 300, np.random.default_rng(1), max_elements=400)  # ten resamples a chunk
    assert chunked.shape == (300, 3)
    np.testing.assert_allclose(chunked.mean(axis=0), values.mean(axis=1), atol=0.03)


def test_two_level_bootstrap_shapes_and_paired_items():
    rng = np.random.default_rng(0)
    original = rng.random(50)
    tops = np.stack([original * 0.9, original * 0.5])
    out = two_level_bootstrap(original, tops, original[None, :] * 0.9, 200, rng, max_elements=500)
    assert out.shape == (2, 200)
    # top 0 equals the only random draw on every item, so every paired resample gives exactly 0
    np.testing.assert_allclose(out[0], 0.0, atol=1e-12)
    np.testing.assert_allclose(out[1], 0.4, atol=1e-12)  # (s − 0.5s)/s − (s − 0.9s)/s
    with pytest.raises(ValueError, match="items"):
        two_level_bootstrap(original, tops[:, :10], original[None, :], 10, rng)


def null_mcnemar_pvalues(rng, cells, n=300, accuracy=0.6, discordance=0.1):
    """Cells where ablation changes nothing: each item is concordant or flips either way with equal chance."""
    kinds = rng.choice(
        4, size=(cells, n), p=[accuracy - discordance / 2, 1 - accuracy - discordance / 2] + [discordance / 2] * 2
    )
    original = np.isin(kinds, (0, 2)).astype(float)  # kinds: right-right, wrong-wrong, lost, gained
    ablated = np.isin(kinds, (0, 3)).astype(float)
    return mcnemar_p(*flip_counts(original, ablated))


def test_bh_on_null_cells_flags_at_most_alpha():
    alpha, cells = 0.05, 200
    rng = np.random.default_rng(11)
    pvals = null_mcnemar_pvalues(rng, cells)
    flagged = np.mean(bh_qvalues(pvals) < alpha)
    any_flagged = [np.any(bh_qvalues(null_mcnemar_pvalues(rng, cells)) < alpha) for _ in range(200)]
    any_raw = [np.any(null_mcnemar_pvalues(rng, cells) < alpha) for _ in range(20)]
    print(f"null cells flagged after BH {flagged:.3f}; family-wise rate BH {np.mean(any_flagged):.3f}", end=", ")
    print(f"uncorrected {np.mean(any_raw):.2f}")
    assert flagged <= alpha
    assert np.mean(any_flagged) <= alpha  # all nulls true: the false discovery rate is the family-wise rate
    assert np.mean(any_raw) > 0.9  # uncorrected, 200 cells almost always give a star

    # continuous per-item values, the signed-rank test: calibrated raw, and BH keeps cells unflagged
    values = rng.beta(2, 2, (cells, 300))
    noise = rng.normal(0, 0.05, (cells, 300))
    pvals = signed_rank_p(values + noise, values - noise)
    print(
        f"signed-rank null: raw share {np.mean(pvals < alpha):.3f}, after BH {np.mean(bh_qvalues(pvals) < alpha):.3f}"
    )
    assert 0.01 <= np.mean(pvals < alpha) <= 0.09
    assert np.mean(bh_qvalues(pvals) < alpha) <= alpha


@pytest.mark.parametrize(
    ("n", "s_original", "discordance", "alpha"),
    [(400, 0.6, 0.15, 0.05), (400, 0.6, 0.15, 0.05 / 100), (100, 0.5, 0.2, 0.05), (200, 0.6, 0.01, 0.05)],
)
def test_minimum_detectable_ais_has_the_stated_power(n, s_original, discordance, alpha):
    mde = minimum_detectable_ais(n, discordance, s_original, alpha)
    drop = mde * s_original
    psi = max(discordance, drop)  # a drop needs at least that many flipped items
    counts = np.random.default_rng(n).multinomial(n, [(psi + drop) / 2, (psi - drop) / 2, 1 - psi], size=4000)
    power = np.mean(mcnemar_p(counts[:, 0], counts[:, 1]) < alpha)
    print(f"n={n} s={s_original} psi={discordance} alpha={alpha}: MDE {mde:.4f}, empirical power {power:.3f}")
    assert 0.7 <= power <= 0.9
    assert abs(items_needed(mde, discordance, s_original, alpha) - n) <= 1


def test_minimum_detectable_ais_formula_and_monotonicity():
    # large n: δ ≈ (z_0.975 + z_0.8)·√(ψ/n)
    assert minimum_detectable_ais(1e8, 0.1, 1.0) == pytest.approx(
        (1.959964 + 0.841621) * math.sqrt(0.1 / 1e8), rel=1e-3
    )
    mdes = minimum_detectable_ais(np.array([100, 400, 1600]), 0.1, 0.5)
    assert mdes[0] > mdes[1] > mdes[2]
    assert minimum_detectable_ais(400, 0.1, 0.5, alpha=0.001) > minimum_detectable_ais(400, 0.1, 0.5)
    assert math.isnan(minimum_detectable_ais(400, 0.1, 0.0))
    assert items_needed(0.05, 0.1, 0.6) > items_needed(0.10, 0.1, 0.6)


def test_minimum_detectable_ais_continuous_has_the_stated_power():
    n, sd, s_original, alpha = 300, 0.1, 0.5, 0.05
    mde = minimum_detectable_ais_continuous(n, sd, s_original, alpha)
    rng = np.random.default_rng(4)
    diffs = mde * s_original + rng.normal(0, sd, (400, n))
    pvals = signed_rank_p(diffs, np.zeros(n))
    power = np.mean(pvals < alpha)
    print(f"continuous MDE {mde:.4f}: empirical power {power:.3f}")
    assert 0.7 <= power <= 0.9


def test_null_calibration_flags_few_exchangeable_random_draws():
    rng = np.random.default_rng(12)
    pvals = []
    for _ in range(30):
        original = (rng.random(300) < 0.6).astype(float)
        flips = rng.random((10, 300)) < 0.05  # every random region flips 5% of the items: the same effect
        draws = np.where(flips, 1 - original, original)
        draw_pvals, share = null_calibration(original, draws, 1000, rng)
        assert share == np.mean(draw_pvals < 0.05)
        pvals.extend(draw_pvals)
    null_share = np.mean(np.array(pvals) < 0.05)

    varied = []
    for _ in range(30):
        original = (rng.random(300) < 0.6).astype(float)
        rates = rng.uniform(0.0, 0.3, 10)  # random regions that really differ from each other
        draws = np.where(rng.random((10, 300)) < rates[:, None], 1 - original, original)
        varied.extend(null_calibration(original, draws, 1000, rng)[0])
    varied_share = np.mean(np.array(varied) < 0.05)
    print(f"null calibration: exchangeable draws flagged {null_share:.3f}, differing draws {varied_share:.3f}")
    assert null_share <= 0.06
    assert varied_share > 0.1
