"""`benchprof overlap`: how much the abilities' regions share, and where they lie, from the mask files only.

Overlap of two regions A, B (sets of (parameter, flat index)): Jaccard J = |A∩B| / |A∪B| and the shared
fraction |A∩B| / n. Chance level: for independent uniform subsets of sizes n_a, n_b of the E eligible
weights, |A∩B| is hypergeometric with E|A∩B| = n_a n_b / E, and E[J] ≈ E|A∩B| / (n_a + n_b − E|A∩B|)
(the ratio of expectations; |A∩B| concentrates tightly at these sizes).
Writes overlap.csv, layers.csv, overlap_k<k>.png and layers_k<k>.png into the model's profile folder.
"""

from __future__ import annotations

import csv
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchprof import BenchprofError
from benchprof.core.config import Config
from benchprof.core.layout import Layout, format_k, model_folders
from benchprof.core.modeling import layer_index
from benchprof.core.regions import read_region_tensor, region_metadata, region_names
from benchprof.core.storage import write_csv
from benchprof.profile.plots import plot_layers, plot_overlap


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
        names.update(region_names(path))
    shared = {(a, b): 0 for a in abilities for b in abilities}
    per_tensor: dict[str, dict[str, int]] = {a: {} for a in abilities}
    for name in sorted(names):
        indices = {}
        for a, path in mask_files.items():
            found = read_region_tensor(path, name)  # one tensor at a time, like extract: bounded memory
            if found is not None:
                indices[a] = found.numpy()
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


def _tensor_sizes(stats_path: Path) -> dict[str, int]:
    """{tensor: numel} of the candidate tensors, from extract's stats.csv (empty if absent)."""
    if not stats_path.is_file():
        return {}
    with open(stats_path) as f:
        return {row["tensor"]: int(row["numel"]) for row in csv.DictReader(f)}


def layer_rows(result: OverlapResult, model: str, numels: dict[str, int]) -> list[dict[str, Any]]:
    """Where each ability's region lies: selected count per (layer, module), as a fraction of the
    region and of the eligible weights there (numels from stats.csv; empty when unknown)."""
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


def model_overlap(
    cfg: Config, tag: str, plots: bool = True, strict: bool = False
) -> tuple[list[Path], list[dict[str, Any]], list[str]]:
    """One model's overlap files under its profile/ folder: (files written, overlap rows, notes).

    Works on whatever mask files exist (abilities without a mask at some k are left out of that k);
    a set of masks that cannot be compared (different models or candidate sets) is skipped with a note.
    `strict` (the `overlap` command): a configured mask missing beside others, or one that cannot be read or
    compared, is refused in one line instead, before any file is written (a partial overlap.csv would replace a
    whole one).
    """
    layout = Layout(cfg.output_root, tag)
    written: list[Path] = []
    overlap_rows: list[dict[str, Any]] = []
    layers: list[dict[str, Any]] = []
    notes: list[str] = []
    found: list[tuple[float, str, OverlapResult]] = []  # (k, region, its overlap)
    for k in cfg.settings.k_values:
        for region in [r for r in ("top", "bottom", "random") if r in cfg.extract.regions]:
            files = {a: layout.mask_file(a, k, region) for a in cfg.abilities()}
            present = {a: p for a, p in files.items() if p.is_file()}
            if not present:
                continue
            if strict and (missing := [p for p in files.values() if not p.is_file()]):
                raise BenchprofError(f"overlap: {missing[0]}: missing (run `benchprof extract {cfg.path}` first)")
            try:
                found.append((k, region, region_overlap(present, k, region)))
            except BenchprofError as err:
                if strict:
                    raise BenchprofError(f"overlap: {err}") from None
                notes.append(f"overlap skipped: {err}")
    kept = None if strict else notes
    within = [(a, k, result) for k in cfg.settings.k_values for a, result in within_ability(cfg, layout, k, kept)]
    for k, kind, result in found:  # everything read: now written
        if len(set(result.scores.values())) > 1:
            notes.append(
                f"overlap at k={format_k(k)} ({kind}): the masks were ranked by different scores "
                f"({', '.join(f'{a}: {s}' for a, s in result.scores.items())}); rerun `benchprof extract`"
            )
        pairs = [{"model": tag, **result.row(a, b)} for a in result.abilities for b in result.abilities]
        overlap_rows += pairs
        rows = layer_rows(result, tag, _tensor_sizes(layout.mask_stats(result.abilities[0], k)))
        layers += rows
        if plots and kind == "top":
            n = max(result.sizes.values()) if result.sizes else 0
            chance = expected_jaccard(n, n, result.eligible)
            written.append(plot_overlap(pairs, chance, layout.overlap_png(k)))
            written.append(plot_layers(rows, tag, k, layout.layers_png(k)))
    for ability, _, result in within:  # one ability's two region kinds: a row of the ability with itself
        first, second = result.abilities
        overlap_rows.append({"model": tag, **result.row(first, second), "ability_a": ability, "ability_b": ability})
    if overlap_rows:
        write_csv(layout.overlap_csv, OVERLAP_COLUMNS, overlap_rows, digits=6)
        write_csv(layout.layers_csv, LAYER_COLUMNS, layers, digits=6)
        written += [layout.overlap_csv, layout.layers_csv]
    return written, overlap_rows, notes


