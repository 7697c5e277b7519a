"""Power of the paired tests: arrays in, numbers out; no files, no plots.

The minimum detectable AIS of a 0/1 metric's McNemar test and the items it needs (Connor 1987; Lachin 1992), and
the minimum detectable AIS of a continuous metric's paired test (normal approximation; Hodges and Lehmann 1956).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike, NDArray


def _z(alpha: float, power: float) -> tuple[float, float]:
    from statistics import NormalDist

    if not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError("alpha and power must lie in (0, 1)")
    return NormalDist().inv_cdf(1 - alpha / 2), NormalDist().inv_cdf(power)


def minimum_detectable_ais(
    n: ArrayLike, discordance: ArrayLike, s_original: ArrayLike, alpha: float = 0.05, power: float = 0.8
) -> float | NDArray[np.float64]:
    """Smallest AIS the two-sided paired test of a 0/1 metric detects with `power` at level `alpha`, broadcast.

    n items, discordance ψ = share of items whose score differs between the runs (flips_lost + flips_gained) / n,
    s_original the original accuracy; alpha is the per-test level (pass the corrected one, e.g. alpha/m for a
    Bonferroni-safe figure under m tests). Normal approximation to McNemar's test with ψ fixed (Connor 1987,
    Biometrics 43:207–211; Lachin 1992): δ√n = z_{1−α/2}√ψ + z_power·√(ψ − δ²), solved for the accuracy drop δ:
    δ = u·√ψ with u = (z_a√n + z_b√(n − z_a² + z_b²)) / (n + z_b²). A drop δ needs at least δ of the items
    discordant, so where ψ < δ the formula is solved with ψ = δ instead, which gives δ = u² (one closed form:
    δ = u·max(√ψ, u)). Returns δ / s_original (> 1: undetectable); NaN where s_original ≤ 0.
    """
    import numpy as np

    z_a, z_b = _z(alpha, power)
    n = np.asarray(n, dtype=float)
    psi = np.asarray(discordance, dtype=float)
    s = np.asarray(s_original, dtype=float)
    u = (z_a * np.sqrt(n) + z_b * np.sqrt(np.maximum(n - z_a**2 + z_b**2, 0.0))) / (n + z_b**2)
    drop = u * np.maximum(np.sqrt(psi), u)
    shape = np.broadcast_shapes(drop.shape, s.shape)
    mde = np.full(shape, np.nan)
    np.divide(drop, s, out=mde, where=np.broadcast_to(s > 0, shape))
    return float(mde) if mde.ndim == 0 else mde


def items_needed(
    target_ais: float, discordance: float, s_original: float, alpha: float = 0.05, power: float = 0.8
) -> int:
    """Items the paired test of a 0/1 metric needs to detect AIS = `target_ais` with `power` at level `alpha`.

    Connor (1987): n = ⌈(z_{1−α/2}√ψ + z_power·√(ψ − δ²))² / δ²⌉ with the accuracy drop δ = target_ais·s_original
    and ψ = max(discordance, δ) (the inverse of `minimum_detectable_ais`). Discordance: the expected share of
    flipped items, e.g. the one observed at that k on a pilot evaluation.
    """
    z_a, z_b = _z(alpha, power)
    drop = target_ais * s_original
    if not 0 < drop <= 1:
        raise ValueError(f"items_needed: the accuracy drop target_ais × s_original = {drop} must lie in (0, 1]")
    psi = max(discordance, drop)
    return math.ceil((z_a * math.sqrt(psi) + z_b * math.sqrt(max(psi - drop**2, 0.0))) ** 2 / drop**2)


def minimum_detectable_ais_continuous(
    n: ArrayLike, sd_difference: ArrayLike, s_original: ArrayLike, alpha: float = 0.05, power: float = 0.8
) -> float | NDArray[np.float64]:
    """Smallest AIS a two-sided paired test of a continuous per-item metric (p_correct) detects, broadcast.

    Normal approximation to the paired t-test, the large-sample form of stats.paired.mean_difference_p:
    δ = (z_{1−α/2} + z_power)·sd_difference/√n, with sd_difference the standard deviation of the per-item
    differences original − ablated. Returns δ / s_original; NaN where s_original ≤ 0.
    """
    import numpy as np

    z_a, z_b = _z(alpha, power)
    drop = (z_a + z_b) * np.asarray(sd_difference, dtype=float) / np.sqrt(np.asarray(n, dtype=float))
    s = np.asarray(s_original, dtype=float)
    shape = np.broadcast_shapes(drop.shape, s.shape)
    mde = np.full(shape, np.nan)
    np.divide(drop, s, out=mde, where=np.broadcast_to(s > 0, shape))
    return float(mde) if mde.ndim == 0 else mde


def minimum_detectable_beyond_control(spread: float, draws: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest AIS beyond the mean of D control regions (top − placebo, top − random) that stats.control's
    predictive t test detects with `power` at the two-sided level `alpha` (pass the corrected one).

    The control regions' AIS are D exchangeable normal values with sd `spread`, the top region one more shifted by
    δ: t = (top − mean)/(s·√(1 + 1/D)) is then noncentral t with D − 1 degrees of freedom and noncentrality
    δ/(spread·√(1 + 1/D)), and δ solves P(|t| > t_{1−α/2}) = power. What the comparison with the control regions
    could have seen where nothing is claimed. NaN with fewer than 3 draws or no spread.
    """
    from scipy import optimize, stats

    if draws < 3 or not spread > 0:
        return math.nan
    df, scale = draws - 1, spread * math.sqrt(1 + 1 / draws)
    critical = float(stats.t.ppf(1 - alpha / 2, df))

    def shortfall(delta: float) -> float:
        ncp = delta / scale
        wrong_side = float(stats.nct.cdf(-critical, df, ncp))  # below 1e-7 where scipy gives NaN: nothing
        return float(stats.nct.sf(critical, df, ncp)) + (0.0 if math.isnan(wrong_side) else wrong_side) - power

    high = scale
    while shortfall(high) < 0:
        high *= 2
    return float(optimize.brentq(shortfall, 0.0, high, xtol=1e-10 * scale))
