"""Paired tests of a region against the original on the same items: arrays in, numbers out; no files, no plots.

Discordant pairs of 0/1 scores (flip_counts) and the exact McNemar test (McNemar 1947; exact form as in Fagerland,
Lydersen and Laake 2013) with its clustered form (Durkalski et al. 2003); the sign-flip test of the mean
difference of continuous scores, exact for few units and a paired t-test beyond; and paired_test, which picks
one for a row. Every test runs on the units the intervals resample (items, or clusters of items).
"""

from __future__ import annotations

import math
import warnings
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


EXACT_UNITS = 14  # up to this many non-zero unit differences the sign-flip test enumerates all 2^m patterns


def unit_differences(original: ArrayLike, ablated: ArrayLike, clusters: ArrayLike | None = None) -> NDArray[np.float64]:
    """The differences original − ablated summed per unit, along the last axis: per item, or with `clusters`
    (one id per item) per cluster, since items that share a cluster (a fact, a passage) are exchangeable only
    together. `ablated` may carry leading axes (one row per region)."""
    import numpy as np

    diff = np.asarray(original, dtype=float) - np.asarray(ablated, dtype=float)
    if np.isnan(diff).any():
        raise ValueError("unit_differences: per-item scores must not be NaN")
    if clusters is None:
        return diff
    _, unit = np.unique(np.asarray(clusters).ravel(), return_inverse=True)
    if unit.shape != (diff.shape[-1],):
        raise ValueError(f"unit_differences: {unit.size} cluster ids for {diff.shape[-1]} items")
    flat = diff.reshape(-1, diff.shape[-1])
    summed = np.array([np.bincount(unit, weights=row) for row in flat])
    return summed.reshape(*diff.shape[:-1], summed.shape[-1])


def sign_flip_exact_p(units: ArrayLike) -> float:
    """Two-sided exact sign-flip (permutation) p-value of the sum of paired differences (Fisher 1935, Pitman 1937).

    Under "the ablation changes nothing" the two scores of a unit are exchangeable, so every sign pattern of the
    unit differences is equally likely; p = the share of the 2^m patterns whose |sum| reaches the observed one
    (zero differences dropped: their sign changes nothing). The sum is the mean difference times the item count,
    so this tests the estimate the AIS is made of. Exact, but 2^m patterns: for m ≤ EXACT_UNITS.
    """
    import numpy as np

    d = np.asarray(units, dtype=float).ravel()
    d = d[d != 0]
    if d.size == 0:
        return 1.0
    if d.size > EXACT_UNITS:
        raise ValueError(f"sign_flip_exact_p: {d.size} non-zero units; enumerates at most {EXACT_UNITS}")
    patterns = 1 - 2 * ((np.arange(2**d.size)[:, None] >> np.arange(d.size)) & 1)  # every ±1 pattern, one per row
    sums = patterns @ d
    observed = abs(d.sum())
    return float(np.mean(np.abs(sums) >= observed - 1e-12 * max(1.0, observed)))


def sign_flip_integer_p(units: ArrayLike) -> float:
    """The exact two-sided sign-flip p-value of the sum of integer unit differences, at any number of units.

    The same test as `sign_flip_exact_p`, but the distribution of Σ ±|d_c| over all 2^m sign patterns is built
    by convolution over the integer sums (each unit adds ±|d_c| with probability 1/2), in O(m · Σ|d_c|) steps
    instead of 2^m. 0/1 items give integer cluster differences (lost − gained), so the clustered McNemar test is
    exact at every size; with one item per cluster every |d_c| is 1 and this is the exact McNemar test.
    """
    import numpy as np

    d = np.abs(np.asarray(units, dtype=float).ravel())
    d = d[d != 0]
    if d.size == 0:
        return 1.0
    if not np.all(d == np.round(d)):
        raise ValueError("sign_flip_integer_p: the unit differences must be whole numbers")
    sizes = d.astype(np.int64)
    total = int(sizes.sum())
    probabilities = np.zeros(2 * total + 1)  # index s + total holds P(Σ = s)
    probabilities[total] = 1.0
    for size in sizes:
        shifted = np.zeros_like(probabilities)
        shifted[: probabilities.size - size] += probabilities[size:]  # this unit's sign −: the sum drops by size
        shifted[size:] += probabilities[: probabilities.size - size]  # +: it rises by size
        probabilities = shifted / 2
    observed = abs(int(np.round(np.asarray(units, dtype=float).sum())))
    sums = np.arange(-total, total + 1)
    return float(min(1.0, probabilities[np.abs(sums) >= observed].sum()))


