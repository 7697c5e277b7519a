"""Stage `extract`: top, bottom and random regions per ability and k (the method's step 2, README).

n = floor(k · total_params) weights, chosen among the eligible weights of layers
front_removal <= l < L - back_removal: top (the n highest scores), bottom (the n lowest), random (n uniform
draws), by `extract.selection` (exact, or the authors' chunked approximation; weight_selection.py). The
score that ranks the weights comes from weight_scores.py (`extract.score`); an ability-specific score is held
in memory between the selection's passes where it fits HELD_SCORES_BYTES (scores.held). With a neuron score
(stages/neurons.py) the regions are whole MLP neurons. Regions are written by regions.py (sorted indices per
tensor, int32 where they fit; format documented there) beside `stats.csv`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from benchprof import BenchprofError
from benchprof.core.config import NEURON_SCORES, Config, ExtractSettings, ModelSpec
from benchprof.core.console import log_line, progress
from benchprof.core.layout import Layout, model_folders
from benchprof.core.modeling import layer_index
from benchprof.core.options import score_help
from benchprof.core.region_names import random_draw, selection_of
from benchprof.core.regions import Region, write_region
from benchprof.core.selection import Selection, new_k_note, select, with_new_k
from benchprof.core.storage import clear_manifest, is_current, write_csv, write_manifest
from benchprof.stages.weight_scores import ScoreCache, Scores, held, importance_identity, open_scores
from benchprof.stages.weight_selection import (
    ORDER,
    chunk_length,
    chunked_count,
    derived_seed,
    random_positions,
    ranked_regions,
    split_positions,
)

HELD_SCORES_BYTES = 2 << 30  # specific scores of up to 537 M candidate weights: computed once per ability, not per pass
STATS_COLUMNS = ("tensor", "layer", "numel", "region", "selected", "fraction")


def region_inputs(
    cfg: Config,
    ability: str,
    k: float,
    n: int,
    importance: dict[str, Any],
    metadata: dict[str, str],
    selection: str,
    score: str | None = None,
    layout: Layout | None = None,
) -> dict[str, Any]:
    """What one (ability, k) mask folder is computed from (its manifest's inputs; also read by `status`).

    `score` defaults to extract.score. An ability-specific score adds its formula and the identity of
    every other ability's importance file, read from `layout` (default: the layout of the config's
    model whose own importance file has identity `importance`).
    """
    score = score or cfg.extract.score
    inputs = {
        "stage": "extract",
        "ability": ability,
        "k": k,
        "n": n,
        "importance": importance,
        "fingerprint": metadata.get("fingerprint", ""),
        "selection": selection,
        "chunk_size": cfg.extract.chunk_size if selection == "chunked" else None,
        **({"random_size": "top's"} if selection == "chunked" else {}),  # chunked random: top's count, not n
        "regions": cfg.extract.region_names(),
        "random_seed": cfg.extract.random_seed,
        "front_removal": cfg.settings.front_removal,
        "back_removal": cfg.settings.back_removal,
        "score": score,
    }
    if score != "importance":
        from benchprof.stages.weight_scores import score_inputs

        layout = layout or _importance_layout(cfg, ability, importance, metadata)
        others = {b: layout.importance_file(b) if layout else None for b in cfg.abilities() if b != ability}
        inputs["score_inputs"] = score_inputs(score, others)
    return inputs


def _importance_layout(
    cfg: Config, ability: str, importance: dict[str, Any], metadata: dict[str, str]
) -> Layout | None:
    """The layout holding the importance file of identity `importance` (callers that only have the file's
    header, like `status`); None when no configured model has it."""
    for spec in cfg.models:
        if metadata.get("model", spec.tag) not in (spec.tag, spec.name):  # files before 0.2 held the name
            continue
        layout = Layout(cfg.output_root, spec.tag)
        path = layout.importance_file(ability)
        if path.is_file() and importance_identity(path) == importance:
            return layout
    return None


def stats_rows(scores: Scores, regions: dict[str, Region]) -> Iterator[dict[str, object]]:
    """stats.csv's lines: per candidate tensor and region, how many of its weights the region holds."""
    for name, numel in zip(scores.names, scores.numels):
        for region, indices in regions.items():
            count = int(indices[name].numel()) if name in indices else 0
            yield {
                "tensor": name,
                "layer": layer_index(name),
                "numel": numel,
                "region": region,
                "selected": count,
                "fraction": count / numel,
            }


