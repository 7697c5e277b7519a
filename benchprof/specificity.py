"""Region specificity: ability-specific scores, the overlap of regions, and the specificity of damage.

Every formula of docs/specificity.md lives in this module.

**Scores** (`extract.score`, `benchprof extract --score`). For ability a among the M abilities of
the config (M >= 2 for every score but `importance`), weight i, importance I_b(i) = |θ_i · Σ ∂L_b/∂θ_i|
read from each ability's stored importance file (no new gradient pass), mean over the others
Ī_¬a(i) = mean_{b≠a} I_b(i), and N eligible weights:

- `importance` (default, the authors'):  S_a = I_a
- `contrast_mean`:  S_a = I_a − Ī_¬a
- `ratio`:  S_a = I_a / (Ī_¬a + ε), ε = RATIO_EPSILON · (1/N) Σ_i Ī_¬a(i): a pseudo-count of one
  average weight's importance, so that weights unimportant to every ability do not get huge ratios.
- `rank`:  S_a = P_a − mean_{b≠a} P_b, P_b(i) the mid-rank percentile of I_b(i) among ability b's
  N weights, in (0, 1). Scale-free: an ability whose gradients are larger does not dominate. The
  rank is taken on I_b rounded down to its top 16 bits (bfloat16 precision, relative resolution
  2^-7): P_b(i) = (#{j: h_b(j) < h_b(i)} + #{j: h_b(j) = h_b(i)} / 2) / N, h the 16-bit key. That
  is exact for the rounded values and needs one 65,536-bin histogram per ability (a pre-pass),
  where exact 32-bit ranks would need all N scores of every ability in memory.
- `entropy`: after the language-specific neurons of Tang et al. 2024 ("Language-Specific Neurons:
  The Key to Multilingual Capabilities in Large Language Models"), who keep the neurons whose
  activation probability over languages has low entropy (LAPE). Here the importance takes the place
  of the activation probability: q_b(i) = I_b(i) / mean_j I_b(j) (each ability's importance in units
  of its own average), p_b(i) = q_b(i) / Σ_c q_c(i) (uniform where all are 0),
  H(i) = −Σ_b p_b log p_b, and S_a = q_a · (1 − H / log M): large for a and concentrated on few abilities.

Every score is computed tensor by tensor from the importance files (`SpecificScores` streams like
extract's `Scores`), after one pre-pass for each ability's sum and histogram. Top = the n largest
S_a, bottom = the n smallest (for the contrast scores: the weights most specific to the *other*
abilities), random is unchanged. The score and the identities of every importance file it reads
are part of the masks' manifest inputs, so a switch recomputes the masks in their folders, and
evaluate (which records each mask file's hash) re-evaluates the top and bottom regions; random
mask files keep their bytes and their evaluations. Until then, aggregate lists an evaluation of a
replaced mask as missing rather than mixing scores in one table.

**Overlap** of two regions A, B (sets of (parameter, flat index)) from the mask files:
Jaccard J = |A∩B| / |A∪B| and shared fraction |A∩B| / n. Chance level: for two independent uniform
subsets of sizes n_a, n_b of the E eligible weights, |A∩B| is hypergeometric with
E[|A∩B|] = n_a n_b / E, and E[J] ≈ E|A∩B| / (n_a + n_b − E|A∩B|) (the ratio of expectations; |A∩B|
concentrates tightly at these sizes).

**Specificity** of ability a's region at k:  spec_a = AIS_a(a) − mean_{b≠a} AIS_a(b), over the
ability benchmarks in evals.benchmarks (AIS_a(b): the AIS on b's test split when a's region is
removed). Its interval comes from the AIS cells' own paired bootstrap resamples, combined resample
by resample (the splits hold different documents, so their resamples are independent). The **mean
specificity** (ability `mean`) averages spec_a over the abilities; its interval needs a bootstrap of
its own, since two abilities' AIS on one split share that split's documents: each resample draws
one set of document indices per split and applies it to every ability's scores there.
**Diagonal dominance**: the abilities whose own split has the largest AIS in their row.
"""

from __future__ import annotations

import csv
import io as stdio
import math
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import BenchprofError
from .config import ABILITIES, SCORES
from .extract import Scores, open_scores
from .regions import region_metadata
from .storage import open_tensors

RATIO_EPSILON = 1.0  # ratio's ε, in units of the mean of Ī_¬a over the eligible weights
HIGH_BITS = 16  # rank: percentiles of the importance rounded to its top 16 bits (bfloat16)
SPECIFICITY = "specificity"  # the benchmark name of specificity rows in ais.csv
SPECIFICITY_METRIC = "AIS(own) - mean AIS(other abilities)"
MEAN = "mean"  # the ability name of the rows holding the mean specificity over the abilities

