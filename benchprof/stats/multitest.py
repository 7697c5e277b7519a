"""Multiplicity corrections over a family of p-values: arrays in, numbers out; no files, no plots.

Benjamini–Hochberg q-values (Benjamini and Hochberg 1995; Benjamini and Yekutieli 2001) and Holm's step-down
adjusted p-values (Holm 1979), the same as statsmodels' `multipletests(method="fdr_bh")` and `"holm"`. Each
function's family is every non-NaN entry it is given.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike, NDArray


def _checked_pvals(pvals: ArrayLike, name: str) -> NDArray[np.float64]:
    import numpy as np

    p = np.asarray(pvals, dtype=float)
    finite = p[~np.isnan(p)]
    if np.any((finite < 0) | (finite > 1)):
        raise ValueError(f"{name}: p-values must lie in [0, 1]")
    return p


def bh_qvalues(pvals: ArrayLike) -> NDArray[np.float64]:
    """Benjamini–Hochberg adjusted p-values (q-values) over the family of every non-NaN entry of `pvals`.

    Step-up (Benjamini and Hochberg 1995): with the m p-values sorted, q_(i) = min_{j ≥ i} m·p_(j)/j, capped at 1;
    rejecting q < alpha controls the false discovery rate at alpha for independent or positively dependent tests
    (Benjamini and Yekutieli 2001). Same as statsmodels' `multipletests(method="fdr_bh")`. NaN entries (cells
    without a test) stay NaN and do not count in m. Any shape; returns the same shape.
    """
    import numpy as np

    p = _checked_pvals(pvals, "bh_qvalues")
    q = np.full(p.shape, np.nan)
    tested = ~np.isnan(p)
    m = int(tested.sum())
    if m == 0:
        return q
    order = np.argsort(p[tested], kind="stable")
    ranked = p[tested][order] * m / np.arange(1, m + 1)
    ranked = np.minimum(1.0, np.minimum.accumulate(ranked[::-1])[::-1])
    adjusted = np.empty(m)
    adjusted[order] = ranked
    q[tested] = adjusted
    return q


def holm(pvals: ArrayLike) -> NDArray[np.float64]:
    """Holm step-down adjusted p-values over the family of every non-NaN entry of `pvals`.

    With the m p-values sorted, adj_(i) = max_{j ≤ i} min(1, (m − j + 1)·p_(j)) (Holm 1979); rejecting adj < alpha
    controls the family-wise error rate at alpha under any dependence. For small pre-registered families (the
    demo's known-answer checks). Same as statsmodels' `multipletests(method="holm")`. NaN entries stay NaN and do
    not count in m. Any shape; returns the same shape.
    """
    import numpy as np

    p = _checked_pvals(pvals, "holm")
    adjusted_all = np.full(p.shape, np.nan)
    tested = ~np.isnan(p)
    m = int(tested.sum())
    if m == 0:
        return adjusted_all
    order = np.argsort(p[tested], kind="stable")
    ranked = np.minimum(1.0, np.maximum.accumulate(p[tested][order] * (m - np.arange(m))))
    adjusted = np.empty(m)
    adjusted[order] = ranked
    adjusted_all[tested] = adjusted
    return adjusted_all
