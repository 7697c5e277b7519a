"""Paired tests of a region against the original on the same items: arrays in, numbers out; no files, no plots.

Discordant pairs of 0/1 scores (flip_counts) and the exact McNemar test (McNemar 1947; exact form as in Fagerland,
Lydersen and Laake 2013), the Wilcoxon signed-rank test of continuous scores (Wilcoxon 1945), and paired_test,
which picks one of the two for a row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike, NDArray


def flip_counts(original: ArrayLike, ablated: ArrayLike) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Discordant pairs of paired 0/1 per-item scores, along the last axis (the items).

    Returns (flips_lost, flips_gained): items right in the original and wrong after ablation, and the reverse.
    `ablated` may carry leading axes (one row per region); `original` broadcasts against it.
    """
    import numpy as np

    original = np.asarray(original, dtype=float)
    ablated = np.asarray(ablated, dtype=float)
    for values in (original, ablated):
        if not np.all((values == 0) | (values == 1)):
            raise ValueError("flip_counts: per-item scores must be 0 or 1")
    lost = ((original == 1) & (ablated == 0)).sum(axis=-1)
    gained = ((original == 0) & (ablated == 1)).sum(axis=-1)
    return np.asarray(lost, dtype=np.int64), np.asarray(gained, dtype=np.int64)


def mcnemar_p(flips_lost: ArrayLike, flips_gained: ArrayLike) -> float | NDArray[np.float64]:
    """Exact two-sided McNemar p-value from the discordant counts b (lost) and c (gained), broadcast.

    p = min(1, 2·P(X ≤ min(b, c))) with X ~ Binom(b + c, 1/2): under "the ablation changes nothing" each
    discordant item is equally likely to be a loss or a gain (McNemar 1947; exact form as in Fagerland, Lydersen and
    Laake 2013, "The McNemar test for binary matched-pairs data"). p = 1 when b + c = 0.
    """
    import numpy as np
    from scipy import stats

    lost = np.asarray(flips_lost, dtype=np.int64)
    gained = np.asarray(flips_gained, dtype=np.int64)
    p = np.minimum(1.0, 2.0 * stats.binom.cdf(np.minimum(lost, gained), lost + gained, 0.5))
    p = np.where(lost + gained == 0, 1.0, p)
    return float(p) if p.ndim == 0 else p


def one_sided_p(p_two_sided: float, effect: float) -> float:
    """The one-sided p-value for "the effect is positive" from a symmetric two-sided test's p and the sign of
    the estimate: p/2 when the estimate is positive, 1 − p/2 otherwise.

    For the exact McNemar test with b lost > c gained items this is P(X ≥ b), X ~ Binom(b + c, 1/2), the exact
    one-sided test; a region that helps (AIS ≤ 0) can never pass as one that hurts."""
    import math

    if math.isnan(p_two_sided) or math.isnan(effect):
        return math.nan
    half = min(1.0, p_two_sided) / 2
    return half if effect > 0 else 1.0 - half


def mcnemar_exact(original: ArrayLike, ablated: ArrayLike) -> tuple[int, int, float]:
    """Exact McNemar test of one cell: paired 0/1 per-item scores of the original and the ablated model.

    Returns (flips_lost, flips_gained, p): right → wrong items, wrong → right items, and the two-sided exact p-value
    of `mcnemar_p`. The population is the items both runs scored, in the same order.
    """
    import numpy as np

    original = np.asarray(original, dtype=float)
    ablated = np.asarray(ablated, dtype=float)
    if original.ndim != 1 or original.shape != ablated.shape:
        raise ValueError(f"mcnemar_exact: needs two paired vectors, got shapes {original.shape} and {ablated.shape}")
    lost, gained = flip_counts(original, ablated)
    return int(lost), int(gained), float(mcnemar_p(lost, gained))


def signed_rank_p(
    original: ArrayLike, ablated: ArrayLike, clusters: ArrayLike | None = None
) -> float | NDArray[np.float64]:
    """Two-sided Wilcoxon signed-rank test that paired continuous per-item scores do not differ (p_correct rows).

    Under "the ablation changes nothing" the two scores of an item are exchangeable, so each difference
    d_i = original_i − ablated_i is as likely positive as negative: the signed-rank statistic's null distribution
    is that of random sign flips on the ranks of |d| (Wilcoxon 1945), exact for up to 50 non-zero differences
    without ties, normal with the tie correction beyond (scipy.stats.wilcoxon; zero differences dropped). Unlike a
    Monte Carlo sign-flip test its p-value is not floored at 1/(resamples + 1), which a Benjamini-Hochberg family
    of hundreds of rows needs. With `clusters` (one id per item) the test runs on the clusters' summed
    differences: items sharing a cluster are exchangeable only together. Items along the last axis; `ablated` may
    carry leading axes (one p per row). p = 1 where nothing differs.
    """
    import numpy as np
    from scipy import stats

    diff = np.asarray(original, dtype=float) - np.asarray(ablated, dtype=float)
    if np.isnan(diff).any():
        raise ValueError("signed_rank_p: per-item scores must not be NaN")
    shape = diff.shape[:-1]
    diff = diff.reshape(-1, diff.shape[-1])  # (rows, n)
    if clusters is not None:
        _, unit = np.unique(np.asarray(clusters).ravel(), return_inverse=True)
        if unit.shape != (diff.shape[1],):
            raise ValueError(f"signed_rank_p: {unit.size} cluster ids for {diff.shape[1]} items")
        diff = np.array([np.bincount(unit, weights=row) for row in diff]).reshape(diff.shape[0], -1)
    p = np.ones(diff.shape[0])
    for i, row in enumerate(diff):
        nonzero = row[row != 0]
        if nonzero.size:
            p[i] = float(stats.wilcoxon(nonzero).pvalue)
    p = p.reshape(shape)
    return float(p) if p.ndim == 0 else p


@dataclass(frozen=True)
class PairedTest:
    """The paired test of one region against the original on the same items (`paired_test`)."""

    p_value: float
    flips_lost: int | None  # 0/1 metrics: items the ablation made worse (right -> wrong, or 0 -> 1 for a loss)
    flips_gained: int | None  # 0/1 metrics: items it made better
    spread: float  # continuous metrics: sd of the per-item differences (for the minimum detectable AIS), else NaN


def paired_test(
    original: ArrayLike, ablated: ArrayLike, clusters: ArrayLike | None = None, lower_is_better: bool = False
) -> PairedTest:
    """Test "the ablation changes nothing" on paired per-item scores: exact McNemar (`mcnemar_p`) where both
    vectors are 0/1, else the Wilcoxon signed-rank test (`signed_rank_p`, on cluster sums with `clusters`).

    For a lower-is-better 0/1 metric (an error indicator) a 0 -> 1 change is the loss, so the flips swap.
    """
    import numpy as np

    original = np.asarray(original, dtype=float)
    ablated = np.asarray(ablated, dtype=float)
    if np.isin(original, (0.0, 1.0)).all() and np.isin(ablated, (0.0, 1.0)).all():
        lost, gained = (int(v) for v in flip_counts(original, ablated))
        if lower_is_better:
            lost, gained = gained, lost
        return PairedTest(float(mcnemar_p(lost, gained)), lost, gained, math.nan)
    spread = float(np.std(original - ablated, ddof=1)) if original.size > 1 else math.nan
    return PairedTest(float(signed_rank_p(original, ablated, clusters)), None, None, spread)
