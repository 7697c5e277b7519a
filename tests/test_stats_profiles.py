"""Tests of benchprof/stats/profiles.py: the entropy of the positive AIS mass, the count above the threshold, the
similarity of two profiles and the joint bootstrap, against hand computations; the count interval by simulation."""

import math

import numpy as np
import pytest

from benchprof.stats.profiles import breadth_bootstrap, count_above, positive_mass_entropy, profile_similarity
from benchprof.stats.resampling import percentile_ci


def test_count_above_counts_abilities_over_the_threshold():
    assert count_above([0.3, 0.05, 0.06, -0.2, np.nan], 0.05) == 2  # strictly above; NaN does not count
    counts = count_above([[0.1, 0.2, 0.0], [np.nan] * 3, [0.06, np.nan, 0.07]], 0.05)
    assert counts[0] == 2 and np.isnan(counts[1]) and counts[2] == 2


def test_positive_mass_entropy_by_hand():
    # mass 0.3 and 0.1 over 4 abilities with an AIS: shares 3/4 and 1/4
    h = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    normalised, effective = positive_mass_entropy([0.3, 0.1, -0.2, 0.0])
    assert float(normalised) == pytest.approx(h / math.log(4))
    assert float(effective) == pytest.approx(math.exp(h))
    # a NaN ability is left out of A; rows are resamples
    normalised, effective = positive_mass_entropy([[0.3, 0.1, np.nan], [0.2, 0.2, 0.2], [0.5, -0.1, 0.0]])
    assert normalised == pytest.approx([h / math.log(2), 1.0, 0.0])
    assert effective == pytest.approx([math.exp(h), 3.0, 1.0])
    # no positive mass, or a resample without any AIS: undefined
    normalised, effective = positive_mass_entropy([[-0.1, 0.0, -0.3], [np.nan] * 3])
    assert np.isnan(normalised).all() and np.isnan(effective).all()


def test_profile_similarity_by_hand():
    x, y = [0.1, 0.2, 0.2, 0.5], [0.4, 0.3, 0.1, 0.2]
    cosine, rho = profile_similarity(x, y)
    assert float(cosine) == pytest.approx(0.22 / math.sqrt(0.34 * 0.30))
    # average ranks x: 1, 2.5, 2.5, 4; y: 4, 3, 1, 2; centred products sum to -3, squares 4.5 and 5
    assert float(rho) == pytest.approx(-3 / math.sqrt(4.5 * 5))
    cosine, rho = profile_similarity([[1, 2, 3], [1, 0, 0], [0, 0, 0]], [[2, 4, 6], [0, 1, 0], [1, 2, 3]])
    assert cosine[:2] == pytest.approx([1.0, 0.0]) and np.isnan(cosine[2])  # a zero vector has no direction
    assert rho[:2] == pytest.approx([1.0, -0.5]) and np.isnan(rho[2])  # [1, 0, 0] vs [0, 1, 0]: ties; constant


def test_breadth_bootstrap_is_the_per_cell_bootstrap_on_shared_draws():
    """One generator for every ability: each row is bootstrap_ais of that ability alone on the same draws."""
    from benchprof.stats.resampling import bootstrap_ais

    rng = np.random.default_rng(3)
    original = rng.integers(0, 2, size=50).astype(float)
    ablated = np.array([np.where(rng.random(50) < p, 0.0, original) for p in (0.5, 0.1, 0.0)])
    ais, normalised, effective = breadth_bootstrap(original, ablated, 200, np.random.default_rng(9))
    for i in range(3):
        alone = bootstrap_ais(original, ablated[i], 200, np.random.default_rng(9))
        np.testing.assert_allclose(ais[i], alone[0])
    assert np.all(ais[2] == 0)  # an ablation that changes nothing has AIS 0 in every resample
    expected = positive_mass_entropy(ais.T)
    np.testing.assert_allclose(normalised, expected[0])
    np.testing.assert_allclose(effective, expected[1])


def simulated_count_interval(true_ais, n, rng, resamples=400, gain=0.05, base=0.7):
    """One dataset of n items: the original right with probability `base`; each ability's ablated run loses a right
    item and gains a wrong one at the rates that make its population AIS `true_ais[a]`; returns the count-above
    interval breadth() reports (percentile interval of the joint resamples, widened to whole abilities)."""
    true_ais = np.asarray(true_ais)
    lose = true_ais + gain * (1 - base) / base
    original = (rng.random(n) < base).astype(float)
    u = rng.random((len(true_ais), n))
    ablated = np.where(original == 1, (u >= lose[:, None]).astype(float), (u < gain).astype(float))
    ais, _, _ = breadth_bootstrap(original, ablated, resamples, rng)
    low, high = percentile_ci(count_above(ais.T, 0.05))
    return math.floor(low), math.ceil(high)


@pytest.mark.parametrize(
    ("true_ais", "n", "max_width"),
    [
        ([-0.02, 0.0, 0.1, 0.2, 0.3], 100, 2.0),
        ([0.0, 0.02, 0.08, 0.15, 0.3], 100, 3.0),
        ([0.04, 0.06, 0.2, 0.3, 0.0], 100, 3.0),
        ([-0.02, 0.0, 0.1, 0.2, 0.3], 1000, 0.25),  # every ability at least 2 standard errors from 0.05
        ([0.04, 0.06, 0.2, 0.3, 0.0], 1000, 2.0),  # two abilities 0.01 from the threshold
    ],
)
def test_the_count_above_interval_covers_the_true_count(true_ais, n, max_width):
    """n_above's interval (benchmarks.csv) over 200 simulated datasets with a known profile: it holds the true
    number of abilities above the ribbon threshold in at least 93% of them, and narrows to one number where every
    ability is clearly on one side of the threshold (mean width <= max_width)."""
    rng = np.random.default_rng(int(n + 100 * sum(true_ais)))
    truth = int((np.asarray(true_ais) > 0.05).sum())
    intervals = [simulated_count_interval(true_ais, n, rng) for _ in range(200)]
    coverage = np.mean([low <= truth <= high for low, high in intervals])
    width = np.mean([high - low for low, high in intervals])
    print(f"n {n}, AIS {true_ais}: coverage {coverage:.3f}, mean width {width:.2f}")
    assert coverage >= 0.93
    assert width <= max_width