FORMULAS = {
    "importance": "S_a = I_a",
    "contrast_mean": "S_a = I_a - mean_{b!=a} I_b",
    "ratio": f"S_a = I_a / (mean_{{b!=a}} I_b + eps), eps = {RATIO_EPSILON:g} x its mean over eligible weights",
    "rank": "S_a = P_a - mean_{b!=a} P_b, P = mid-rank percentile of I (bfloat16 precision)",
    "entropy": "S_a = q_a (1 - H(p)/log M), q_b = I_b / mean I_b, p_b = q_b / sum_c q_c",
}


# ---- scores ----------------------------------------------------------------------------------


def high_keys(values: Any) -> Any:
    """The top 16 bits of extract's order keys as bins in [0, 65536): monotone in the score."""
    from .extract import order_keys

    return (order_keys(values) >> HIGH_BITS) + (1 << (HIGH_BITS - 1))


@dataclass
class AbilityTotals:
    """What the scores need of one ability's importance over all eligible weights (the pre-pass)."""

    total: int  # N
    sum: float  # Σ_i I(i)
    histogram: Any = None  # int64 counts of high_keys, for rank

    @property
    def mean(self) -> float:
        return self.sum / self.total if self.total else 0.0

    def percentile(self, values: Any) -> Any:
        """Mid-rank percentile of each value among the ability's N weights (bfloat16 precision)."""
        histogram = self.histogram.to(values.device)
        bins = high_keys(values).long()
        below = histogram.cumsum(0) - histogram
        return (below[bins].double() + 0.5 * histogram[bins].double()) / self.total


def specific_score(
    score: str,
    own: Any,
    others: list[Any],
    own_totals: AbilityTotals | None = None,
    other_totals: list[AbilityTotals] | None = None,
) -> Any:
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
        epsilon = RATIO_EPSILON * sum(t.mean for t in other_totals) / len(other_totals)
        result = own / (mean_others + epsilon) if epsilon > 0 else own / mean_others.clamp_min(1e-30)
    elif score == "rank":
        own_rank = own_totals.percentile(own)
        result = own_rank - torch.stack([t.percentile(o) for t, o in zip(other_totals, others)]).mean(0)
    elif score == "entropy":
        totals = [own_totals] + list(other_totals)
        q = torch.stack([v / t.mean if t.mean > 0 else torch.zeros_like(v) for v, t in zip([own] + others, totals)])
        mass = q.sum(0)
        p = torch.where(mass > 0, q / mass.clamp_min(1e-300), torch.full_like(q, 1.0 / len(totals)))
        entropy = -(p * torch.log(p.clamp_min(1e-300))).sum(0)
        result = q[0] * (1 - entropy / math.log(len(totals))).clamp_min(0)
    else:
        raise BenchprofError(f"extract.score: {score!r} is not one of {', '.join(SCORES)}")
    return result.float()


def ability_totals(scores: Any, histogram: bool) -> AbilityTotals:
    """One streamed pass over an importance file's candidate tensors: N, Σ I and (rank) the histogram."""
    import torch

    total_sum = 0.0
    counts = torch.zeros(1 << HIGH_BITS, dtype=torch.int64) if histogram else None
    for name, values in scores:
        scores.check(name, values)
        total_sum += float(values.double().sum())
        if histogram:
            counts += torch.bincount(high_keys(values).cpu().long(), minlength=1 << HIGH_BITS)
    return AbilityTotals(scores.total, total_sum, counts)


def other_importance_files(layout: Any, ability: str, abilities: list[str]) -> dict[str, Path]:
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


class ScoreCache(dict):
    """importance file -> its AbilityTotals, so that one extract run reads each file's pre-pass once."""


def open_specific_scores(
    score: str,
    own_path: Path,
    other_paths: dict[str, Path],
    front_removal: int = 0,
    back_removal: int = 0,
    device: str = "cpu",
    cache: ScoreCache | None = None,
) -> Any:
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
    cache = ScoreCache() if cache is None else cache

    def totals(scores: Any) -> AbilityTotals:
        key = (str(scores.path), front_removal, back_removal, histogram)
        if key not in cache:
            cache[key] = ability_totals(scores, histogram)
        return cache[key]

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
    others: dict = field(default_factory=dict)  # b -> Scores of b's importance file
    own_totals: AbilityTotals | None = None
    other_totals: list = field(default_factory=list)

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        own = Scores(self.path, self.metadata, self.names, self.numels, self.device)
        streams = [iter(other) for other in self.others.values()]
        for name, values in own:
            other_values = []
            for stream in streams:
                other_name, other = next(stream)
                assert other_name == name  # checked when opened: same tensors in the same order
                other_values.append(other)
            yield name, specific_score(self.score, values, other_values, self.own_totals, self.other_totals)


