"""The per-weight scores that rank weights into regions (`extract.score`; docs/specificity.md has the detail).

An importance file (finetune) holds I_b(i) = |θ_i · Σ ∂L_b/∂θ_i| per eligible weight i of ability b;
`Scores` streams its candidate tensors one at a time. For ability a among M, Ī_¬a = mean_{b≠a} I_b:
  importance (the authors'): S_a = I_a          contrast_mean: S_a = I_a − Ī_¬a
  ratio: S_a = I_a / (Ī_¬a + ε), ε = RATIO_EPSILON × the mean of Ī_¬a over the eligible weights
  rank: S_a = P_a − mean_{b≠a} P_b, P_b(i) the mid-rank percentile of I_b(i) among b's weights, taken on
        I_b rounded to its top 16 bits (bfloat16): one 65,536-bin histogram per ability, not N sorted scores
  entropy (after Tang et al. 2024, LAPE): q_b = I_b / mean I_b, p_b = q_b / Σ_c q_c, H = −Σ_b p_b log p_b,
        S_a = q_a (1 − H / log M)
`SpecificScores` computes S_a tensor by tensor after one pre-pass per importance file (`AbilityTotals`).
`order_keys` maps float32 scores to int32 keys that sort alike (extract's radix select uses them too).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchprof import BenchprofError
from benchprof.core.layout import Layout
from benchprof.core.modeling import is_eligible
from benchprof.core.options import OPTIONS, WEIGHT_SCORES, did_you_mean
from benchprof.core.storage import file_hash, open_tensors, read_manifest

if TYPE_CHECKING:
    import torch

RATIO_EPSILON = 1.0  # ratio's ε, in units of the mean of Ī_¬a over the eligible weights
HIGH_BITS = 16  # rank: percentiles of the importance rounded to its top 16 bits (bfloat16)

FORMULAS = {o.name: o.formula for o in OPTIONS if o.unit == "weights"}  # in each mask manifest: score_inputs


@dataclass
class Scores:
    """The candidate weights of one importance file, read one tensor at a time."""

    path: Path
    metadata: dict[str, str]
    names: list[str]  # candidate tensors in the order of the ranking (sorted names)
    numels: list[int]
    device: str = "cpu"
    offsets: list[int] = field(default_factory=list)  # global position of each tensor's first weight

    def __post_init__(self) -> None:
        self.offsets = [0]
        for numel in self.numels:
            self.offsets.append(self.offsets[-1] + numel)

    @property
    def total(self) -> int:
        return self.offsets[-1]

    def __iter__(self) -> Iterator[tuple[str, torch.Tensor]]:
        """(name, flat fp32 scores) for each candidate tensor, in order."""
        import torch

        for name in self.names:
            try:
                # a handle per tensor: the file's memory map (and its resident pages) never outlives one tensor
                with open_tensors(self.path) as handle:
                    scores = handle.get_tensor(name)
            except Exception as err:
                raise BenchprofError(f"{self.path}: cannot read tensor {name!r} ({str(err).splitlines()[0]})") from None
            yield name, scores.to(self.device, torch.float32).reshape(-1)

    def check(self, name: str, values: torch.Tensor) -> None:
        import torch

        if torch.isnan(values).any():
            raise BenchprofError(f"{self.path}: tensor {name!r} holds NaN scores")


def open_scores(path: Path, front_removal: int = 0, back_removal: int = 0, device: str = "cpu") -> Scores:
    """An importance file's candidate tensors (eligible for its scope, within the layer range)."""
    handle = open_tensors(path)
    metadata = dict(handle.metadata() or {})
    missing = [key for key in ("total_params", "n_layers", "scope") if key not in metadata]
    if missing:
        raise BenchprofError(f"{path}: not an importance file (metadata lacks {', '.join(missing)})")
    n_layers = int(metadata["n_layers"])
    names = sorted(n for n in handle.keys() if is_eligible(n, metadata["scope"], n_layers, front_removal, back_removal))
    numels = [math.prod(handle.get_slice(n).get_shape()) for n in names]
    return Scores(Path(path), metadata, names, numels, device)


def importance_identity(path: Path) -> dict[str, Any]:
    """What an importance file is, for staleness: finetune's manifest (inputs and time), else its bytes."""
    manifest = read_manifest(path.parent)
    if manifest and "inputs_hash" in manifest:
        return {"inputs_hash": manifest["inputs_hash"], "written_at": manifest.get("written_at")}
    return {"file_hash": file_hash(path)}


