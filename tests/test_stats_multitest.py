"""Tests of benchprof/stats/multitest.py: Benjamini-Hochberg and Holm against hand computations and scipy, and the
false discovery rate on simulated null cells."""

import math

import numpy as np
import pytest

from benchprof.stats.multitest import bh_qvalues, holm
from benchprof.stats.paired import flip_counts, mcnemar_p, mean_difference_p


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

    # continuous per-item values, the test of the mean difference: calibrated raw, and BH keeps cells unflagged
    values = rng.beta(2, 2, (cells, 300))
    noise = rng.normal(0, 0.05, (cells, 300))
    pvals = mean_difference_p(values + noise, values - noise)
    print(
        f"mean-difference null: raw share {np.mean(pvals < alpha):.3f}, "
        f"after BH {np.mean(bh_qvalues(pvals) < alpha):.3f}"
    )
    assert 0.01 <= np.mean(pvals < alpha) <= 0.09
    assert np.mean(bh_qvalues(pvals) < alpha) <= alpha