def score_inputs(score: str, other_paths: dict[str, Path | None]) -> dict[str, Any]:
    """What an ability-specific score adds to the masks' manifest inputs: its formula and the identity
    of every other ability's importance file ("missing" for one that is absent or unknown)."""
    from .extract import importance_identity

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


# ---- overlap of regions ----------------------------------------------------------------------


def expected_shared(n_a: int, n_b: int, eligible: int) -> float:
    """E|A∩B| for independent uniform subsets of sizes n_a, n_b among `eligible` weights."""
    return n_a * n_b / eligible if eligible else math.nan


def expected_jaccard(n_a: int, n_b: int, eligible: int) -> float:
    """E[J] ≈ E|A∩B| / (n_a + n_b − E|A∩B|) for independent uniform subsets."""
    shared = expected_shared(n_a, n_b, eligible)
    union = n_a + n_b - shared
    return shared / union if union > 0 else math.nan


def jaccard(shared: int, size_a: int, size_b: int) -> float:
    """|A∩B| / |A∪B| (1 for two empty regions)."""
    union = size_a + size_b - shared
    return shared / union if union else 1.0


def _module(name: str) -> str:
    match = re.search(r"(mlp|self_attn)\.(\w+?)\.weight$", name)
    return match.group(2) if match else name


@dataclass
class OverlapResult:
    """Overlap of the regions of several abilities at one k (one region kind)."""

    k: float
    region: str
    abilities: list[str]
    scores: dict[str, str]  # ability -> the score its region was ranked by ("" for random regions)
    n: dict[str, int]  # target size n per ability
    sizes: dict[str, int]  # selected weights per ability
    eligible: int
    shared: dict[tuple[str, str], int]  # (a, b) -> |A∩B| (both orders, and a == b)
    per_tensor: dict[str, dict[str, int]]  # ability -> tensor -> selected count

    def row(self, a: str, b: str) -> dict[str, Any]:
        shared = self.shared[(a, b)]
        size_a, size_b = self.sizes[a], self.sizes[b]
        chance_j = expected_jaccard(size_a, size_b, self.eligible)
        observed_j = jaccard(shared, size_a, size_b)
        return {
            "k": self.k,
            "region": self.region,
            "score": self.scores[a],
            "ability_a": a,
            "ability_b": b,
            "n": self.n[a],
            "size_a": size_a,
            "size_b": size_b,
            "shared": shared,
            "jaccard": observed_j,
            "shared_fraction": shared / self.n[a] if self.n[a] else math.nan,
            "eligible": self.eligible,
            "expected_shared": expected_shared(size_a, size_b, self.eligible),
            "expected_jaccard": chance_j,
            "jaccard_over_chance": observed_j / chance_j if chance_j else math.nan,
        }


def region_overlap(mask_files: dict[str, Path], k: float, region: str = "top") -> OverlapResult:
    """Pairwise |A∩B| of the regions in `mask_files` ({ability: mask file}), streamed tensor by tensor.

    Memory: one tensor's indices per ability. The mask files must come from one model and one
    candidate set (same fingerprint and eligible count).
    """
    import numpy as np

    abilities = list(mask_files)
    metadata = {a: region_metadata(p) for a, p in mask_files.items()}
    eligible = {int(m.get("eligible", 0)) for m in metadata.values()}
    fingerprints = {m.get("fingerprint", "") for m in metadata.values()}
    if len(eligible) != 1 or len(fingerprints) != 1:
        raise BenchprofError(
            f"overlap at k={k}: the {region} masks come from different models or candidate sets "
            f"(eligible {sorted(eligible)}); rerun `benchprof extract`"
        )
    names: set[str] = set()
    for path in mask_files.values():
        with open_tensors(path) as handle:
            names.update(handle.keys())
    shared = {(a, b): 0 for a in abilities for b in abilities}
    per_tensor: dict[str, dict[str, int]] = {a: {} for a in abilities}
    for name in sorted(names):
        indices = {}
        for a, path in mask_files.items():
            with open_tensors(path) as handle:  # a handle per tensor, like extract: bounded resident memory
                if name in handle.keys():
                    indices[a] = handle.get_tensor(name).numpy()
        for a, values in indices.items():
            per_tensor[a][name] = int(values.size)
        present = list(indices)
        for i, a in enumerate(present):
            shared[(a, a)] += int(indices[a].size)
            for b in present[i + 1 :]:
                count = int(np.intersect1d(indices[a], indices[b], assume_unique=True).size)
                shared[(a, b)] += count
                shared[(b, a)] += count
    sizes = {a: shared[(a, a)] for a in abilities}
    n = {a: int(metadata[a].get("n", sizes[a])) for a in abilities}
    scores = {a: "" if region == "random" else mask_score(metadata[a]) for a in abilities}
    return OverlapResult(k, region, abilities, scores, n, sizes, eligible.pop(), shared, per_tensor)