def extract(
    cfg: Config,
    k: Selection = None,
    ability: str | None = None,
    model: str | None = None,
    selection: str | None = None,
    score: str | None = None,
    force: bool = False,
) -> None:
    """Regions per ability and k: top (n largest scores), bottom (n smallest), random (n uniform draws).

    n = floor(k * total parameters), chosen among eligible weights only (scope of the importance
    file, layers front_removal <= l < L - back_removal). Exact global ranking with a deterministic
    tie-break, streamed tensor by tensor; reads only the importance files `finetune` wrote. The score
    is the ability's importance I_a (the authors') or an ability-specific score computed from every
    configured ability's importance (docs/specificity.md); a new score replaces the masks in place.

    Arguments:
        cfg: the config (on the command line: the path of config.yml).
        k: only these k values (one number or a comma-separated list); default settings.k_values. A k that
            settings.k_values does not list is extracted too (`--k 0.01024`).
        ability: only this ability (or a comma-separated list).
        model: only this model (name or tag).
        selection: exact (default: global ranking) or chunked (the authors' per-chunk approximation).
        score: what ranks the weights or neurons (default extract.score), SCORE_HELP. A neuron score's statistic
            is computed here over each ability's train items (stages/neurons.py).
        force: recompute even when the manifest matches.
    """
    from benchprof.core.modeling import pick_device

    cfg = cfg.with_overrides(extract={"selection": selection, "score": score})
    cfg, new_k = with_new_k(cfg, k)
    ks = select(k, cfg.settings.k_values, "--k", float)
    abilities = select(ability, cfg.abilities(), "--ability")
    score = cfg.extract.score
    front, back = cfg.settings.front_removal, cfg.settings.back_removal
    device = pick_device()

    started = time.time()
    written, skipped = 0, 0
    specs = cfg.selected_models(model)
    with progress(total=len(specs) * len(abilities), desc="extract", unit="ability") as bar:
        for spec in specs:
            layout = Layout(cfg.output_root, spec.tag)
            if score in NEURON_SCORES:
                done, current = extract_neurons(cfg, spec, abilities, ks, force, bar.update)
                written, skipped = written + done, skipped + current
                continue
            masks = MaskFolder(layout, spec.tag, cfg.extract, front, back)
            totals = ScoreCache()  # each importance file's pre-pass, shared by the abilities of this model
            for ability_name in abilities:
                done, current = extract_ability(cfg, masks, ability_name, ks, force, device, totals)
                written, skipped = written + done, skipped + current
                bar.update()
    print(
        f"extract: wrote {written} (ability, k) region set(s), {skipped} up to date, under "
        f"{model_folders(cfg.output_root, [s.tag for s in cfg.selected_models(model)])}/<ability>/masks "
        f"in {time.time() - started:.1f}s"
    )
    if new_k:
        print(new_k_note("extract", cfg, new_k))


extract.__doc__ = (extract.__doc__ or "").replace("SCORE_HELP", score_help())  # --help lists the registry's options