def within_pairs(cfg: Config) -> list[tuple[str, str]]:
    """The region kinds compared within one ability: each selection's top region with its placebo region (do the
    control's neurons differ from the region they control for?) and the first top region with the other selections'
    (does a second sample of train items choose the same neurons?)."""
    from benchprof.core.region_names import selection_name

    selections = range(1, cfg.extract.selections + 1)
    pairs = []
    if "placebo" in cfg.extract.regions:
        pairs += [(selection_name("top", s), selection_name("placebo", s)) for s in selections]
    return pairs + [("top", selection_name("top", s)) for s in selections if s > 1]


def within_ability(
    cfg: Config, layout: Layout, k: float, notes: list[str] | None = None
) -> list[tuple[str, OverlapResult]]:
    """Per ability and within_pairs pair at k, the overlap of its two regions (region named "<first>~<second>");
    a pair with a mask missing or not comparable is refused in one line, or, given `notes` (aggregate), left out
    (with a note there when its masks cannot be compared)."""
    found = []
    for first, second in within_pairs(cfg):
        for ability in cfg.abilities():
            files = {r: layout.mask_file(ability, k, r) for r in (first, second)}
            if missing := [p for p in files.values() if not p.is_file()]:
                if notes is None:
                    raise BenchprofError(f"overlap: {missing[0]}: missing (run `benchprof extract {cfg.path}` first)")
                continue  # not extracted yet: aggregate reads what there is
            try:
                found.append((ability, region_overlap(files, k, f"{first}~{second}")))
            except BenchprofError as err:
                if notes is None:
                    raise BenchprofError(f"overlap: {err}") from None
                notes.append(f"overlap skipped: {err}")
    return found


def overlap(cfg: Config, model: str | None = None, plots: bool = True) -> None:
    """Overlap of the abilities' regions and where they lie, from the mask files only (no evaluation).

    Writes under <model>/profile/: overlap.csv (per k and region, every ability pair: shared weights, Jaccard,
    shared fraction of n, and the chance level of independent random regions of the same sizes; per ability, its top
    region against its placebo region, "top~placebo", and its other selections'), overlap_k<k>.png (top-region
    Jaccard heatmap, each cell also as a multiple of chance), layers.csv (selected weights per layer and module, as
    a fraction of the region and of the eligible weights there) and layers_k<k>.png. `benchprof aggregate` writes
    them too.

    Arguments:
        cfg: the config (on the command line: the path of config.yml).
        model: only this model (name or tag).
        plots: also draw the PNGs (--noplots to skip).
    """
    started = time.time()
    count = 0
    for spec in cfg.selected_models(model):
        written, rows, notes = model_overlap(cfg, spec.tag, plots, strict=True)
        for line in [overlap_summary(rows)] + notes:
            if line:
                print(line)
        count += len(written)
    if not count:
        raise BenchprofError(f"overlap: no mask files under {cfg.output_root} (run `benchprof extract` first)")
    folders = model_folders(cfg.output_root, [s.tag for s in cfg.selected_models(model)])
    print(f"overlap: {count} files under {folders}/profile in {time.time() - started:.1f}s")


def overlap_summary(rows: list[dict[str, Any]]) -> str:
    """One line per (model, k, region, score): mean off-diagonal Jaccard and shared fraction against chance; and
    one per (model, k) for the region kinds compared within each ability (top~placebo, top~top2, ...)."""
    lines = []
    groups: dict[tuple[str, float, str], list[dict[str, Any]]] = {}
    within: dict[tuple[str, float], dict[str, list[dict[str, Any]]]] = {}
    for r in rows:
        if "~" in r["region"]:  # one ability's two region kinds: its row with itself
            within.setdefault((r["model"], r["k"]), {}).setdefault(r["region"], []).append(r)
        elif r["ability_a"] != r["ability_b"]:
            groups.setdefault((r["model"], r["k"], r["region"]), []).append(r)

    def mean(group: list[dict[str, Any]], key: str) -> float:
        return sum(r[key] for r in group) / len(group)

    for (tag, k, region), group in groups.items():
        scores = ", ".join(sorted({r["score"] for r in group if r["score"]}))
        lines.append(
            f"{tag} k={format_k(k)} {region}"
            + (f" (score {scores})" if scores else "")
            + f": mean Jaccard {mean(group, 'jaccard'):.3f} (chance {mean(group, 'expected_jaccard'):.3f}), "
            f"mean shared fraction {mean(group, 'shared_fraction'):.3f}"
        )
    for (tag, k), kinds in within.items():
        chance = {region: mean(group, "expected_shared") / mean(group, "n") for region, group in kinds.items()}
        shared = [
            f"{region} {mean(group, 'shared_fraction'):.3f} (chance {chance[region]:.3f})"
            for region, group in kinds.items()
        ]
        lines.append(f"{tag} k={format_k(k)} within each ability, mean shared fraction: {'; '.join(shared)}")
    return "\n".join(lines)