def mask_score(metadata: dict[str, str]) -> str:
    """The score a top or bottom mask was ranked by (files written before extract.score say none)."""
    return metadata.get("score", "importance")


OVERLAP_COLUMNS = (
    "model",
    "k",
    "region",
    "score",
    "ability_a",
    "ability_b",
    "n",
    "size_a",
    "size_b",
    "shared",
    "jaccard",
    "shared_fraction",
    "eligible",
    "expected_shared",
    "expected_jaccard",
    "jaccard_over_chance",
)
LAYER_COLUMNS = (
    "model",
    "k",
    "region",
    "ability",
    "layer",
    "module",
    "selected",
    "fraction_of_region",
    "eligible",
    "fraction_of_eligible",
)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.6g}"
    return str(value)


def _tensor_sizes(stats_path: Path) -> dict[str, int]:
    """{tensor: numel} of the candidate tensors, from extract's stats.csv (empty if absent)."""
    if not stats_path.is_file():
        return {}
    with open(stats_path) as f:
        return {row["tensor"]: int(row["numel"]) for row in csv.DictReader(f)}


def layer_rows(result: OverlapResult, model: str, numels: dict[str, int]) -> list[dict[str, Any]]:
    """Where each ability's region lies: selected count per (layer, module), as a fraction of the
    region and of the eligible weights there (numels from stats.csv; empty when unknown)."""
    from .modeling import layer_index

    rows = []
    for a in result.abilities:
        cells: dict[tuple[int, str], list[int]] = {}
        for name in set(result.per_tensor[a]) | set(numels):
            layer = layer_index(name)
            if layer is None:
                continue
            cell = cells.setdefault((layer, _module(name)), [0, 0])
            cell[0] += result.per_tensor[a].get(name, 0)
            cell[1] += numels.get(name, 0)
        for (layer, module), (selected, eligible) in sorted(cells.items()):
            rows.append(
                {
                    "model": model,
                    "k": result.k,
                    "region": result.region,
                    "ability": a,
                    "layer": layer,
                    "module": module,
                    "selected": selected,
                    "fraction_of_region": selected / result.sizes[a] if result.sizes[a] else math.nan,
                    "eligible": eligible if numels else "",
                    "fraction_of_eligible": selected / eligible if eligible else math.nan,
                }
            )
    return rows


def _write_csv(path: Path, columns: tuple[str, ...], rows: list[dict[str, Any]]) -> None:
    from .layout import format_k
    from .storage import write_text

    buffer = stdio.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([format_k(row[c]) if c == "k" else _cell(row[c]) for c in columns])
    write_text(path, buffer.getvalue())


def plot_overlap(result: OverlapResult, model: str, path: Path) -> Path:
    """Ability x ability Jaccard heatmap, each cell annotated with Jaccard and its ratio to chance."""
    import numpy as np

    from .aggregate import _figure, _save
    from .layout import format_k

    abilities = result.abilities
    values = np.array(
        [[jaccard(result.shared[(a, b)], result.sizes[a], result.sizes[b]) for b in abilities] for a in abilities]
    )
    size = 2.4 + 0.9 * len(abilities)
    fig = _figure(size + 1.2, size)
    ax = fig.add_subplot()
    image = ax.imshow(values, cmap="viridis", vmin=0, vmax=1)
    for i, a in enumerate(abilities):
        for j, b in enumerate(abilities):
            row = result.row(a, b)
            text = f"{row['jaccard']:.2f}" + ("" if i == j else f"\n×{row['jaccard_over_chance']:.1f}")
            ax.text(j, i, text, ha="center", va="center", fontsize=7, color="black" if values[i, j] > 0.6 else "white")
    labels = [a.replace("_", " ") for a in abilities]
    ax.set_xticks(range(len(abilities)), labels, rotation=30, ha="right", rotation_mode="anchor", fontsize=8)
    ax.set_yticks(range(len(abilities)), labels, fontsize=8)
    fig.colorbar(image, ax=ax, shrink=0.8, label="Jaccard")
    n = max(result.sizes.values()) if result.sizes else 0
    chance = expected_jaccard(n, n, result.eligible)
    ax.set_title(
        f"{model}: overlap of {result.region} regions at k = {format_k(result.k)}\n"
        f"Jaccard (×: over chance); chance for random regions ≈ {chance:.3f}",
        fontsize=9,
    )
    return _save(fig, path)


