"""stats.breadth: each region's residual against the line of the other groups' regions equals a least-squares
prediction computed apart (matrix algebra, scipy's t), and its one-sided test holds its level over many datasets
in the situation the profile meets: every region's damage to a benchmark tracks its damage elsewhere."""

import math

import numpy as np
import pytest
from scipy import stats

from benchprof.stats.breadth import breadth_residuals


def reference(y, x, groups, i):
    """Region i's residual and one-sided p from ordinary least squares on the other groups' regions, with the
    prediction variance s² (1 + x0ᵀ (XᵀX)⁻¹ x0)."""
    keep = [j for j in range(len(y)) if groups[j] != groups[i]]
    design = np.column_stack([np.ones(len(keep)), np.asarray(x)[keep]])
    coef, *_ = np.linalg.lstsq(design, np.asarray(y)[keep], rcond=None)
    resid = np.asarray(y)[keep] - design @ coef
    df = len(keep) - 2
    s2 = float(resid @ resid) / df
    x0 = np.array([1.0, x[i]])
    var = s2 * (1 + x0 @ np.linalg.inv(design.T @ design) @ x0)
    e = y[i] - x0 @ coef
    return float(e), float(stats.t.sf(e / math.sqrt(var), df))


def test_residuals_equal_a_least_squares_prediction_computed_apart():
    rng = np.random.default_rng(5)
    x = rng.normal(0.1, 0.05, 24)
    y = 0.02 + 0.8 * x + rng.normal(0, 0.02, 24)
    groups = [i // 3 for i in range(24)]  # eight abilities, three selections each
    got = breadth_residuals(list(y), list(x), groups)
    for i, result in enumerate(got):
        assert result is not None and result.fitted_on == 21
        e, p = reference(y, x, groups, i)
        assert result.residual == pytest.approx(e, abs=1e-12) and result.p_value == pytest.approx(p, rel=1e-9)
    # one region per group: the externally studentized residual of the full fit, t = e / (s_(i) √(1 − h_ii))
    single = breadth_residuals(list(y), list(x))
    design = np.column_stack([np.ones(24), x])
    hat = design @ np.linalg.inv(design.T @ design) @ design.T
    full = y - hat @ y
    for i, result in enumerate(single):
        h = hat[i, i]
        s2_i = (full @ full - full[i] ** 2 / (1 - h)) / (24 - 3)
        t = full[i] / math.sqrt(s2_i * (1 - h))
        assert result is not None and result.p_value == pytest.approx(stats.t.sf(t, 21), rel=1e-9)


def test_a_region_without_values_or_a_line_too_short_gets_none():
    got = breadth_residuals([0.1, math.nan, 0.2, 0.3, 0.1, 0.2, 0.4], [0.1, 0.2, math.nan, 0.3, 0.2, 0.1, 0.3])
    assert got[1] is None and got[2] is None and got[0] is not None and got[0].fitted_on == 4
    assert breadth_residuals([0.1, 0.2, 0.3, 0.4], [0.1, 0.2, 0.3, 0.4]) == [None] * 4  # 3 left: too few
    assert breadth_residuals([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0.2] * 6) == [None] * 6  # no spread in x


@pytest.mark.parametrize(("reliability", "corrected"), [(1.0, False), (0.85, False), (0.85, True), (0.6, True)])
def test_the_one_sided_test_holds_its_level_where_damage_tracks_breadth(reliability, corrected):
    """4,000 profiles of eight abilities x three selections whose every top − random AIS on a benchmark is 0.6 x
    its breadth plus noise, breadth differing between abilities (and a little between selections): no region does
    more than its breadth predicts. The share of p < 0.05 over all regions, and for the broadest ability's regions
    (where a flattened line errs most), stays at 0.05 with the breadth exact. Breadth that carries item noise
    (reliability 0.85, about what six ability splits of 300 items give; 0.6, fewer items) flattens the line and
    over-claims the broadest regions unless each breadth's noise variance is given (x_var)."""
    rng = np.random.default_rng(66)
    datasets, all_p, broad_p = 4000, [], []
    groups = [i // 3 for i in range(24)]
    for _ in range(datasets):
        ability = rng.gamma(4.0, 0.02, 8)  # true breadth per ability: skewed, a few broad regions
        true = np.repeat(ability, 3) + rng.normal(0, 0.005, 24)
        noise_sd = float(np.std(true)) * math.sqrt(1 / reliability - 1)
        x = true + rng.normal(0, noise_sd, 24)
        y = 0.6 * true + rng.normal(0, 0.02, 24)
        got = breadth_residuals(list(y), list(x), groups, [noise_sd**2] * 24 if corrected else None)
        p = np.array([r.p_value for r in got if r is not None])
        all_p.append(p)
        broad_p.append(p[np.argmax(np.repeat(ability, 3))])
    rate, broad = float(np.mean(np.concatenate(all_p) < 0.05)), float(np.mean(np.array(broad_p) < 0.05))
    error = math.sqrt(0.05 * 0.95 / datasets)
    print(f"reliability {reliability}, corrected {corrected}: false positives {rate:.3f} over all regions, ", end="")
    print(f"{broad:.3f} broadest (+-{error:.3f})")
    assert rate <= 0.05 + 3 * error
    if reliability == 1.0 or (corrected and reliability >= 0.85):
        assert broad <= 0.05 + 3 * error
    elif corrected:  # measured 0.076 at reliability 0.6: the correction's own noise, said in docs/statistics.md
        assert broad <= 0.09
    else:  # the dilution the correction is for
        assert broad > 0.05 + 3 * error


def test_a_region_that_does_more_than_its_breadth_is_found():
    rng = np.random.default_rng(7)
    found = 0
    for _ in range(500):
        ability = rng.gamma(4.0, 0.02, 8)
        true = np.repeat(ability, 3)
        x = true + rng.normal(0, 0.01, 24)
        y = 0.6 * true + rng.normal(0, 0.02, 24)
        y[:3] += 0.1  # ability 0's three regions lower the benchmark 0.1 beyond their breadth
        got = breadth_residuals(list(y), list(x), [i // 3 for i in range(24)])
        found += sum(r is not None and r.p_value < 0.05 for r in got[:3]) >= 2
    assert found / 500 >= 0.9