def mean_difference_p(
    original: ArrayLike, ablated: ArrayLike, clusters: ArrayLike | None = None
) -> float | NDArray[np.float64]:
    """Two-sided test that the mean paired difference is 0 (continuous rows: p_correct), on unit sums.

    The sign-flip test of the sum (`sign_flip_exact_p`) where at most EXACT_UNITS units differ; beyond, the
    paired t-test of the unit sums (Student 1908, the large-sample form of the same test; scipy.stats.ttest_1samp),
    whose p-value has no floor, as a family of hundreds of rows needs. Unlike the signed-rank test it replaced,
    it asks about the mean, which the AIS is: skewed differences with mean 0 are not a discovery.
    Items along the last axis; `ablated` may carry leading axes (one p per row). p = 1 where nothing differs.
    """
    return units_mean_p(unit_differences(original, ablated, clusters))


def units_mean_p(units: NDArray[np.float64]) -> float | NDArray[np.float64]:
    """mean_difference_p on unit differences already summed (unit_differences): one p per row of the last axis."""
    import numpy as np
    from scipy import stats

    shape = units.shape[:-1]
    flat = units.reshape(-1, units.shape[-1])
    p = np.ones(flat.shape[0])
    for i, row in enumerate(flat):
        nonzero = int(np.count_nonzero(row))
        if nonzero == 0:
            continue
        if nonzero <= EXACT_UNITS:
            p[i] = sign_flip_exact_p(row)
        elif np.ptp(row) == 0:  # every unit moved by the same amount: t is undefined; only 2 sign patterns reach it
            p[i] = 2.0 * 0.5**row.size
        else:
            p[i] = float(stats.ttest_1samp(row, 0.0).pvalue)
    shaped = p.reshape(shape)
    return float(shaped) if shaped.ndim == 0 else shaped


def mean_test_units(units: ArrayLike) -> int:
    """How many changed units the mean test of these unit differences needs to hold its level: the smallest n
    with n > 28 + 25·G1² (Sugden, Smith and Jones 2000, "Cochran's rule for simple random sampling", JRSS B
    62:787, refining Cochran 1977), G1 the adjusted sample skewness (scipy.stats.skew, bias=False) of the
    units that changed, 0 where it is undefined (fewer than three, or all alike). A sparse row is as small as its
    changes: its zeros say nothing about their shape. So at least 29 changed units, always.

    Skewed or sparse differences make the t-test reject a true null too often at small n (up to 0.10 at
    n = 100), and the sign-flip test asks about symmetry there, not the mean: a row with fewer changed units
    gets no mean test (paired_test). 0 when no unit changed (nothing to test: p = 1)."""
    import numpy as np
    from scipy import stats

    d = np.asarray(units, dtype=float).reshape(-1)
    d = d[d != 0]
    if d.size == 0:
        return 0
    with warnings.catch_warnings():  # changes alike but for rounding: scipy warns, the skew is NaN, read as 0
        warnings.simplefilter("ignore", RuntimeWarning)
        skew = float(stats.skew(d, bias=False)) if d.size >= 3 and np.ptp(d) > 0 else 0.0
    return math.floor(28 + 25 * (skew**2 if math.isfinite(skew) else 0.0)) + 1


def clustered_mcnemar_p(original: ArrayLike, ablated: ArrayLike, clusters: ArrayLike) -> float:
    """Two-sided McNemar test for 0/1 items in clusters: the exact sign-flip test of the cluster differences
    D_c = lost − gained in cluster c (`sign_flip_integer_p`), at every number of clusters.

    Items of one fact or passage flip together, so the plain McNemar test, which counts them as independent,
    rejects far too often. Durkalski et al.'s X² = (Σ D_c)² / Σ D_c² (2003, "Analysis of clustered matched-pair
    data", Stat Med 22:2417) is the normal approximation of this test and rejected up to 7.8% at a 5% level
    with 15–30 changed clusters; the exact test never exceeds its level. With one item per cluster it is the
    exact McNemar test.
    """
    return sign_flip_integer_p(unit_differences(original, ablated, clusters))