def plot_layers(rows: list[dict[str, Any]], model: str, k: float, path: Path) -> Path:
    """Fraction of each ability's region per layer (summed over modules), against the eligible share."""
    import matplotlib

    from .aggregate import _figure, _save
    from .layout import format_k

    fig = _figure(7.0, 3.6)
    ax = fig.add_subplot()
    abilities = list(dict.fromkeys(r["ability"] for r in rows))
    colours = matplotlib.colormaps["tab10"]
    eligible_by_layer: dict[int, int] = {}
    for i, ability in enumerate(abilities):
        by_layer: dict[int, float] = {}
        for r in rows:
            if r["ability"] == ability:
                by_layer[r["layer"]] = by_layer.get(r["layer"], 0.0) + r["fraction_of_region"]
                if i == 0 and r["eligible"] != "":
                    eligible_by_layer[r["layer"]] = eligible_by_layer.get(r["layer"], 0) + r["eligible"]
        layers = sorted(by_layer)
        ax.plot(
            layers,
            [by_layer[layer] for layer in layers],
            marker="o",
            markersize=3,
            color=colours(i % 10),
            label=ability.replace("_", " "),
        )
    if eligible_by_layer:
        total = sum(eligible_by_layer.values())
        layers = sorted(eligible_by_layer)
        ax.plot(
            layers,
            [eligible_by_layer[layer] / total for layer in layers],
            linestyle="--",
            color="black",
            label="eligible share (uniform region)",
        )
    ax.set_xticks(sorted({r["layer"] for r in rows}))
    ax.set_xlabel("decoder layer")
    ax.set_ylabel("fraction of the region")
    ax.legend(fontsize=7)
    ax.set_title(f"{model}: where the top regions lie, k = {format_k(k)}", fontsize=9)
    return _save(fig, path)


def model_overlap(cfg: Any, tag: str, plots: bool = True) -> tuple[list[Path], list[dict[str, Any]], list[str]]:
    """One model's overlap files under its profile/ folder: (files written, overlap rows, notes).

    Works on whatever mask files exist (abilities without a mask at some k are left out of that k);
    a set of masks that cannot be compared (different models or candidate sets) is skipped with a note.
    """
    from .aggregate import _file_name
    from .layout import Layout, format_k

    layout = Layout(cfg.output_root, tag)
    written: list[Path] = []
    overlap_rows: list[dict[str, Any]] = []
    layers: list[dict[str, Any]] = []
    notes: list[str] = []
    for k in cfg.settings.k_values:
        for region in [r for r in ("top", "bottom", "random") if r in cfg.extract.regions]:
            files = {a: layout.mask_file(a, k, region) for a in cfg.abilities()}
            files = {a: p for a, p in files.items() if p.is_file()}
            if not files:
                continue
            try:
                result = region_overlap(files, k, region)
            except BenchprofError as err:
                notes.append(f"overlap skipped: {err}")
                continue
            if len(set(result.scores.values())) > 1:
                notes.append(
                    f"overlap at k={format_k(k)} ({region}): the masks were ranked by different scores "
                    f"({', '.join(f'{a}: {s}' for a, s in result.scores.items())}); rerun `benchprof extract`"
                )
            overlap_rows += [{"model": tag, **result.row(a, b)} for a in result.abilities for b in result.abilities]
            rows = layer_rows(result, tag, _tensor_sizes(layout.mask_stats(result.abilities[0], k)))
            layers += rows
            if plots and region == "top":
                name = _file_name(format_k(k))
                written.append(plot_overlap(result, tag, layout.profile_dir / f"overlap_k{name}.png"))
                written.append(plot_layers(rows, tag, k, layout.profile_dir / f"layers_k{name}.png"))
    if overlap_rows:
        _write_csv(layout.profile_dir / "overlap.csv", OVERLAP_COLUMNS, overlap_rows)
        _write_csv(layout.profile_dir / "layers.csv", LAYER_COLUMNS, layers)
        written += [layout.profile_dir / "overlap.csv", layout.profile_dir / "layers.csv"]
    return written, overlap_rows, notes


