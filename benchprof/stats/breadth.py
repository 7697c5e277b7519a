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
measured without error; breadth measured with item noise flattens the line, which docs/statistics.md measures.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

MIN_FIT = 4  # regions a line is fitted on (two parameters and a spread need more than three)


@dataclass(frozen=True)
class BreadthResidual:
    """One region's answer: its residual against the line of the other groups' regions, and the one-sided p."""

    residual: float  # y − (a + b·x), the line fitted without the region's group
    predicted: float  # a + b·x
    p_value: float  # one-sided, H1: the region lowers the benchmark more than its breadth predicts
    fitted_on: int  # regions of the other groups the line used


def breadth_residuals(
    y: Sequence[float], x: Sequence[float], groups: Sequence[Hashable] | None = None
) -> list[BreadthResidual | None]:
    """Each region's residual and one-sided p against the line y = a + b·x fitted on the regions of the other
    groups (`groups`: one label per region, e.g. its ability; default each region its own). None for a region
    whose y or x is NaN, or whose line has fewer than MIN_FIT finite regions, or no spread in x."""
    from scipy import stats

    labels = list(range(len(y))) if groups is None else list(groups)
    out: list[BreadthResidual | None] = []
    for i, (yi, xi) in enumerate(zip(y, x, strict=True)):
        rest = [
            (float(y[j]), float(x[j]))
            for j in range(len(y))
            if labels[j] != labels[i] and not math.isnan(y[j]) and not math.isnan(x[j])
        ]
        m = len(rest)
        if math.isnan(yi) or math.isnan(xi) or m < MIN_FIT:
            out.append(None)
            continue
        x_mean = sum(xj for _, xj in rest) / m
        y_mean = sum(yj for yj, _ in rest) / m
        sxx = sum((xj - x_mean) ** 2 for _, xj in rest)
        if sxx <= 0:
            out.append(None)
            continue
        slope = sum((xj - x_mean) * (yj - y_mean) for yj, xj in rest) / sxx
        intercept = y_mean - slope * x_mean
        s2 = sum((yj - intercept - slope * xj) ** 2 for yj, xj in rest) / (m - 2)
        predicted = intercept + slope * float(xi)
        residual = float(yi) - predicted
        scale = math.sqrt(s2 * (1 + 1 / m + (float(xi) - x_mean) ** 2 / sxx))
        if scale == 0:
            p = 0.0 if residual > 0 else 1.0
        else:
            p = float(stats.t.sf(residual / scale, m - 2))
        out.append(BreadthResidual(residual, predicted, p, m))
    return out