def extract_ability(
    cfg: Config, masks: MaskFolder, ability: str, ks: list[float], force: bool, device: str, totals: ScoreCache
) -> tuple[int, int]:
    """extract for one ability with a weight score, at each k not up to date: (region sets written, up to date)."""
    from benchprof.stages.weight_scores import open_specific_scores, other_importance_files

    layout, settings, front, back = masks.layout, masks.settings, masks.front, masks.back
    selection, score, regions = settings.selection, settings.score, settings.region_names()
    path = layout.importance_file(ability)
    if not path.is_file():
        raise BenchprofError(f"{path}: file not found (run `benchprof finetune` first)")
    scores = open_scores(path, front, back, device)
    total_params = int(scores.metadata["total_params"])
    n_layers = int(scores.metadata["n_layers"])
    identity = importance_identity(path)
    others = other_importance_files(layout, ability, cfg.abilities()) if score != "importance" else {}
    todo = {}
    skipped = 0
    for k_value in ks:
        n = math.floor(k_value * total_params)
        if n > scores.total:
            raise BenchprofError(
                f"k={k_value}: n = floor(k * {total_params}) = {n} exceeds the {scores.total} eligible "
                f"weights ({scores.metadata['scope']}, layers {front}..{n_layers - back - 1}); lower k "
                "or front/back_removal"
            )
        inputs = region_inputs(cfg, ability, k_value, n, identity, scores.metadata, selection, score, layout)
        if force or not is_current(layout.masks_output(ability, k_value, regions), inputs):
            todo[k_value] = (n, inputs)
        else:
            skipped += 1
    if not todo:
        return 0, skipped
    k_started = time.time()
    if score != "importance":  # the pre-pass reads every ability's file: only when something is to do
        scores = held(open_specific_scores(score, path, others, front, back, device, totals), HELD_SCORES_BYTES)
    chosen = ranked_regions(scores, {k_value: n for k_value, (n, _) in todo.items()}, settings)
    for k_value, (n, inputs) in todo.items():
        seeds = {}
        for region in regions:  # each random draw its own seed; as many weights as top (chunked: a few more)
            if draw := random_draw(region):
                seeds[region] = derived_seed(settings.random_seed, ability, k_value, draw)
                size = n if selection == "exact" else chunked_count(scores.total, n, settings.chunk_size)
                positions = random_positions(scores.total, size, seeds[region])
                chosen[k_value][region] = split_positions(scores, positions)
        found = RegionSet(ability, k_value, n, chosen[k_value], selection, seeds, inputs, k_started, score)
        write_regions(masks, scores, found)
    log_line(
        f"extract: {ability} ({masks.model_name}): {len(todo)} k value(s), score {score}, {scores.total:,} "
        f"candidate weights in {len(scores.names)} tensors, {time.time() - k_started:.1f}s"
    )
    return len(todo), skipped


@dataclass(frozen=True)
class MaskFolder:
    """Where one model's region files go and what every one of them records: the layout, the model's tag, the
    extract settings and the layers left out."""

    layout: Layout
    model_name: str
    settings: ExtractSettings
    front: int
    back: int


@dataclass
class RegionSet:
    """One (ability, k) folder's regions (each a dict of sorted flat indices per tensor) and what they were
    chosen from: n weights, the selection and score, the random draws' seeds, the manifest's inputs."""

    ability: str
    k: float
    n: int
    regions: dict[str, Region]
    selection: str
    seeds: dict[str, int]
    inputs: dict[str, Any]
    started: float
    score: str = "importance"


def write_regions(folder: MaskFolder, scores: Scores, found: RegionSet) -> None:
    """Mask files, stats.csv, then the manifest (last) for one (ability, k)."""
    layout, ability, k, n, seeds = folder.layout, found.ability, found.k, found.n, found.seeds
    selection = found.selection
    clear_manifest(layout.masks_dir(ability, k))  # a run killed below leaves no manifest over mixed files
    for region, indices in found.regions.items():
        metadata = {
            "fingerprint": scores.metadata.get("fingerprint", ""),
            "total_params": scores.metadata["total_params"],
            "n": str(n),
            "k": repr(float(k)),
            "region": region,
            "ability": ability,
            "model": folder.model_name,
            "selection": "exact" if region in seeds else selection,
            "selected": str(sum(int(v.numel()) for v in indices.values())),
            "eligible": str(scores.total),
            "scope": scores.metadata["scope"],
            "n_layers": scores.metadata["n_layers"],
            "front_removal": str(folder.front),
            "back_removal": str(folder.back),
            "order": ORDER,
        }
        if region in seeds:  # no score: a random region's file (and its evaluations) outlive a score switch
            metadata.update(seed=str(seeds[region]), random_seed=str(folder.settings.random_seed))
            if region != "random":  # the paper's single draw keeps its bytes
                metadata["draw"] = str(random_draw(region))
        elif found.score != "importance":  # absent means importance: masks of the default keep their bytes
            metadata["score"] = found.score
        if region not in seeds and selection == "chunked":
            metadata["chunk_size"] = str(chunk_length(scores.total, n, folder.settings.chunk_size)) if n else ""
        write_region(layout.mask_file(ability, k, region), indices, metadata)
    write_csv(layout.mask_stats(ability, k), STATS_COLUMNS, stats_rows(scores, found.regions), digits=6)
    counts = {region: sum(int(v.numel()) for v in indices.values()) for region, indices in found.regions.items()}
    write_manifest(layout.masks_dir(ability, k), found.inputs, started=found.started, extra={"selected": counts})