def overlap(config: str = "config.yml", model: str | None = None, plots: bool = True) -> None:
    """Overlap of the abilities' regions and where they lie, from the mask files only (no evaluation).

    Writes under <model>/profile/: overlap.csv (per k and region, every ability pair: shared weights,
    Jaccard, shared fraction of n, and the chance level of independent random regions of the same
    sizes), overlap_k<k>.png (top-region Jaccard heatmap, each cell also as a multiple of chance),
    layers.csv (selected weights per layer and module, as a fraction of the region and of the
    eligible weights there) and layers_k<k>.png. `benchprof aggregate` writes them too.

    Arguments:
        config: path of config.yml.
        model: only this model (name or tag).
        plots: also draw the PNGs (--noplots to skip).
    """
    from .config import load_config

    started = time.time()
    cfg = load_config(config)
    specs = [cfg.model(model)] if model is not None else list(cfg.models)
    count = 0
    for spec in specs:
        written, rows, notes = model_overlap(cfg, spec.tag, plots)
        for line in [overlap_summary(rows)] + notes:
            if line:
                print(line)
        count += len(written)
    if not count:
        raise BenchprofError(f"overlap: no mask files under {cfg.output_root} (run `benchprof extract` first)")
    print(f"overlap: {count} files under {cfg.output_root}/<model>/profile in {time.time() - started:.1f}s")


def overlap_summary(rows: list[dict[str, Any]]) -> str:
    """One line per (model, k, region, score): mean off-diagonal Jaccard and shared fraction against chance."""
    from .layout import format_k

    lines = []
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        if r["ability_a"] != r["ability_b"]:
            groups.setdefault((r["model"], r["k"], r["region"]), []).append(r)
    for (tag, k, region), group in groups.items():
        mean = lambda key: sum(r[key] for r in group) / len(group)  # noqa: E731
        scores = ", ".join(sorted({r["score"] for r in group if r["score"]}))
        lines.append(
            f"{tag} k={format_k(k)} {region}"
            + (f" (score {scores})" if scores else "")
            + f": mean Jaccard {mean('jaccard'):.3f} (chance {mean('expected_jaccard'):.3f}), "
            f"mean shared fraction {mean('shared_fraction'):.3f}"
        )
    return "\n".join(lines)


# ---- specificity of the damage ---------------------------------------------------------------


def region_provenance(layout: Any, abilities: list[str], k_values: list[float], notes: list[str]) -> tuple[str, str]:
    """(extract.score of the top/bottom masks, finetune.loss_on of the importance files), read from
    their headers; "mixed" (with a note) when they differ, importance and "" when there are none."""
    scores: dict[str, set[str]] = {}
    losses: dict[str, set[str]] = {}
    for ability in abilities:
        for k in k_values:
            for region in ("top", "bottom"):
                path = layout.mask_file(ability, k, region)
                if path.is_file():
                    scores.setdefault(mask_score(region_metadata(path)), set()).add(ability)
        path = layout.importance_file(ability)
        if path.is_file():
            loss_on = region_metadata(path).get("loss_on", "all")  # files before loss_on were all-token
            losses.setdefault(loss_on, set()).add(ability)

    def one(found: dict[str, set[str]], what: str, default: str) -> str:
        if len(found) > 1:
            notes.append(
                f"{what} differs between abilities: "
                + "; ".join(f"{value}: {', '.join(sorted(names))}" for value, names in sorted(found.items()))
            )
            return "mixed"
        return next(iter(found), default)

    return one(scores, "extract.score of the masks", "importance"), one(losses, "finetune.loss_on", "")


def specificity_score(own: Any, others: list[Any]) -> Any:
    """spec_a = AIS_a(own split) − mean_{b≠a} AIS_a(b); floats or aligned arrays of bootstrap samples."""
    import numpy as np

    return np.asarray(own, dtype=float) - np.mean(np.asarray(others, dtype=float), axis=0)


def ability_benchmarks(benchmarks: list[str]) -> list[str]:
    """The benchmarks that are an ability's own test split."""
    return [b for b in benchmarks if b in ABILITIES]