@dataclass(frozen=True)
class PairedTest:
    """The paired test of one region against the original on the same items (`paired_test`)."""

    p_value: float
    flips_lost: int | None  # 0/1 metrics: items the ablation made worse (right -> wrong, or 0 -> 1 for a loss)
    flips_gained: int | None  # 0/1 metrics: items it made better
    spread: float  # continuous metrics: sd of the per-item differences (for the minimum detectable AIS), else NaN
    needs_units: int = 0  # continuous metrics: the changed units a mean test needs (mean_test_units) if it has fewer


def paired_test(
    original: ArrayLike, ablated: ArrayLike, clusters: ArrayLike | None = None, lower_is_better: bool = False
) -> PairedTest:
    """Test "the ablation changes nothing" on paired per-item scores, respecting the clusters the intervals
    resample: where both vectors are 0/1, exact McNemar (`mcnemar_p`), or with `clusters` its clustered form
    (`clustered_mcnemar_p`); else the test of the mean difference (`mean_difference_p`, on cluster sums), where
    there are as many units as it needs (`mean_test_units`; else p is NaN and `needs_units` says how many).

    For a lower-is-better 0/1 metric (an error indicator) a 0 -> 1 change is the loss, so the flips swap.
    """
    import numpy as np

    original = np.asarray(original, dtype=float)
    ablated = np.asarray(ablated, dtype=float)
    if np.isin(original, (0.0, 1.0)).all() and np.isin(ablated, (0.0, 1.0)).all():
        lost, gained = (int(v) for v in flip_counts(original, ablated))
        p = mcnemar_p(lost, gained) if clusters is None else clustered_mcnemar_p(original, ablated, clusters)
        if lower_is_better:
            lost, gained = gained, lost
        return PairedTest(float(p), lost, gained, math.nan)
    spread = float(np.std(original - ablated, ddof=1)) if original.size > 1 else math.nan
    units = unit_differences(original, ablated, clusters)
    if np.count_nonzero(units) < (needed := mean_test_units(units)):  # too skewed for its size: no test, no star
        return PairedTest(math.nan, None, None, spread, needed)
    return PairedTest(float(units_mean_p(units)), None, None, spread)


def wilson_interval(successes: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval for a binomial proportion (Wilson 1927)."""
    from scipy import stats

    if n == 0:
        return 0.0, 1.0
    z = float(stats.norm.ppf(0.5 + level / 2))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def paired_difference_interval(original: ArrayLike, ablated: ArrayLike, level: float = 0.95) -> tuple[float, float]:
    """Newcombe's hybrid score interval for the difference of two paired proportions, p_original − p_ablated
    (Newcombe 1998, "Improved confidence intervals for the difference between binomial proportions based on
    paired data", Stat Med 17:2635, method 10): Wilson intervals of each proportion, combined with the phi
    correlation of the pairs. Unlike the percentile bootstrap, whose resamples of two flipped items can only
    move in steps of 1/n, it keeps its coverage when only a few items flip (tests/test_stats_paired.py).
    """
    import numpy as np

    original = np.asarray(original, dtype=float)
    ablated = np.asarray(ablated, dtype=float)
    n = original.size
    a = int(((original == 1) & (ablated == 1)).sum())  # right on both
    b = int(((original == 1) & (ablated == 0)).sum())  # lost
    c = int(((original == 0) & (ablated == 1)).sum())  # gained
    d = n - a - b - c
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson_interval(a + b, n, level)
    l2, u2 = wilson_interval(a + c, n, level)
    denominator = (a + b) * (c + d) * (a + c) * (b + d)
    phi = (a * d - b * c) / math.sqrt(denominator) if denominator > 0 else 0.0
    delta = p1 - p2
    low = delta - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    high = delta + math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return low, high
