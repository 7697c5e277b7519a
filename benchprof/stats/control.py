"""The random control as a distribution: is a top region's AIS outside what random regions of its size do?

top − random compared with the mean of the pooled random draws alone tests "top equals the average random
region", which a top region that is just one more random draw fails as often as random regions differ from
each other (their region-level spread τ). The question a reader asks is predictive: would a random region of
this size do as much? So the top region is compared with the distribution of the D random draws, whose
spread (τ and each draw's own item noise together) is estimated from the draws themselves, with D − 1 degrees
of freedom for that estimate's uncertainty.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

MIN_DRAWS = 3  # fewer pooled random draws cannot estimate their spread: no interval, no test


@dataclass(frozen=True)
class ControlComparison:
    """`top_against_random`'s answer for one cell."""

    estimate: float  # AIS(top) − mean AIS(random draws)
    ci_low: float  # the 95% prediction interval of AIS(top) − AIS(a new random region)
    ci_high: float
    p_value: float  # two-sided, H0: the top region is one more draw of the random regions' distribution
    draws: int  # random draws with an AIS
    spread: float  # sd of the draws' AIS (τ and item noise together)


def top_against_random(
    top: float,
    random: Sequence[float],
    level: float = 0.95,
    top_var: float | None = None,
    random_vars: Sequence[float] | None = None,
    top_df: float = math.inf,
) -> ControlComparison | None:
    """Compare a top region's AIS with the AIS of D random regions of the same size (the pooled draws at k).

    The predictive t statistic (Student 1908; the prediction interval for a new observation, e.g. Geisser 1993):
    t = (AIS(top) − mean) / (s · √(1 + 1/D)), s the draws' standard deviation, against Student's t with D − 1
    degrees of freedom. Exact when the top region and the draws are exchangeable normal values, a shared
    component (the original run's item noise, common to every region's AIS) included: it cancels in both the
    difference and s. Its p-value has no floor (a bootstrap p stops at 2/(B + 1)). None with fewer than
    MIN_DRAWS finite draws: a pool that small cannot say how much random regions differ, and a test that
    ignored it would star a top region that is one more random draw. None, too, when every draw has the same
    AIS and no item noise is given: a spread of 0 says nothing of how far from them is far (it gave p = 0).

    s² holds the draws' region-level spread τ² and their own item noise v̄ (the mean of `random_vars`, each
    draw's bootstrap variance). A top region that flips many more items than a random one has more item noise
    (`top_var`, estimated on `top_df` degrees of freedom), which the comparison must carry too: the scale
    √(v_top + τ̂² + s²/D), τ̂² = max(0, s² − v̄), with Welch–Satterthwaite degrees of freedom (Satterthwaite
    1946). The row keeps the larger p-value and the wider interval of this and the exact predictive answer:
    never less cautious than the exact test, and covering when the top region is the noisier.
    """
    from scipy import stats

    values = [float(v) for v in random if not math.isnan(v)]
    if math.isnan(top) or len(values) < MIN_DRAWS:
        return None
    d = len(values)
    mean = sum(values) / d
    spread = math.sqrt(sum((v - mean) ** 2 for v in values) / (d - 1))
    estimate = top - mean

    def answer(scale: float, df: float) -> tuple[float, float]:
        """(p, half-width of the interval) for the scale on df degrees of freedom."""
        return float(2 * stats.t.sf(abs(estimate) / scale, df)), float(stats.t.ppf(0.5 + level / 2, df)) * scale

    noise = [float(v) for v in (random_vars if random_vars is not None else []) if not math.isnan(v)]
    top_noise = top_var if top_var is not None and not math.isnan(top_var) and noise else None
    answers = []
    if spread > 0:
        answers.append(answer(spread * math.sqrt(1 + 1 / d), d - 1))
    if top_noise is not None:
        control = max(0.0, spread**2 - sum(noise) / len(noise)) + spread**2 / d  # τ̂² + s²/D, on D − 1 df
        total = top_noise + control
        terms = top_noise**2 / top_df + control**2 / (d - 1)
        if total > 0:  # Welch–Satterthwaite; only the top's item noise, on infinite df, is the normal
            answers.append(answer(math.sqrt(total), total**2 / terms if terms > 0 else math.inf))
    if not answers:  # draws that all did the same and no item noise: nothing says how far is far; no test
        return None
    p, half = max(a[0] for a in answers), max(a[1] for a in answers)
    return ControlComparison(estimate, estimate - half, estimate + half, p, d, spread)