def specificity_rows(profile: Any, samples: dict[tuple, Any]) -> list[Any]:
    """ais.csv rows (benchmark "specificity") per (ability, k, region) whose own split and at least
    one other ability's split were evaluated; `samples[(ability, k, benchmark, region)]` holds the
    cell's bootstrap AIS samples (same resample count everywhere), when there were per-sample files."""
    from .aggregate import ADJUSTED, AisRow, percentile_ci

    own_splits = ability_benchmarks(profile.benchmarks)
    rows = []
    regions = list(profile.regions) + ([ADJUSTED] if {"top", "random"} <= set(profile.regions) else [])
    for ability in profile.abilities:
        if ability not in own_splits:
            continue
        for k in profile.k_values:
            for region in regions:
                own = profile.row(ability, ability, k, region)
                others = [profile.row(ability, b, k, region) for b in own_splits if b != ability]
                others = [r for r in others if r is not None and not math.isnan(r.ais)]
                if own is None or math.isnan(own.ais) or not others:
                    continue
                row = AisRow(
                    profile.model,
                    ability,
                    SPECIFICITY,
                    k,
                    region,
                    SPECIFICITY_METRIC,
                    math.nan,
                    None,
                    float(specificity_score(own.ais, [r.ais for r in others])),
                    n_docs=own.n_docs + sum(r.n_docs for r in others),
                )
                # the splits hold different documents, so their independent resamples combine index by index
                draws = [samples.get((ability, k, r.benchmark, region)) for r in [own] + others]
                if all(d is not None for d in draws) and len({len(d) for d in draws}) == 1:
                    _set_interval(row, percentile_ci(specificity_score(draws[0], draws[1:])))
                rows.append(row)
    return rows


def _set_interval(row: Any, interval: tuple[float, float]) -> None:
    row.ci_low, row.ci_high = interval
    if not math.isnan(row.ci_low):
        row.significant = bool(row.ci_low > 0 or row.ci_high < 0)


def mean_specificity_rows(profile: Any, per_doc: dict[tuple, Any], resamples: int, seed: int) -> list[Any]:
    """Rows of ability MEAN: the mean of the abilities' specificity per (k, region), over the abilities
    with a specificity row whose every cell (ability, each ability split) was evaluated.

    Its interval needs its own bootstrap: the abilities' AIS on one split share that split's documents,
    so each resample draws one set of document indices per split and applies it to the original and to
    every ability's ablated scores there. `per_doc[(benchmark,)]` holds the original per-document
    values of an ability split, `per_doc[(benchmark, ability, k, region)]` the ablated ones.
    """
    import zlib

    import numpy as np

    from .aggregate import ADJUSTED, AisRow, percentile_ci
    from .layout import format_k

    splits = ability_benchmarks(profile.benchmarks)
    rows = []
    regions = list(profile.regions) + ([ADJUSTED] if {"top", "random"} <= set(profile.regions) else [])
    for k in profile.k_values:
        for region in regions:
            members = [
                a
                for a in profile.abilities
                if (r := profile.row(a, SPECIFICITY, k, region)) is not None
                and all(profile.row(a, b, k, region) is not None for b in splits)
            ]
            if len(members) < 2:
                continue
            spec = [profile.row(a, SPECIFICITY, k, region).ais for a in members]
            row = AisRow(
                profile.model, MEAN, SPECIFICITY, k, region, SPECIFICITY_METRIC, math.nan, None, float(np.mean(spec))
            )
            parts = ("top", "random") if region == ADJUSTED else (region,)
            if resamples > 0:
                draws = _mean_specificity_draws(
                    members,
                    splits,
                    k,
                    parts,
                    per_doc,
                    resamples,
                    lambda b: np.random.default_rng([int(seed), zlib.crc32(f"mean|{format_k(k)}|{b}".encode())]),
                )
                if draws is not None:
                    _set_interval(row, percentile_ci(draws))
            rows.append(row)
    return rows


def _mean_specificity_draws(
    members: list[str],
    splits: list[str],
    k: float,
    parts: tuple[str, ...],
    per_doc: dict[tuple, Any],
    resamples: int,
    rng_of: Any,
) -> Any:
    """Bootstrap samples of the mean specificity (None when a per-sample file is missing);
    `parts` = (region,) or ("top", "random") for the control-adjusted specificity."""
    import numpy as np

    from .aggregate import bootstrap_ais

    ais: dict[tuple[str, str], Any] = {}  # (ability, split) -> AIS samples
    for split in splits:
        keys = [(split, a, k, part) for a in members for part in parts]
        if (split,) not in per_doc or any(key not in per_doc for key in keys):
            return None
        docs = set(per_doc[(split,)])
        for key in keys:
            docs &= set(per_doc[key])
        docs = [d for d in per_doc[(split,)] if d in docs]
        if not docs:
            return None
        base = np.array([per_doc[(split,)][d] for d in docs])
        matrix = np.array([[per_doc[key][d] for d in docs] for key in keys])
        values = bootstrap_ais(base, matrix, resamples, rng_of(split))  # one index set for every row
        for i, a in enumerate(members):
            block = values[i * len(parts) : (i + 1) * len(parts)]
            ais[(a, split)] = block[0] - block[1] if len(parts) == 2 else block[0]
    spec = [specificity_score(ais[(a, a)], [ais[(a, b)] for b in splits if b != a]) for a in members]
    return np.mean(spec, axis=0)


