"""Tests of benchprof/stats/power.py: the minimum detectable AIS has the stated power in simulation, and its
formula's limits."""

import math

import numpy as np
import pytest

from benchprof.stats.paired import mcnemar_p, mean_difference_p
from benchprof.stats.power import items_needed, minimum_detectable_ais, minimum_detectable_ais_continuous


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
    pvals = mean_difference_p(diffs, np.zeros(n))
    power = np.mean(pvals < alpha)
    print(f"continuous MDE {mde:.4f}: empirical power {power:.3f}")
    assert 0.7 <= power <= 0.9
