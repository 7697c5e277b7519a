"""Tests of benchprof/stats/resampling.py: the item, cluster and stratified resamples, the two-level bootstrap and
its null calibration, bootstrap p-values, against hand computations and simulations with known truth."""

import math

import numpy as np
import pytest

from benchprof.stats.profiles import breadth_bootstrap
from benchprof.stats.resampling import (
    bootstrap_p_value,
    difference_test,
    material_drop,
    resample_counts,
    resampled_means,
    two_level_bootstrap,
    wald_test,
)


def test_material_drop():
    assert not material_drop(10, 200) and material_drop(11, 200)  # more than 5% of the resamples
    assert not material_drop(5, 0)  # no bootstrap, nothing dropped that matters


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


def test_difference_test_by_hand():
    """The Wald difference on the bootstrap standard error, computed by hand on four resamples."""
    from scipy.stats import norm

    a, b = np.array([0.2, 0.3, 0.1, np.nan, 0.25]), np.array([0.1, 0.1, 0.05, 0.1, 0.0])
    diff, low, high, p = difference_test(0.22, 0.08, a, b)
    se = np.std([0.1, 0.2, 0.05, 0.25], ddof=1)  # the NaN resample is left out
    assert diff == pytest.approx(0.14)
    assert (low, high) == pytest.approx((0.14 - 1.959964 * se, 0.14 + 1.959964 * se), abs=1e-6)
    assert p == pytest.approx(2 * norm.sf(0.14 / se))
    assert difference_test(0.1, 0.1, [0.1, 0.1], [0.1, 0.1])[3] == 1.0  # nothing moved, no difference
    assert math.isnan(difference_test(0.1, 0.0, [0.1], [0.0])[3])
    # resamples that never vary measure no spread: no Wald p of 0, the percentile p with its floor instead
    assert difference_test(1.0, 0.0, [1.0] * 199, [0.0] * 199)[1:] == (1.0, 1.0, pytest.approx(2 / 200))
    assert wald_test(1e-17, [0.0, 0.0, 0.0])[2] == 1.0  # rounding noise is no effect


def two_models(n, true_ais, rng, resamples=300, base=0.7, gain=0.05):
    """One benchmark's n items scored by two models that share the items' difficulty (each item right with
    probability p_i in both originals); each model's ablation loses right items and gains wrong ones at the rates
    that make its population AIS true_ais[m]. Returns the two point AIS and their joint resamples, drawn by one
    generator seed per model pair as analyses.joint_draws does (the same item indices in both)."""
    difficulty = rng.beta(base * 4, (1 - base) * 4, n)
    seed = int(rng.integers(1 << 30))
    points, draws = [], []
    for ais in true_ais:
        original = (rng.random(n) < difficulty).astype(float)
        lose = ais + gain * (1 - base) / base
        u = rng.random(n)
        ablated = np.where(original == 1, (u >= lose).astype(float), (u < gain).astype(float))
        points.append(1 - ablated.mean() / original.mean())
        resampled, _, _ = breadth_bootstrap(original, ablated[None], resamples, np.random.default_rng(seed))
        draws.append(resampled[0])
    return points, draws


@pytest.mark.parametrize("n", [100, 1000])
def test_the_difference_test_keeps_its_level_and_its_interval_covers(n):
    """Over 400 simulated pairs of models per n: with equal true AIS (0.12) the paired difference test rejects at
    most about 5% and its interval covers 0; with 0.3 against 0.1 the interval covers 0.2. Comparing the two
    models' stars instead (each AIS's own 95% interval excluding 0 in one model and not the other) is no test of
    the difference: it says "differs" far more often than 5% when nothing differs."""
    rng = np.random.default_rng(n)
    for truth in ((0.12, 0.12), (0.3, 0.1)):
        rejected, covered, star_differs = [], [], []
        for _ in range(400):
            (a, b), (draws_a, draws_b) = two_models(n, truth, rng)
            diff, low, high, p = difference_test(a, b, draws_a, draws_b)
            rejected.append(p < 0.05)
            covered.append(low <= truth[0] - truth[1] <= high)
            star_differs.append((np.quantile(draws_a, 0.025) > 0) != (np.quantile(draws_b, 0.025) > 0))
        print(
            f"n {n}, true AIS {truth}: rejects {np.mean(rejected):.3f}, covers {np.mean(covered):.3f}, "
            f"stars differ {np.mean(star_differs):.3f}"
        )
        assert np.mean(covered) >= 0.93
        if truth[0] == truth[1]:
            assert np.mean(rejected) <= 0.07
            if n == 100:
                assert np.mean(star_differs) > 0.2  # what reading two columns of stars would have claimed
        else:
            assert np.mean(rejected) >= (0.5 if n == 100 else 0.95)


@pytest.mark.parametrize("n", [100, 1000])
def test_the_wald_test_of_a_specificity_keeps_its_level(n):
    """Specificity rows (AIS on the own split minus the mean AIS on two other splits, each split resampled on its
    own) tested by wald_test over 400 simulated datasets where the region hurts every split alike (true specificity
    0): rejects about 5%; where it hurts its own split more (true specificity 0.15) its interval covers 0.15."""
    from benchprof.stats.impact import specificity_score
    from benchprof.stats.resampling import bootstrap_ais

    rng = np.random.default_rng(n + 5)
    for own_extra in (0.0, 0.15):
        rejected, covered = [], []
        for _ in range(400):
            estimates, draws = [], []
            for split in range(3):
                original = (rng.random(n) < 0.7).astype(float)
                lose = 0.1 + (own_extra if split == 0 else 0.0)
                ablated = np.where(original == 1, rng.random(n) >= lose, rng.random(n) < 0.0).astype(float)
                estimates.append(1 - ablated.mean() / original.mean())
                draws.append(bootstrap_ais(original, ablated[None], 300, rng)[0])
            estimate = float(specificity_score(estimates[0], estimates[1:]))
            low, high, p = wald_test(estimate, specificity_score(draws[0], draws[1:]))
            rejected.append(p < 0.05)
            covered.append(low <= own_extra <= high)
        print(f"n {n}, true specificity {own_extra}: rejects {np.mean(rejected):.3f}, covers {np.mean(covered):.3f}")
        assert np.mean(covered) >= 0.93
        if own_extra == 0:
            assert 0.02 <= np.mean(rejected) <= 0.075
