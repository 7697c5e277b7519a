"""Recovery metrics: how well a region found by a score recovers a known (planted) set of weights.

Pure functions on regions ({parameter name: sorted flat indices}) and score vectors; no files.

- weight level: precision |T ∩ R| / |T| and recall |T ∩ R| / |R| of a top region T against the planted
  set R (`precision_recall`);
- neuron level (neuron j of a layer: row j of gate_proj/up_proj, column j of down_proj): the neurons
  a region touches (holds at least one weight of), their precision and recall against R's neurons
  (`neuron_set`, `set_precision_recall`); and the |R| neurons holding most of the region's weights
  against R's neurons (`neuron_counts`, `top_neurons`; precision = recall, as the sets are equal in size);
- rank: AUROC of R's weights in the score order over all eligible weights, the probability that a
  random planted weight scores above a random other one, ties counting 1/2 (`auroc`; 0.5 = chance,
  1 = every planted weight ranks above every other);
- overlap between abilities' regions: Jaccard, against chance (benchprof.stages.overlap's formulas);
- placement: the share of a region in tensors where R has no weight (`share_outside`); a selection
  that spreads the region evenly over tensors (extract's `selection: chunked`) fixes it at those
  tensors' share of the eligible weights.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import torch
    from numpy.typing import ArrayLike, NDArray

    from benchprof.core.regions import Region

Neuron = tuple[str, int]  # (the MLP's prefix, e.g. 'model.layers.1.mlp', neuron index)


def shared_count(a: Region, b: Region) -> int:
    """Weights in both regions."""
    import torch

    shared = 0
    for name, idx in a.items():
        if name in b and idx.numel() and b[name].numel():
            shared += int(torch.isin(idx, b[name]).sum())
    return shared


def size(region: Region) -> int:
    """Weights in a region."""
    return sum(int(v.numel()) for v in region.values())


def precision_recall(selected: Region, truth: Region) -> tuple[float, float]:
    """Weight-level (precision, recall) of `selected` against `truth`; NaN for an empty denominator."""
    shared = shared_count(selected, truth)
    n_sel, n_true = size(selected), size(truth)
    return (shared / n_sel if n_sel else float("nan"), shared / n_true if n_true else float("nan"))


def share_outside(selected: Region, truth: Region) -> float:
    """Share of `selected`'s weights in tensors holding no weight of `truth`; NaN for an empty `selected`."""
    n_sel = size(selected)
    outside = size({name: idx for name, idx in selected.items() if name not in truth or not truth[name].numel()})
    return outside / n_sel if n_sel else float("nan")


def neuron_set(region: Region, shapes: Mapping[str, Sequence[int]]) -> set[Neuron]:
    """The MLP neurons `region` touches: for '<p>.gate_proj.weight' / '<p>.up_proj.weight' (shape
    intermediate x hidden) a flat index i is neuron i // hidden, for '<p>.down_proj.weight' (hidden x
    intermediate) neuron i % intermediate; other parameters are ignored. `shapes`: parameter -> shape."""
    out: set[Neuron] = set()
    for name, idx in region.items():
        if not idx.numel():
            continue
        rows, cols = int(shapes[name][0]), int(shapes[name][1])
        if name.endswith((".gate_proj.weight", ".up_proj.weight")):
            ids = idx // cols
        elif name.endswith(".down_proj.weight"):
            ids = idx % cols
        else:
            continue
        del rows
        prefix = name.rsplit(".", 2)[0]
        out.update((prefix, int(j)) for j in ids.unique().tolist())
    return out


def neuron_counts(region: Region, shapes: Mapping[str, Sequence[int]]) -> dict[Neuron, int]:
    """How many of each MLP neuron's weights `region` holds (neurons as in `neuron_set`; untouched ones absent)."""
    import torch

    counts: dict[Neuron, int] = {}
    for name, idx in region.items():
        if not idx.numel() or not name.endswith((".gate_proj.weight", ".up_proj.weight", ".down_proj.weight")):
            continue
        cols = int(shapes[name][1])
        ids = idx // cols if not name.endswith(".down_proj.weight") else idx % cols
        values, n = torch.unique(ids, return_counts=True)
        prefix = name.rsplit(".", 2)[0]
        for j, c in zip(values.tolist(), n.tolist()):
            counts[(prefix, int(j))] = counts.get((prefix, int(j)), 0) + int(c)
    return counts


def top_neurons(counts: Mapping[Neuron, int], n: int) -> set[Neuron]:
    """The n neurons holding most of a region's weights (ties: by name and index, ascending)."""
    return {neuron for neuron, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:n]}