def diagonal_dominance(profile: Any, k: float, region: str = "top") -> dict[str, bool | None]:
    """ability -> whether its own split has the largest AIS in its row (over the ability splits with
    an AIS); None when its own split or every other one lacks an AIS."""
    splits = ability_benchmarks(profile.benchmarks)
    out: dict[str, bool | None] = {}
    for ability in profile.abilities:
        if ability not in splits:
            continue
        values = {
            b: r.ais for b in splits if (r := profile.row(ability, b, k, region)) is not None and not math.isnan(r.ais)
        }
        if ability not in values or len(values) < 2:
            out[ability] = None
            continue
        out[ability] = all(values[ability] > v for b, v in values.items() if b != ability)
    return out


def specificity_summary(profile: Any, k: float) -> list[str]:
    """The lines `aggregate` prints: mean specificity of the top region at k, and diagonal dominance."""
    from .layout import format_k

    row = profile.row(MEAN, SPECIFICITY, k, "top")
    if row is None:
        return []
    interval = "" if math.isnan(row.ci_low) else f" [{row.ci_low:+.3f}, {row.ci_high:+.3f}]"
    known = {a: v for a, v in diagonal_dominance(profile, k).items() if v is not None}
    return [
        f"{profile.model} k={format_k(k)} top (score {profile.score}): mean specificity {row.ais:+.3f}{interval}, "
        f"diagonal dominance {sum(known.values())} of {len(known)}"
    ]


def specificity_markdown(profile: Any) -> list[str]:
    """The ais.md section: overlap of the regions, specificity per ability and k (with the mean over
    the abilities), and diagonal dominance of the AIS matrix."""
    from .aggregate import _fmt_ais, _md_table
    from .layout import format_k

    has_rows = any(r.benchmark == SPECIFICITY for r in profile.rows)
    if not has_rows and not profile.overlap:
        return []
    what = f"extract.score = `{profile.score}`"
    if profile.loss_on:
        what += f", finetune.loss_on = `{profile.loss_on}`"
    parts = ["", f"## Region specificity ({what})", ""]
    if profile.overlap:
        parts += (
            [
                "Overlap of the abilities' regions (mean over ability pairs; chance: independent random regions "
                "of the same sizes; every pair in overlap.csv, heatmap overlap_k<k>.png, where the regions lie "
                "in layers.csv and layers_k<k>.png):",
                "",
            ]
            + [f"- {line}" for line in profile.overlap]
            + [""]
        )
    if not has_rows:
        return parts
    parts += [
        f"spec = AIS on the ability's own split − mean AIS on the other abilities' splits "
        f"({', '.join(ability_benchmarks(profile.benchmarks))}); `*`: the 95% bootstrap interval excludes 0; "
        f"`{MEAN}`: the mean over the abilities.",
        "",
    ]
    regions = [
        r
        for r in ("top", "top-random", "random")
        if any(row.benchmark == SPECIFICITY and row.region == r for row in profile.rows)
    ]
    header = ["ability"] + [f"{region}, k = {format_k(k)}" for k in profile.k_values for region in regions]

    def cell(ability: str, k: float, region: str) -> str:
        row = profile.row(ability, SPECIFICITY, k, region)
        text = _fmt_ais(row)
        if row is not None and not math.isnan(row.ci_low):
            text += f" [{row.ci_low:+.3f}, {row.ci_high:+.3f}]"
        return text

    table = [
        [a] + [cell(a, k, region) for k in profile.k_values for region in regions]
        for a in list(profile.abilities) + [MEAN]
        if any(profile.row(a, SPECIFICITY, k, region) for k in profile.k_values for region in regions)
    ]
    parts.append(_md_table(header, table))
    parts += ["", "Diagonal dominance (the ability's own split has the largest AIS in its row, top region):", ""]
    for k in profile.k_values:
        dominance = diagonal_dominance(profile, k)
        known = {a: v for a, v in dominance.items() if v is not None}
        yes = [a for a, v in known.items() if v]
        parts.append(f"- k = {format_k(k)}: {len(yes)} of {len(known)}" + (f" ({', '.join(yes)})" if yes else ""))
    return parts