def order_keys(scores: torch.Tensor) -> torch.Tensor:
    """int32 keys that sort exactly like the float32 scores (a < b iff key(a) < key(b)).

    IEEE-754 bits of a non-negative float already sort as integers; for a negative one all bits
    but the sign are flipped. Adding 0.0 first turns -0.0 into 0.0 so equal scores get equal keys.
    """
    import torch

    keys = (scores.to(torch.float32) + 0.0).view(torch.int32)  # a new tensor: safe to modify in place
    negative = keys < 0
    if negative.any():  # importance scores never are; keep memory at one int32 copy then
        keys[negative] ^= 0x7FFFFFFF
    return keys


def high_keys(values: torch.Tensor) -> torch.Tensor:
    """The top 16 bits of the order keys as bins in [0, 65536): monotone in the score."""
    return (order_keys(values) >> HIGH_BITS) + (1 << (HIGH_BITS - 1))


@dataclass
class AbilityTotals:
    """What the scores need of one ability's importance over all eligible weights (the pre-pass)."""

    total: int  # N
    sum: float  # Σ_i I(i)
    histogram: torch.Tensor | None = None  # int64 counts of high_keys, for rank

    @property
    def mean(self) -> float:
        return self.sum / self.total if self.total else 0.0

    def percentile(self, values: torch.Tensor) -> torch.Tensor:
        """Mid-rank percentile of each value among the ability's N weights (bfloat16 precision)."""
        if self.histogram is None:
            raise ValueError("percentile needs the pre-pass histogram (ability_totals with histogram=True)")
        histogram = self.histogram.to(values.device)
        bins = high_keys(values).long()
        below = histogram.cumsum(0) - histogram
        return (below[bins].double() + 0.5 * histogram[bins].double()) / self.total


def specific_score(
    score: str,
    own: torch.Tensor,
    others: list[torch.Tensor],
    own_totals: AbilityTotals | None = None,
    other_totals: list[AbilityTotals] | None = None,
) -> torch.Tensor:
    """S_a for one tensor: `own` = I_a, `others` = [I_b for b != a] (same shape), fp32 result.

    The totals (from `ability_totals`) are needed by ratio (means), rank (histograms) and entropy (means).
    """
    import torch

    own = own.double()
    if score == "importance":
        return own.float()
    if not others:
        raise BenchprofError(f"extract.score: {score!r} needs at least two abilities in datasets")
    others = [o.double() for o in others]
    mean_others = torch.stack(others).mean(0)  # Ī_¬a
    if score == "contrast_mean":
        result = own - mean_others
    elif score == "ratio":
        assert other_totals is not None  # the totals: from ability_totals
        epsilon = RATIO_EPSILON * sum(t.mean for t in other_totals) / len(other_totals)
        result = own / (mean_others + epsilon) if epsilon > 0 else own / mean_others.clamp_min(1e-30)
    elif score == "rank":
        assert own_totals is not None and other_totals is not None
        own_rank = own_totals.percentile(own)
        result = own_rank - torch.stack([t.percentile(o) for t, o in zip(other_totals, others)]).mean(0)
    elif score == "entropy":
        assert own_totals is not None and other_totals is not None
        totals = [own_totals] + list(other_totals)
        q = torch.stack([v / t.mean if t.mean > 0 else torch.zeros_like(v) for v, t in zip([own] + others, totals)])
        mass = q.sum(0)
        p = torch.where(mass > 0, q / mass.clamp_min(1e-300), torch.full_like(q, 1.0 / len(totals)))
        entropy = -(p * torch.log(p.clamp_min(1e-300))).sum(0)
        result = q[0] * (1 - entropy / math.log(len(totals))).clamp_min(0)
    else:
        raise BenchprofError(
            f"extract.score: {score!r} is not one of {', '.join(WEIGHT_SCORES)}{did_you_mean(score, WEIGHT_SCORES)}"
        )
    return result.float()


def ability_totals(scores: Scores, histogram: bool) -> AbilityTotals:
    """One streamed pass over an importance file's candidate tensors: N, Σ I and (rank) the histogram."""
    import torch

    total_sum = 0.0
    counts = torch.zeros(1 << HIGH_BITS, dtype=torch.int64) if histogram else None
    for name, values in scores:
        scores.check(name, values)
        total_sum += float(values.double().sum())
        if counts is not None:
            counts += torch.bincount(high_keys(values).cpu().long(), minlength=1 << HIGH_BITS)
    return AbilityTotals(scores.total, total_sum, counts)


def other_importance_files(layout: Layout, ability: str, abilities: list[str]) -> dict[str, Path]:
    """{b: importance file} for every other ability b of the config; a clear error if one is missing."""
    files = {b: layout.importance_file(b) for b in abilities if b != ability}
    missing = [b for b, path in files.items() if not path.is_file()]
    if missing:
        raise BenchprofError(
            f"extract.score needs the importance of every ability in datasets; none for {', '.join(missing)} "
            f"under {layout.model_dir} (run `benchprof finetune --ability {','.join(missing)}` first)"
        )
    if not files:
        raise BenchprofError("extract.score: an ability-specific score needs at least two abilities in datasets")
    return files