def set_precision_recall(selected: Iterable[Neuron], truth: Iterable[Neuron]) -> tuple[float, float]:
    """(precision, recall) of two sets; NaN for an empty denominator."""
    sel, true = set(selected), set(truth)
    shared = len(sel & true)
    return (shared / len(sel) if sel else float("nan"), shared / len(true) if true else float("nan"))


def auroc(scores: ArrayLike | torch.Tensor, positive: ArrayLike | torch.Tensor, device: str | None = None) -> float:
    """Area under the ROC curve of `positive` items ranked by `scores` (larger = more likely positive).

    AUROC = (Σ mid-ranks of the positives − n₊(n₊+1)/2) / (n₊ n₋), the Mann–Whitney U over n₊ n₋: the
    share of (positive, negative) pairs where the positive scores higher, ties counting 1/2. NaN when
    either class is empty. Computed with torch on `device` (default: where `scores` is), in float64: a
    real model's 80 M weights sort in seconds on a CPU and in milliseconds on a GPU.
    """
    import torch

    values = torch.as_tensor(scores).reshape(-1).to(device=device, dtype=torch.float64)
    labels = torch.as_tensor(positive, dtype=torch.bool).reshape(-1).to(values.device)
    if values.shape != labels.shape:
        raise ValueError(f"auroc: {values.numel()} scores for {labels.numel()} labels")
    n_pos = int(labels.sum())
    n_neg = labels.numel() - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ordered, order = torch.sort(values)
    _, counts = torch.unique_consecutive(ordered, return_counts=True)
    mid_ranks = counts.cumsum(0).double() - (counts.double() - 1) / 2  # 1-based, ties share their mean rank
    ranks = torch.repeat_interleave(mid_ranks, counts)
    return float((ranks[labels[order]].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def region_mask(region: Region, names: Sequence[str], numels: Sequence[int]) -> NDArray[np.bool_]:
    """A flat boolean vector over the tensors `names` (concatenated in this order) marking `region`'s weights."""
    import numpy as np

    mask = np.zeros(int(sum(numels)), dtype=bool)
    offset = 0
    for name, numel in zip(names, numels):
        if name in region:
            mask[offset + region[name].numpy()] = True
        offset += int(numel)
    return mask


def positions_region(positions: torch.Tensor, names: Sequence[str], numels: Sequence[int]) -> Region:
    """Positions in the concatenation of the tensors `names` (in this order) as a region (sorted per tensor)."""
    import torch

    positions = torch.sort(positions.to(torch.int64)).values
    region: Region = {}
    offset = 0
    for name, numel in zip(names, numels):
        inside = positions[(positions >= offset) & (positions < offset + int(numel))] - offset
        if inside.numel():
            region[name] = inside
        offset += int(numel)
    return region


def top_n(scores: torch.Tensor, n: int) -> torch.Tensor:
    """Positions of the n largest scores, ties broken by position (extract's order: score desc, position asc)."""
    import torch

    order = torch.sort(-scores.double(), stable=True).indices
    return torch.sort(order[:n]).values


def jaccard_pairs(regions: Mapping[str, Region], eligible: int) -> list[tuple[str, str, float, float]]:
    """(a, b, Jaccard of a's and b's regions, chance Jaccard of random regions of their sizes) per pair a < b."""
    from benchprof.stages.overlap import expected_jaccard, jaccard

    names = sorted(regions)
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            shared = shared_count(regions[a], regions[b])
            n_a, n_b = size(regions[a]), size(regions[b])
            out.append((a, b, jaccard(shared, n_a, n_b), expected_jaccard(n_a, n_b, eligible)))
    return out


def mean_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): the mean of replicate values (one per planted-model build) and its Student t interval,
    mean ± t₍₁₊level₎/₂(n − 1) · s / √n. Builds are independent draws of the whole construction (init, neurons,
    batches), so this interval says how much a figure would move with another build. NaN bounds below two
    values."""
    import math

    from scipy import stats

    finite = [float(v) for v in values if not math.isnan(v)]
    if not finite:
        return math.nan, math.nan, math.nan
    mean = sum(finite) / len(finite)
    if len(finite) < 2:
        return mean, math.nan, math.nan
    sd = math.sqrt(sum((v - mean) ** 2 for v in finite) / (len(finite) - 1))
    half = float(stats.t.ppf(0.5 + level / 2, len(finite) - 1)) * sd / math.sqrt(len(finite))
    return mean, mean - half, mean + half


def share_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """mean_interval of a share or a probability (AUROC, precision, recall), its bounds clipped to [0, 1] where a
    t interval runs past them; NaN bounds stay NaN."""
    import math

    mean, low, high = mean_interval(values, level)
    return mean, low if math.isnan(low) else max(0.0, low), high if math.isnan(high) else min(1.0, high)