def neuron_count(k: float, total_params: int, hidden: int) -> int:
    """Whole neurons in a region of size k: floor(k · total_params / (3 · hidden)), each neuron 3 · hidden weights."""
    return math.floor(k * total_params / (3 * hidden))


def neuron_region_inputs(
    cfg: Config, ability: str, k: float, identities: dict[str, dict[str, Any]], score: str | None = None
) -> dict[str, Any]:
    """What one (ability, k) neuron-region folder is computed from: the attribution files its score reads (the
    ability's own, or every ability's for the contrast; with placebo regions their placebo files too, keyed
    "<ability> placebo"), the score, the regions, the selections and the random seed."""
    inputs = {
        "stage": "extract",
        "unit": "neuron",
        "ability": ability,
        "k": k,
        "attribution": identities,
        "score": score or cfg.extract.score,
        "regions": cfg.extract.region_names(),
        "random_seed": cfg.extract.random_seed,
        "front_removal": cfg.settings.front_removal,
        "back_removal": cfg.settings.back_removal,
    }
    if cfg.extract.selections > 1:  # absent with one: the folders written before selections stay current
        inputs["selections"] = cfg.extract.selections
    return inputs


def attribution_used(cfg: Config, ability: str, score: str) -> list[str]:
    """The abilities whose statistic (neurons.statistic_of) a neuron score of `ability` reads."""
    from benchprof.stages.neurons import contrasted

    return list(cfg.abilities()) if contrasted(score) else [ability]


def placebo_key(ability: str) -> str:
    """The key of an ability's placebo statistic among neuron_region_inputs' attribution identities."""
    return f"{ability} placebo"


def neuron_identities(cfg: Config, layout: Layout, ability: str, statistic: str) -> dict[str, dict[str, Any]]:
    """The identity of every statistic file the regions of `ability` are chosen from (neuron_region_inputs):
    attribution_used's, and with placebo regions their placebo files (placebo_key)."""
    from benchprof.stages.weight_scores import importance_identity

    used = attribution_used(cfg, ability, cfg.extract.score)
    identities = {b: importance_identity(layout.attribution_file(b, statistic)) for b in used}
    if "placebo" in cfg.extract.regions:
        for b in used:
            identities[placebo_key(b)] = importance_identity(layout.attribution_file(b, statistic, placebo=True))
    return identities


def chosen_scores(cfg: Config, statistics: dict[str, dict[str, Any]], ability: str, used: list[str]) -> dict[str, Any]:
    """The neuron scores of each region the score chooses (top, top2, ..., placebo, ...: region_names.selection_of;
    bottom: minus selection 1's top scores), from `statistics` (per kind, top or placebo: every ability's statistic,
    items x neurons), each selection reading its own rows (statistic_files.selection_rows) of the abilities `used`."""
    from benchprof.stages.neurons import neuron_scores
    from benchprof.stages.statistic_files import selection_rows

    regions = cfg.extract.region_names()
    ranked: dict[str, Any] = {}
    for region in regions:
        if chosen := selection_of(region):
            source = statistics[chosen[0]]
            rows = selection_rows(cfg, chosen[1], len(source[ability]))
            ranked[region] = neuron_scores({b: source[b][rows] for b in used}, ability, cfg.extract.score)
    if "bottom" in regions:  # the lowest scores of selection 1
        rows = selection_rows(cfg, 1, len(statistics["top"][ability]))
        ranked["bottom"] = -neuron_scores({b: statistics["top"][b][rows] for b in used}, ability, cfg.extract.score)
    return ranked