def null_calibration(random: Sequence[float], alpha: float = 0.05) -> tuple[list[float], float] | None:
    """Each random draw tested, as a top region is (`top_against_random`), against the other draws (leave-one-out).

    The draws are exchangeable, so the share of p-values below `alpha` estimates the test's false-positive rate
    on this pool: near alpha when the normal model of the draws holds, above it when one draw is far outside the
    others (a heavy tail the t test does not expect). Returns (p-values, share), or None when leaving one out
    leaves fewer than MIN_DRAWS.
    """
    values = [float(v) for v in random if not math.isnan(v)]
    if len(values) - 1 < MIN_DRAWS:
        return None
    p_values = []
    for d, value in enumerate(values):
        comparison = top_against_random(value, values[:d] + values[d + 1 :])
        if comparison is not None:  # None where the others all did the same: no test, as for a top region
            p_values.append(comparison.p_value)
    return (p_values, sum(p < alpha for p in p_values) / len(p_values)) if p_values else None


@dataclass(frozen=True)
class SelectionsComparison:
    """`selections_against_control`'s answer for one (ability, k, benchmark)."""

    estimate: float  # mean AIS over the selections' regions − mean AIS of the control draws
    ci_low: float  # its interval: items, selections and control draws all resampled in the population they come from
    ci_high: float
    p_value: float  # two-sided, H0: the selections' regions do, on average, what control regions do
    df: float  # degrees of freedom of the t: the fewest of the variance's parts present


def selections_against_control(
    top: Sequence[float],
    control: Sequence[float],
    item_var: float,
    item_df: float,
    top_noise: float,
    control_noise: float,
    level: float = 0.95,
) -> SelectionsComparison | None:
    """What regions chosen by a procedure do beyond control regions, averaged over independent selections.

    top: the AIS of the region each of S ≥ 2 independent selections chose (each from its own sample of the data the
    procedure scores); control: the AIS of the D control regions (MIN_DRAWS or more). The estimate is mean(top) −
    mean(control), and its variance has three parts (a variance-components sum, e.g. Searle, Casella and McCulloch
    1992):
    - `item_var`: the bootstrap variance of that difference over the items (clusters and strata as the
      intervals draw them) with every region fixed, on `item_df` degrees of freedom (the units drawn − 1);
    - τ̂²_top / S: how much another selection's region would differ, τ̂²_top = max(0, s²_top −
      `top_noise`), s²_top the selections' sample variance and `top_noise` the part of it that item noise alone
      makes (the bootstrap's mean within-resample variance across the selections: the noise each region's flips
      do not share, already inside `item_var`); on S − 1 degrees of freedom;
    - τ̂²_control / D, the same for the control draws, on D − 1.
    Student's t on the fewest degrees of freedom of the parts present (the lower bound of Satterthwaite's, 1946):
    with three selections whose spread exceeds item noise, t on 2. Satterthwaite's own degrees of freedom covered
    0.91 at 95% in the simulation (tests/test_selections_interval.py), since a small s²_top also raised them;
    the bound covers 0.95–0.96. The interval is wide where the selections disagree, as it should be. None with
    fewer than two selections or MIN_DRAWS control draws, or a zero scale.
    """
    from scipy import stats

    tops = [float(v) for v in top if not math.isnan(v)]
    controls = [float(v) for v in control if not math.isnan(v)]
    if len(tops) < 2 or len(controls) < MIN_DRAWS or math.isnan(item_var):
        return None
    estimate = sum(tops) / len(tops) - sum(controls) / len(controls)
    terms = [(item_var, item_df)]
    for values, noise in ((tops, top_noise), (controls, control_noise)):
        n, spread = len(values), statistics.variance(values)  # exact: equal values give 0, never a rounding error
        terms.append((max(0.0, spread - (0.0 if math.isnan(noise) else noise)) / n, n - 1))
    total = sum(v for v, _ in terms)
    if total <= 0:
        return None
    df = min(df for v, df in terms if v > 0)  # the least-known part sets the t (Satterthwaite's was lenient)
    scale = math.sqrt(total)
    half = float(stats.t.ppf(0.5 + level / 2, df)) * scale
    p = float(2 * stats.t.sf(abs(estimate) / scale, df))
    return SelectionsComparison(estimate, estimate - half, estimate + half, p, df)
