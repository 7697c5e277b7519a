"""Statistics over a benchmark's ability profile (its AIS vector over the abilities): arrays in, numbers out.

Breadth: how evenly the positive AIS mass spreads (normalised entropy, effective number of abilities; Hill 1973)
and how many abilities are above the paper's ribbon threshold, with their joint bootstrap over the items; the
similarity of two profiles (cosine, Spearman's ρ; Spearman 1904). No files, no plots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from benchprof.stats.resampling import bootstrap_ais

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike, NDArray


def positive_mass_entropy(ais: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """How evenly a benchmark's positive AIS mass spreads over the abilities, along the last axis (the abilities).

    The mass of ability a is w_a = max(AIS_a, 0) / Σ_b max(AIS_b, 0) over the A abilities with a finite AIS
    (NaN entries are left out; a whole slice of NaN, e.g. a bootstrap resample whose original mean was 0, gives NaN).
    Returns (H / log A, exp H) with the Shannon entropy H = −Σ w_a log w_a (0 log 0 = 0): the normalised entropy,
    0 when one ability holds all the positive mass and 1 when every ability holds the same share, and the effective
    number of abilities (Hill 1973, the exponential of the entropy; 1 to A). NaN where no AIS is positive; the
    normalised entropy is NaN where fewer than two abilities have an AIS. Leading axes (bootstrap resamples)
    broadcast: shape ais.shape[:-1] each.
    """
    import numpy as np

    ais = np.asarray(ais, dtype=float)
    finite = np.isfinite(ais)
    mass = np.where(finite, np.maximum(ais, 0.0), 0.0)
    total = mass.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = mass / total
        terms = np.where(share > 0, -share * np.log(np.where(share > 0, share, 1.0)), 0.0)
    entropy = terms.sum(axis=-1)
    n_abilities = finite.sum(axis=-1)
    defined = total[..., 0] > 0
    effective = np.where(defined, np.exp(entropy), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        normalised = np.where(defined & (n_abilities >= 2), entropy / np.log(np.maximum(n_abilities, 2)), np.nan)
    return normalised, effective


def count_above(ais: ArrayLike, threshold: float) -> NDArray[np.float64]:
    """How many abilities have AIS > `threshold` (the paper draws an ability -> benchmark ribbon where AIS > 0.05),
    along the last axis (the abilities); NaN entries do not count, and a slice of only NaN (a resample whose
    original mean was 0) gives NaN. Leading axes (bootstrap resamples) broadcast."""
    import numpy as np

    ais = np.asarray(ais, dtype=float)
    count = (np.nan_to_num(ais, nan=-np.inf) > threshold).sum(axis=-1).astype(float)
    return np.where(np.isfinite(ais).any(axis=-1), count, np.nan)


def breadth_bootstrap(
    original: ArrayLike,
    ablated: ArrayLike,
    resamples: int,
    rng: np.random.Generator,
    clusters: ArrayLike | None = None,
    strata: ArrayLike | None = None,
    sign: float = 1.0,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Joint bootstrap of one benchmark's ability profile: every ability's AIS on the same resamples of the items.

    original (n,): the original model's per-item scores on benchmark b; ablated (A, n): one row per ability, the model
    without that ability's top region at one k, the same n items in the same order (a row of NaN for an ability
    without per-item scores stays NaN). Each resample draws the items once (`bootstrap_ais`, with its clusters and
    strata) and applies the draw to the original and to every ability's run, so the A AISs of a resample are of one
    population of items and statistics over the abilities (the entropy, the similarity of two profiles) get intervals
    that keep the abilities' correlation. sign = −1 for a lower-is-better metric (AIS > 0 still means harm). One
    generator per (benchmark, k), independent of the per-cell intervals'. Returns (AIS (A, resamples), normalised
    entropy (resamples,), effective number of abilities (resamples,)) as `positive_mass_entropy` per resample.
    """
    import numpy as np

    ais = sign * bootstrap_ais(original, ablated, resamples, rng, clusters=clusters, strata=strata)
    normalised, effective = positive_mass_entropy(ais.T)
    return ais, np.asarray(normalised), np.asarray(effective)


def profile_similarity(x: ArrayLike, y: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Cosine similarity and Spearman rank correlation of two ability profiles, along the last axis (the abilities).

    x, y: AIS vectors over the same abilities in the same order, shape (..., A) broadcast against each other (one
    slice per bootstrap resample: pair resample r of x with resample r of y). cosine = x·y / (|x| |y|), the
    similarity of the ability mixtures as directions (1: proportional profiles; it counts the sign of each AIS);
    Spearman's ρ = Pearson correlation of the average ranks (ties share a rank), the agreement of the orderings of
    the abilities (Spearman 1904). NaN for a slice holding a NaN, a zero vector (cosine) or a constant one (ρ), or
    fewer than two abilities (cosine) / three (ρ). Returns two arrays of shape broadcast(x, y).shape[:-1].
    """
    import numpy as np
    from scipy.stats import rankdata

    x, y = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
    n_abilities = x.shape[-1]
    bad = np.isnan(x).any(axis=-1) | np.isnan(y).any(axis=-1)
    x0, y0 = np.where(bad[..., None], 0.0, x), np.where(bad[..., None], 0.0, y)
    norms = np.sqrt((x0 * x0).sum(axis=-1) * (y0 * y0).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        cosine = np.clip((x0 * y0).sum(axis=-1) / norms, -1.0, 1.0)
    cosine = np.where(bad | (norms == 0) | (n_abilities < 2), np.nan, cosine)
    rx = rankdata(x0, axis=-1) - (n_abilities + 1) / 2  # centred ranks
    ry = rankdata(y0, axis=-1) - (n_abilities + 1) / 2
    spread = np.sqrt((rx * rx).sum(axis=-1) * (ry * ry).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.clip((rx * ry).sum(axis=-1) / spread, -1.0, 1.0)
    rho = np.where(bad | (spread == 0) | (n_abilities < 3), np.nan, rho)
    return np.asarray(cosine), np.asarray(rho)