def extract_neurons(
    cfg: Config, spec: ModelSpec, abilities: list[str], ks: list[float], force: bool, done: Callable[[], object]
) -> tuple[int, int]:
    """extract with a neuron score: regions of whole MLP neurons (stages/neurons.py) per ability and k, written
    in the region format beside the weight regions' (top: the highest scores; bottom: the lowest; random: as many
    uniform neurons). With extract.selections = S, top2 ... topS are the top of the same score over the ability's
    train items of samples 2 ... S (statistic_files.selection_rows; every contrasted ability's from its own sample
    s); placebo, placebo2 ... the top of the same score over the placebo items (statistic_files.placebo_items) of
    each sample. Calls `done` after each ability (the stage's bar). Returns (region sets written, up to date)."""
    import torch

    from benchprof.stages.neurons import Neurons, mlp_name, neuron_ids_region, random_neurons, statistic_of, top_neurons
    from benchprof.stages.statistic_files import attributions

    score, regions = cfg.extract.score, cfg.extract.region_names()
    statistic = statistic_of(score)
    layout = Layout(cfg.output_root, spec.tag)
    used = list(dict.fromkeys(b for a in abilities for b in attribution_used(cfg, a, score)))
    values, meta = attributions(cfg, spec, used, force, statistic)
    placebo = attributions(cfg, spec, used, force, statistic, placebo=True)[0] if "placebo" in regions else {}
    hidden, inter, n_layers = int(meta["hidden"]), int(meta["intermediate"]), int(meta["n_layers"])
    shape = Neurons([], hidden, inter)
    front, back = cfg.settings.front_removal, cfg.settings.back_removal
    masks = MaskFolder(layout, spec.tag, cfg.extract, front, back)
    eligible = torch.arange(front * inter, (n_layers - back) * inter)
    layers = range(front, n_layers - back)
    names = sorted(mlp_name(i, m) for i in layers for m in ("gate_proj", "up_proj", "down_proj"))
    # the region files' header and stats.csv read these, as they read an importance file's
    sizes = [hidden * inter] * len(names)
    frame = Scores(layout.attribution_file(abilities[0], statistic), {**meta, "scope": "mlp"}, names, sizes)
    outside = torch.ones(int(meta["n_layers"]) * inter, dtype=torch.bool)
    outside[eligible] = False
    written, skipped = 0, 0
    for ability in abilities:
        started, written_before = time.time(), written
        used_here = attribution_used(cfg, ability, score)
        identities = neuron_identities(cfg, layout, ability, statistic)
        ranked = chosen_scores(cfg, {"top": values, "placebo": placebo}, ability, used_here)
        for scores_of in ranked.values():
            scores_of[outside.numpy()] = -math.inf  # front/back_removal layers: never chosen
        for k in ks:
            count = neuron_count(k, int(meta["total_params"]), hidden)
            if count < 1:
                raise BenchprofError(f"k={k}: selects no whole neuron (each is 3 x {hidden} weights); raise k")
            if count > len(eligible) // 2:
                raise BenchprofError(f"k={k}: {count} neurons exceed half of the {len(eligible)} eligible; lower k")
            inputs = neuron_region_inputs(cfg, ability, k, identities)
            if not force and is_current(layout.masks_output(ability, k, regions), inputs):
                skipped += 1
                continue
            ids: dict[str, list[int]] = {region: top_neurons(scores_of, count) for region, scores_of in ranked.items()}
            seeds = {}
            for region in regions:
                if draw := random_draw(region):
                    seeds[region] = derived_seed(cfg.extract.random_seed, ability, k, draw)
                    picks = random_neurons(len(eligible), count, seeds[region] % 2**32)
                    ids[region] = sorted(int(eligible[i]) for i in picks)
            chosen = {r: neuron_ids_region(shape, ids[r]) for r in regions}
            n = 3 * hidden * count
            found = RegionSet(ability, k, n, chosen, "exact", seeds, inputs, started, score)
            write_regions(masks, frame, found)
            written += 1
        if written_before != written:
            log_line(f"extract: {ability} ({spec.tag}): {written - written_before} k value(s), score {score}, neurons")
        done()
    return written, skipped
