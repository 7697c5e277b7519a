"""The Ability Impact Score and what is read beside it: arrays in, numbers out; no files, no plots.

AIS (impact_score; Kim et al. 2025) and AIS above chance, the control-adjusted AIS (top − random), region
specificity (specificity_score) and diagonal dominance of an AIS matrix; per-item scores (p_correct, the softmax of
lm-eval's option log-likelihoods) and the chance level with the test of the original score against it
(exact binomial, bounded as in Hoeffding 1956; Student's t, 1908).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike, NDArray


@overload
def impact_score(s_original: float, s_ablated: float) -> float: ...
@overload
def impact_score(s_original: ArrayLike, s_ablated: ArrayLike) -> float | NDArray[np.float64]: ...
def impact_score(s_original: ArrayLike, s_ablated: ArrayLike) -> float | NDArray[np.float64]:
    """AIS^a_b(k) = (s_b(θ) − s_b(θ without top_k^a)) / s_b(θ), the paper's Ability Impact Score.

    s_original, s_ablated: benchmark b's mean score over its documents (the population) before and after
    ability a's region is removed; floats or broadcast arrays (one value per bootstrap resample).
    NaN where s_b(θ) = 0, without a warning.
    """
    import numpy as np

    s_original = np.asarray(s_original, dtype=float)
    s_ablated = np.asarray(s_ablated, dtype=float)
    ais = np.full(np.broadcast_shapes(s_original.shape, s_ablated.shape), np.nan)
    np.divide(s_original - s_ablated, s_original, out=ais, where=np.broadcast_to(s_original != 0, ais.shape))
    return float(ais) if ais.ndim == 0 else ais


def ais_above_chance(s_original: ArrayLike, s_ablated: ArrayLike, chance: ArrayLike) -> float | NDArray[np.float64]:
    """AIS measured above chance: (s − s′) / (s − chance), the share of the above-chance score the ablation removes.

    Floats or broadcast arrays; NaN where s ≤ chance (a model at or below chance has no ability to remove), without
    a warning. With chance = 0 it is the paper's AIS for any positive s.
    """
    import numpy as np

    s = np.asarray(s_original, dtype=float)
    s_ablated = np.asarray(s_ablated, dtype=float)
    chance = np.asarray(chance, dtype=float)
    shape = np.broadcast_shapes(s.shape, s_ablated.shape, chance.shape)
    ais = np.full(shape, np.nan)
    np.divide(s - s_ablated, s - chance, out=ais, where=np.broadcast_to(s > chance, shape))
    return float(ais) if ais.ndim == 0 else ais


def ais_to_chance(s_original: ArrayLike, s_ablated: ArrayLike, chance: ArrayLike) -> float | NDArray[np.float64]:
    """AIS with removal counted down to chance only: (s − max(s′, chance)) / s.

    An ablated score below chance (0.373 → 0.137 at chance 0.25) means the region steers the model to wrong
    answers; the raw AIS reads that as more ability removed, this one stops at chance (here (0.373 − 0.25) / 0.373).
    Equal to the raw AIS wherever s′ ≥ chance. Floats or broadcast arrays; NaN where s ≤ chance (nothing above
    chance to remove) or s = 0, without a warning.
    """
    import numpy as np

    s = np.asarray(s_original, dtype=float)
    floor = np.maximum(np.asarray(s_ablated, dtype=float), np.asarray(chance, dtype=float))
    shape = np.broadcast_shapes(s.shape, floor.shape)
    ais = np.full(shape, np.nan)
    np.divide(s - floor, s, out=ais, where=np.broadcast_to((s > np.asarray(chance, dtype=float)) & (s != 0), shape))
    return float(ais) if ais.ndim == 0 else ais


def adjusted_ais(top_ais: float, control_ais: Sequence[float]) -> float:
    """The control-adjusted AIS (region "top-random"): AIS(top) − the mean AIS of the random draws of the same
    size (the pool of every ability's random regions at that k)."""
    import numpy as np

    return top_ais - float(np.mean(control_ais))


def specificity_score(own: ArrayLike, others: Sequence[ArrayLike]) -> NDArray[np.float64]:
    """spec_a = AIS_a(own split) − mean_{b≠a} AIS_a(b): how much more removing ability a's region hurts a's
    own test split than the other abilities' splits (the family: the ability splits of the config).

    Floats (a 0-d array back) or aligned arrays of bootstrap samples, one per split.
    """
    import numpy as np

    return np.asarray(own, dtype=float) - np.mean(np.asarray(others, dtype=float), axis=0)


def diagonal_dominance(matrix: Mapping[str, Mapping[str, float]]) -> dict[str, bool | None]:
    """Per row a of an AIS matrix (ability a's region removed; columns: the ability splits), whether the
    diagonal cell (a's own split) is strictly the largest of the row's finite values.

    None for a row whose own split, or every other split, has no finite value. No test: a count of
    dominant rows describes the point estimates only.
    """
    out: dict[str, bool | None] = {}
    for ability, row in matrix.items():
        values = {b: v for b, v in row.items() if not math.isnan(v)}
        if ability not in values or len(values) < 2:
            out[ability] = None
            continue
        out[ability] = all(values[ability] > v for b, v in values.items() if b != ability)
    return out


def _padded(rows: ArrayLike | Sequence[ArrayLike], fill: float) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """Items × options as one float array (ragged rows padded with `fill`) and each item's number of options."""
    import numpy as np

    if isinstance(rows, np.ndarray) and rows.ndim == 2:
        return rows.astype(float), np.full(rows.shape[0], rows.shape[1], dtype=np.intp)
    items = [np.asarray(row, dtype=float).ravel() for row in rows]  # type: ignore[union-attr]
    n_options = np.array([item.size for item in items], dtype=np.intp)
    out = np.full((len(items), int(n_options.max(initial=0))), fill)
    for i, item in enumerate(items):
        out[i, : item.size] = item
    return out, n_options


def p_correct(
    loglikelihoods: ArrayLike | Sequence[ArrayLike],
    label: ArrayLike,
    lengths: ArrayLike | Sequence[ArrayLike] | None = None,
) -> NDArray[np.float64]:
    """Per item, the probability the model gives the correct option: softmax of the options' log-likelihoods at `label`.

    loglikelihoods: one row of option log-likelihoods per item, as lm-eval logs them (`resps`), either an
    (items, options) array or a list of rows when items have different numbers of options; label: the correct
    option's index per item. Returns shape (items,); its mean is the expected accuracy of sampling an answer
    from the model's option distribution.

    lengths (same shape), for a metric that normalises by length (lm-eval's `acc_norm` divides each
    log-likelihood by `len(choice)` in characters, `acc_bytes` by UTF-8 bytes): each log-likelihood becomes
    ℓ_j · L̄ / L_j, the per-character log-likelihood put back on the scale of the item's mean option length L̄.
    Its argmax is the metric's choice (one positive factor L̄ for all of an item's options), so an item the
    metric counts wrong never has its gold option as the most probable; and where the options are equally
    long it is the raw softmax, the model's own confidence. (ℓ_j / L_j alone, without L̄, acts as a
    temperature of L̄ and squashes p_correct towards 1/#options: docs/statistics.md.)
    """
    import numpy as np

    ll, n_options = _padded(loglikelihoods, -np.inf)
    label = np.asarray(label, dtype=np.intp).ravel()
    if label.shape != (ll.shape[0],):
        raise ValueError(f"p_correct: {label.size} labels for {ll.shape[0]} items")
    if ll.shape[0] == 0:
        return np.zeros(0)
    if np.any((label < 0) | (label >= n_options)):
        raise ValueError("p_correct: a label is not the index of one of its item's options")
    if lengths is not None:
        length, length_options = _padded(lengths, 1.0)
        if length.shape != ll.shape or np.any(length_options != n_options):
            raise ValueError("p_correct: lengths do not have the shape of the log-likelihoods")
        if np.any(length <= 0):
            raise ValueError("p_correct: option lengths must be positive")
        valid = np.arange(ll.shape[1])[None, :] < n_options[:, None]
        mean_length = np.where(valid, length, 0.0).sum(axis=1, keepdims=True) / n_options[:, None]
        ll = ll / length * mean_length
    top = ll.max(axis=1, keepdims=True)  # shift for a stable log-sum-exp
    log_total = np.log(np.exp(ll - top).sum(axis=1)) + top[:, 0]
    return np.exp(ll[np.arange(ll.shape[0]), label] - log_total)


def chance_level(n_options: ArrayLike) -> float:
    """Expected accuracy of a uniform guess: the mean of 1/#options over the benchmark's items."""
    import numpy as np

    n_options = np.asarray(n_options, dtype=float).ravel()
    if n_options.size == 0 or np.any(n_options < 1):
        raise ValueError("chance_level: every item needs at least one option")
    return float(np.mean(1.0 / n_options))


def chance_test(scores: ArrayLike, chance: float) -> float:
    """One-sided p-value that the original model's mean per-item score is above `chance` (population: the items).

    0/1 scores (accuracy): exact binomial test, P(X ≥ successes) for X ~ Binom(n, chance). Where the items have
    different numbers of options, `chance` is their mean 1/#options and the binomial tail bounds the exact
    Poisson-binomial tail from above for any score a test could call significant (Hoeffding 1956, Theorem 4),
    so the test stays valid (conservative). Continuous scores (p_correct): one-sided one-sample t-test of the
    mean against `chance` (Student 1908); with hundreds of items the mean is close to normal. NaN for fewer than
    two items; a constant sample gets 0 when above chance and 1 otherwise.
    """
    import numpy as np
    from scipy import stats

    scores = np.asarray(scores, dtype=float).ravel()
    n = scores.size
    if n < 2 or np.any(np.isnan(scores)):
        return math.nan
    if np.all((scores == 0) | (scores == 1)):
        successes = int(scores.sum())
        return float(stats.binom.sf(successes - 1, n, chance))
    sd = float(scores.std(ddof=1))
    mean = float(scores.mean())
    if sd == 0:
        return 0.0 if mean > chance else 1.0
    t = (mean - chance) / (sd / math.sqrt(n))
    return float(stats.t.sf(t, n - 1))