class ScoreCache(dict[tuple[str, int, int, bool], AbilityTotals]):
    """importance file -> its AbilityTotals, so that one extract run reads each file's pre-pass once."""


def open_specific_scores(
    score: str,
    own_path: Path,
    other_paths: dict[str, Path],
    front_removal: int = 0,
    back_removal: int = 0,
    device: str = "cpu",
    cache: ScoreCache | None = None,
) -> Scores:
    """extract's `Scores` for `score`: I_a itself for importance, else the ability-specific S_a."""
    own = open_scores(own_path, front_removal, back_removal, device)
    if score == "importance":
        return own
    if not other_paths:
        raise BenchprofError(f"extract.score: {score!r} needs at least two abilities in datasets")
    others = {}
    for b, path in other_paths.items():
        other = open_scores(path, front_removal, back_removal, device)
        for key in ("fingerprint", "scope", "n_layers", "total_params", "loss_on"):
            if other.metadata.get(key) != own.metadata.get(key):
                raise BenchprofError(
                    f"{path}: {key} {other.metadata.get(key)!r} differs from "
                    f"{own_path}'s {own.metadata.get(key)!r}; rerun `benchprof finetune`"
                )
        if (other.names, other.numels) != (own.names, own.numels):
            raise BenchprofError(f"{path}: its eligible tensors differ from {own_path}'s; rerun `benchprof finetune`")
        others[b] = other
    histogram = score == "rank"
    totals_cache = ScoreCache() if cache is None else cache

    def totals(scores: Scores) -> AbilityTotals:
        key = (str(scores.path), front_removal, back_removal, histogram)
        if key not in totals_cache:
            totals_cache[key] = ability_totals(scores, histogram)
        return totals_cache[key]

    return SpecificScores(
        own.path,
        own.metadata,
        own.names,
        own.numels,
        device,
        score=score,
        others=others,
        own_totals=totals(own),
        other_totals=[totals(o) for o in others.values()],
    )


@dataclass
class SpecificScores(Scores):
    """S_a of one ability, computed tensor by tensor from every ability's importance file."""

    score: str = "importance"
    others: dict[str, Scores] = field(default_factory=dict)  # b -> Scores of b's importance file
    own_totals: AbilityTotals | None = None
    other_totals: list[AbilityTotals] = field(default_factory=list)

    def __iter__(self) -> Iterator[tuple[str, torch.Tensor]]:
        own = Scores(self.path, self.metadata, self.names, self.numels, self.device)
        streams = [iter(other) for other in self.others.values()]
        for name, values in own:
            other_values = []
            for stream in streams:
                other_name, other = next(stream)
                assert other_name == name  # checked when opened: same tensors in the same order
                other_values.append(other)
            yield name, specific_score(self.score, values, other_values, self.own_totals, self.other_totals)


@dataclass(eq=False)
class HeldScores(Scores):
    """Another `Scores` computed on its first pass and kept in memory (on its device) for the next ones."""

    source: Scores | None = None
    values: list[torch.Tensor] | None = field(default=None, repr=False)

    def __iter__(self) -> Iterator[tuple[str, torch.Tensor]]:
        if self.values is None:
            assert self.source is not None
            self.values = [values for _, values in self.source]
        yield from zip(self.names, self.values)


def held(scores: Scores, budget_bytes: int) -> Scores:
    """`scores` kept in memory after its first pass when its float32 values fit `budget_bytes`, else itself.

    The exact selection reads the scores three times and the chunked one once per k; held, an ability-specific
    score (which reads every ability's file and computes S_a per weight) is computed once, at 4 bytes per
    candidate weight. Past the budget every pass streams again, so memory stays at one tensor per file however
    large the model. (extract holds only ability-specific scores: re-reading one importance file costs less.)"""
    if 4 * scores.total > budget_bytes:
        return scores
    return HeldScores(scores.path, scores.metadata, scores.names, scores.numels, scores.device, source=scores)


def score_inputs(score: str, other_paths: dict[str, Path | None]) -> dict[str, Any]:
    """What an ability-specific score adds to the masks' manifest inputs: its formula and the identity
    of every other ability's importance file ("missing" for one that is absent or unknown)."""
    inputs: dict[str, Any] = {
        "formula": FORMULAS[score],
        "other_importance": {
            b: importance_identity(p) if p is not None and p.is_file() else "missing"
            for b, p in sorted(other_paths.items())
        },
    }
    if score == "ratio":
        inputs["ratio_epsilon"] = RATIO_EPSILON
    return inputs
