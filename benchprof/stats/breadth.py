"""The breadth control: does a region lower a benchmark more than its damage to everything else predicts?

A region that breaks many things breaks any benchmark a little, and random regions of its size do not control for
that. Over the top regions of one profile at k (every ability's, every selection's), y_i is region i's top − random
AIS on benchmark B and x_i its breadth: its mean top − random AIS on the ability splits that are neither its own
ability's nor B. The line y = a + b·x over the regions says how much of B's loss a region's general damage
predicts; a region's claim is what is left. Each region is predicted from a line fitted *without its ability's
regions* (its other selections share its true effect, and would pull the line toward it), and its residual
e = y − (a + b·x) is tested against the prediction's own spread: t = e / (s·√(1 + 1/m + (x − x̄)² / Sxx)), m the
regions the line was fitted on, s their residual standard deviation, against Student's t with m − 2 degrees of
freedom (the prediction interval of a new observation; with one region per group, the externally studentized
residual). One-sided: the region does more than its breadth predicts. Exact under the normal linear model with x
measured without error; with each breadth's item variance given, the slope and the residual's spread are
corrected for it (breadth_residuals' x_var), as docs/statistics.md measures.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from numpy.typing import NDArray

MIN_FIT = 4  # regions a line is fitted on (two parameters and a spread need more than three)
MIN_RELIABILITY = 0.2  # the corrected slope never assumes breadth is more than 80% noise


@dataclass(frozen=True)
class BreadthResidual:
    """One region's answer: its residual against the line of the other groups' regions, and the one-sided p."""

    residual: float  # y − (a + b·x), the line fitted without the region's group
    predicted: float  # a + b·x
    p_value: float  # one-sided, H1: the region lowers the benchmark more than its breadth predicts
    fitted_on: int  # regions of the other groups the line used


def breadth_residuals(
    y: Sequence[float],
    x: Sequence[float],
    groups: Sequence[Hashable] | None = None,
    x_var: Sequence[float] | None = None,
) -> list[BreadthResidual | None]:
    """Each region's residual and one-sided p against the line y = a + b·x fitted on the regions of the other
    groups (`groups`: one label per region, e.g. its ability; default each region its own). None for a region
    whose y or x is NaN, or whose line has fewer than MIN_FIT finite regions, or no spread in x.

    `x_var`: each breadth's own measurement variance (its item noise). A breadth measured with noise flattens the
    least-squares line (regression dilution), so a broad region's loss is under-predicted and it is claimed too
    often; with `x_var` the slope is corrected by the method of moments (Fuller 1987, §1.2: Sxx less the noise's
    share, b = Sxy / (Sxx − (1 − 1/m)·Σv), the reliability floored at MIN_RELIABILITY), and the region's own
    residual carries its breadth's noise through the slope (variance σ²_e + b²·v_i, σ²_e the line's residual
    variance less b²·v̄ of the regions fitted)."""
    from scipy import stats

    labels = list(range(len(y))) if groups is None else list(groups)
    noise = [0.0] * len(y) if x_var is None else [float(v) for v in x_var]
    out: list[BreadthResidual | None] = []
    for i, (yi, xi) in enumerate(zip(y, x, strict=True)):
        rest = [
            (float(y[j]), float(x[j]), noise[j])
            for j in range(len(y))
            if labels[j] != labels[i] and not math.isnan(y[j]) and not math.isnan(x[j]) and not math.isnan(noise[j])
        ]
        m = len(rest)
        if math.isnan(yi) or math.isnan(xi) or math.isnan(noise[i]) or m < MIN_FIT:
            out.append(None)
            continue
        x_mean = sum(xj for _, xj, _ in rest) / m
        y_mean = sum(yj for yj, _, _ in rest) / m
        sxx = sum((xj - x_mean) ** 2 for _, xj, _ in rest)
        if sxx <= 0:
            out.append(None)
            continue
        mean_noise = sum(v for _, _, v in rest) / m
        true_sxx = max(sxx - (m - 1) * mean_noise, MIN_RELIABILITY * sxx)  # the spread of the true breadths
        slope = sum((xj - x_mean) * (yj - y_mean) for yj, xj, _ in rest) / true_sxx
        intercept = y_mean - slope * x_mean
        s2 = sum((yj - intercept - slope * xj) ** 2 for yj, xj, _ in rest) / (m - 2)
        residual_var = max(s2 - slope**2 * mean_noise, 0.0) + slope**2 * noise[i]
        predicted = intercept + slope * float(xi)
        residual = float(yi) - predicted
        scale = math.sqrt(residual_var + s2 * (1 / m + (float(xi) - x_mean) ** 2 / true_sxx))
        if scale == 0:
            p = 0.0 if residual > 0 else 1.0
        else:
            p = float(stats.t.sf(residual / scale, m - 2))
        out.append(BreadthResidual(residual, predicted, p, m))
    return out


def unshared_variance(damage: Sequence[NDArray]) -> list[float]:
    """The item noise of each region's breadth that spreads the breadths, for breadth_residuals' x_var.

    `damage`: one m × n array per split, row r region r's per-document contribution to its breadth on that split
    (its linearised top − random AIS per document, weighed by 1/the splits it averages; zeros where it does not
    average the split). Every region is scored on the same documents, so part of each breadth's noise (which items
    happen to be fragile) is shared: it moves all the breadths together and neither spreads them nor flattens the
    line. With C = Σ_s cov(D_s) / n_s the covariance of the breadths' errors, the sum of squares about the mean
    carries tr(H·C·H) of noise (H centres over the m regions; Fuller 1987, §1.2, with correlated errors); each
    region's share, diag(H·C·H) · m / (m − 1), is the variance of independent noise that spreads them as much."""
    import numpy as np

    m = damage[0].shape[0]
    covariance = sum((np.cov(d) / d.shape[1] for d in damage), np.zeros((m, m)))
    centre = np.eye(m) - 1.0 / m
    return [float(v) * m / (m - 1) for v in np.diag(centre @ covariance @ centre)]
