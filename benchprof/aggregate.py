"""Stage `aggregate`: a model's evaluations -> Ability Impact Scores with intervals -> tables and plots.

Reads the result JSONs and per-sample files (results.py), computes every AIS and its paired bootstrap
interval (ais.py) and the region specificity rows, then writes the profile (report.py, plots.py) and the
overlap of the regions (overlap.py) into <model>/profile/ (file names: layout.py). `load_scores` returns
the same numbers as a Profile for notebooks and the demo.
"""

from __future__ import annotations

import math
import time
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import BenchprofError
from .ais import (
    ais_above_chance,
    bh_qvalues,
    bootstrap_ais,
    bootstrap_p_value,
    cell_rng,
    chance_level,
    chance_test,
    flip_counts,
    impact_score,
    mcnemar_p,
    mean_specificity_bootstrap,
    minimum_detectable_ais,
    minimum_detectable_ais_continuous,
    null_calibration,
    percentile_ci,
    signed_rank_p,
    specificity_score,
    two_level_bootstrap,
)
from .analyses import JointCell, JointDraws, compare_models, profile_analyses, write_analyses, write_comparison
from .config import AggregateSettings, Config, random_draw
from .layout import CompareLayout, Layout, Variant, format_k
from .overlap import mask_score, model_overlap, overlap_summary
from .plots import write_plots
from .profile import (
    ADJUSTED,
    MEAN,
    P_CORRECT,
    SPECIFICITY,
    SPECIFICITY_METRIC,
    AisRow,
    MissingEval,
    NullCalibration,
    Profile,
    ability_benchmarks,
)
from .regions import region_metadata
from .report import ais_table, breadth_summary, counted, specificity_summary, write_tables
from .results import (
    DocKey,
    Unusable,
    evaluation_hashes,
    option_counts,
    primary_metric,
    read_clusters,
    read_p_correct,
    read_results,
    read_samples,
    split_key,
)
from .storage import clear_manifest, content_record, write_manifest

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

NO_ORIGINAL = "no usable original score"

PerDoc = dict[DocKey, float]  # one evaluation's per-document metric values
CellKey = tuple[str, float, str, str]  # (ability, k, benchmark, region)


def default_report_k(cfg: Config, report_k: float | str | None = None) -> float:
    """The k of the headline tables: `report_k`, else aggregate.report_k, else the largest k."""
    if report_k is None:
        report_k = cfg.aggregate.report_k
    if report_k is None:
        return max(cfg.settings.k_values)
    try:
        wanted = float(report_k)
    except (TypeError, ValueError):
        raise BenchprofError(f"--report_k: {report_k!r} is not a number") from None
    for k in cfg.settings.k_values:
        if math.isclose(k, wanted, rel_tol=1e-9):
            return k
    raise BenchprofError(
        f"--report_k: {report_k} is not one of settings.k_values "
        f"({', '.join(format_k(k) for k in cfg.settings.k_values)})"
    )


def profile_inputs(cfg: Config, report_k: float | str | None = None) -> dict[str, Any]:
    """What a model's profile is computed from: its manifest's inputs (`status` compares them)."""
    return {
        "aggregate": asdict(cfg.aggregate),
        "report_k": default_report_k(cfg, report_k),
        "abilities": cfg.abilities(),
        "benchmarks": list(cfg.evals.benchmarks),
        "k_values": list(cfg.settings.k_values),
        "regions": cfg.extract.region_names(),
    }


@dataclass
class _Score:
    value: float
    per_doc: PerDoc | None  # None without samples
    limit: object = None
    n_samples: object = None
    lower_is_better: bool = False  # the result JSON's higher_is_better says False for the metric


def _load_score(
    layout: Layout,
    variant: Variant,
    benchmark: str,
    metric_key: str,
    notes: list[str],
    mask_hash: Callable[[Variant], str | None] | None = None,
) -> _Score:
    path = layout.eval_file(variant, benchmark)
    if not path.is_file():
        raise Unusable("missing")
    payload, results = read_results(path)
    inputs = payload.get("inputs")
    recorded = inputs.get("mask") if isinstance(inputs, dict) else None
    current = mask_hash(variant) if mask_hash is not None and recorded else None
    if current and recorded != current:  # e.g. extract.score switched after this evaluation
        raise Unusable("evaluated on a mask that extract has since replaced (rerun `benchprof evaluate`)")
    value = results.get(metric_key)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
        raise Unusable(f"metric {metric_key!r} not in results")
    samples = layout.samples_file(variant, benchmark)
    recorded_files = payload.get("files")
    recorded_files = recorded_files if isinstance(recorded_files, dict) else {}
    if samples.name in recorded_files and (
        not samples.is_file() or content_record(samples) != recorded_files[samples.name]
    ):
        raise Unusable("per-sample file damaged since it was written (rerun `benchprof evaluate`)")
    per_doc, why = read_samples(samples, metric_key)
    if why and why != "no per-sample file":
        notes.append(f"{benchmark} {variant.label()}: {why}; no interval")
    better = payload.get("higher_is_better")
    task_better = better.get(payload.get("primary_task") or benchmark) if isinstance(better, dict) else None
    lower = isinstance(task_better, dict) and task_better.get(split_key(metric_key)[0]) is False
    return _Score(float(value), per_doc, payload.get("limit"), payload.get("n_samples"), lower)


def _load_p_correct(layout: Layout, variant: Variant, benchmark: str, metric_key: str, base: _Score) -> _Score | None:
    """One evaluation's per-document p_correct as a score (its mean over the documents), or None where the
    samples file has no option log-likelihoods to compute it from (generation tasks) or the metric is
    lower-is-better. Only for documents the headline score of `base` (the original's) also has."""
    import numpy as np

    if base.lower_is_better:
        return None
    per_doc, _ = read_p_correct(layout.samples_file(variant, benchmark), metric_key)
    if per_doc is None or (base.per_doc is not None and set(per_doc) != set(base.per_doc)):
        return None
    return _Score(float(np.mean(list(per_doc.values()))), per_doc, base.limit, base.n_samples)


def region_provenance(layout: Layout, abilities: list[str], k_values: list[float], notes: list[str]) -> tuple[str, str]:
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


def load_scores(
    cfg: Config,
    model: str | None = None,
    report_k: float | str | None = None,
    bootstrap: int | None = None,
    progress: bool = True,
    joint_out: JointDraws | None = None,
) -> Profile:
    """Read one model's evaluations and compute every AIS with its interval, each benchmark's breadth and the
    similarity of the benchmarks (analyses.py); no files written.

    Arguments:
        cfg: the config.
        model: model name or tag; default the first model.
        report_k: k of the headline tables; default aggregate.report_k or the largest k.
        bootstrap: resamples; default aggregate.bootstrap (0: no intervals).
        progress: show a progress bar on a terminal.
        joint_out: receives the joint resamples of each benchmark's profile (for the comparison across models).
    """
    import numpy as np

    from .console import progress as progress_bar
    from .storage import file_hash

    spec = cfg.model(model)
    layout = Layout(cfg.output_root, spec.tag)
    settings = cfg.aggregate
    resamples = settings.bootstrap if bootstrap is None else int(bootstrap)
    profile = Profile(
        model=spec.tag,
        name=spec.name,
        abilities=cfg.abilities(),
        benchmarks=list(cfg.evals.benchmarks),
        k_values=list(cfg.settings.k_values),
        regions=cfg.extract.region_names(),
        report_k=default_report_k(cfg, report_k),
        threshold=settings.threshold,
        bootstrap=resamples,
        alpha=settings.alpha,
    )
    variants = [Variant(a, k, r) for a in profile.abilities for k in profile.k_values for r in profile.regions]
    profile.score, profile.loss_on = region_provenance(layout, profile.abilities, profile.k_values, profile.notes)
    mask_hashes: dict[Variant, str | None] = {}
    samples: dict[CellKey, NDArray[np.float64]] = {}  # bootstrap AIS samples of each cell and region
    original_docs: dict[str, PerDoc] = {}  # ability splits' per-document values, for the mean specificity
    ablated_docs: dict[tuple[str, str, float, str], PerDoc] = {}  # (split, ability, k, region) -> values
    splits = ability_benchmarks(profile.benchmarks)
    row_spread: dict[int, float] = {}  # id(row) -> sd of a continuous row's paired differences
    joint_cells: list[JointCell] = []  # per (benchmark, k): every ability's top region on the same items

    def mask_hash(variant: Variant) -> str | None:
        if variant not in mask_hashes:
            path = layout.mask_file(*variant.parts())
            mask_hashes[variant] = file_hash(path) if path.is_file() else None
        return mask_hashes[variant]

    def missing(benchmark: str, variant: Variant, reason: str) -> None:
        path = layout.eval_file(variant, benchmark)
        profile.missing.append(MissingEval(benchmark, variant.label(), str(path), reason))

    bar = progress_bar(
        total=len(profile.benchmarks) * len(profile.abilities) * len(profile.k_values),
        desc=f"aggregate {spec.tag}",
        unit="cell",
        disable=None if progress else True,
    )
    for benchmark in profile.benchmarks:
        original_path = layout.eval_file(Variant(), benchmark)
        metric_key = None
        try:
            if not original_path.is_file():
                raise Unusable("missing")
            _, results = read_results(original_path)
            metric_key = primary_metric(results, settings.metrics.get(benchmark))
            if metric_key is None:
                wanted = settings.metrics.get(benchmark) or "any metric"
                raise Unusable(f"{wanted!r} not in results (has: {', '.join(results)})")
            original = _load_score(layout, Variant(), benchmark, metric_key, profile.notes)
        except Unusable as err:
            missing(benchmark, Variant(), str(err))
            for variant in variants:  # their rows cannot be computed: list them, never drop them
                missing(benchmark, variant, NO_ORIGINAL)
            bar.update(len(profile.abilities) * len(profile.k_values))
            continue
        profile.metrics[benchmark] = metric_key
        profile.original_scores[benchmark] = original.value
        options = option_counts(layout.samples_file(Variant(), benchmark))
        chance = settings.chance.get(benchmark, chance_level(options) if options else 0.0)
        profile.chance[benchmark] = chance
        if original.per_doc is not None:  # is the original above chance at all? (one-sided)
            profile.chance_p[benchmark] = chance_test(np.array(list(original.per_doc.values())), chance)
        if benchmark in splits and original.per_doc is not None:
            original_docs[benchmark] = original.per_doc
        if original.per_doc is not None:
            doc_mean = float(np.mean(list(original.per_doc.values())))
            if not math.isclose(doc_mean, original.value, abs_tol=1e-6):
                profile.notes.append(
                    f"{benchmark}: the reported {metric_key} ({original.value:.4f}) is not the mean over "
                    f"documents ({doc_mean:.4f}); intervals are for the document mean"
                )
        clusters = read_clusters(layout.samples_file(Variant(), benchmark)) if settings.clusters else {}
        p_original = _load_p_correct(layout, Variant(), benchmark, metric_key, original) if options else None

        loaded: dict[tuple[str, float], dict[str, _Score]] = {}  # (ability, k) -> region -> score
        p_loaded: dict[tuple[str, float], dict[str, _Score]] = {}  # the same on p_correct
        for ability in profile.abilities:
            for k in profile.k_values:
                ablated: dict[str, _Score] = {}
                for region in profile.regions:
                    variant = Variant(ability, k, region)
                    try:
                        ablated[region] = _load_score(layout, variant, benchmark, metric_key, profile.notes, mask_hash)
                    except Unusable as err:
                        missing(benchmark, variant, str(err))
                        continue
                    score = ablated[region]
                    if (
                        score.per_doc is not None
                        and original.per_doc is not None
                        and set(score.per_doc) != set(original.per_doc)
                    ) or (score.limit, score.n_samples) != (original.limit, original.n_samples):
                        # one population per cell: never an AIS over other documents than the original's
                        del ablated[region]
                        missing(
                            benchmark,
                            variant,
                            f"scored other documents than {layout.eval_file(Variant(), benchmark)} "
                            f"(limit/n_samples {score.limit}/{score.n_samples} against "
                            f"{original.limit}/{original.n_samples}); rerun `benchprof evaluate` with one evals.limit",
                        )
                loaded[(ability, k)] = ablated
                if p_original is not None:  # the same cell on each item's probability of the correct option
                    p_loaded[(ability, k)] = {
                        region: p_score
                        for region in ablated
                        if (
                            p_score := _load_p_correct(
                                layout, Variant(ability, k, region), benchmark, metric_key, p_original
                            )
                        )
                    }
                if benchmark in splits:
                    ablated_docs.update(
                        {
                            (benchmark, ability, k, region): score.per_doc
                            for region, score in ablated.items()
                            if score.per_doc is not None
                        }
                    )
                bar.update(1)
        for k in profile.k_values:
            joint = joint_cell(profile.abilities, benchmark, k, original, loaded, clusters)
            if joint is not None:
                joint_cells.append(joint)
        # the control of every top region at k: the random draws of every ability at k on this benchmark
        pools = {k: random_pool(loaded, k) for k in profile.k_values}
        p_pools = {k: random_pool(p_loaded, k) for k in profile.k_values}
        for (ability, k), ablated in loaded.items():
            cell = Cell(ability, k, benchmark, resamples, settings.seed, clusters)
            rows = _cell_rows(profile, cell, metric_key, original, ablated, samples, row_spread, pools[k])
            profile.rows.extend(rows)
            if (ability, k) in p_loaded and p_original is not None:
                rows = _cell_rows(
                    profile, cell, P_CORRECT, p_original, p_loaded[(ability, k)], None, row_spread, p_pools[k]
                )
                profile.rows.extend(rows)
        if resamples > 0:
            for k in profile.k_values:
                calibration = _null_calibration(benchmark, k, original, pools[k], resamples, settings, clusters)
                if calibration is not None:
                    profile.null_calibration.append(calibration)
    bar.close()
    profile.rows.extend(specificity_rows(profile, samples))
    profile.rows.extend(mean_specificity_rows(profile, original_docs, ablated_docs, resamples, settings.seed))
    correct_for_multiplicity(profile, row_spread)
    draws = profile_analyses(profile, joint_cells, resamples, settings.seed)  # after the q-values: breadth counts stars
    if joint_out is not None:
        joint_out.update(draws)
    return profile


def joint_cell(
    abilities: list[str],
    benchmark: str,
    k: float,
    original: _Score,
    loaded: dict[tuple[str, float], dict[str, _Score]],
    clusters: dict[tuple[Any, Any], str],
) -> JointCell | None:
    """One benchmark at k for the joint resample of its profile (analyses.JointCell): the original's and every
    ability's top-region per-item scores on the items all of them hold, sorted by key (the same order in every
    model); None without per-item scores."""
    import numpy as np

    if original.per_doc is None:
        return None
    tops = {a: loaded.get((a, k), {}).get("top") for a in abilities}
    per_doc = {a: score.per_doc for a, score in tops.items() if score is not None and score.per_doc is not None}
    if not per_doc:
        return None
    shared = set(original.per_doc)
    for values in per_doc.values():
        shared &= set(values)
    docs = sorted(shared, key=lambda doc: tuple(str(part) for part in doc))
    if not docs:
        return None
    ablated = np.full((len(abilities), len(docs)), np.nan)
    for i, ability in enumerate(abilities):
        if ability in per_doc:
            ablated[i] = [per_doc[ability][d] for d in docs]
    cluster_ids, strata = Cell(MEAN, k, benchmark, 0, 0, clusters).groups(docs)
    return JointCell(
        benchmark,
        k,
        np.array([original.per_doc[d] for d in docs]),
        ablated,
        cluster_ids,
        strata,
        -1.0 if original.lower_is_better else 1.0,
        zlib.crc32(repr(docs).encode()),
    )


def correct_for_multiplicity(profile: Profile, row_spread: dict[int, float]) -> None:
    """q-values, stars and minimum detectable AIS over the model's profile.

    Two families, each every row with a p-value: the headline metric's rows (each ability x benchmark x k x
    region, top-random and specificity rows included) and the p_correct rows, which ask the same questions
    of another metric (a reader picks one metric per question; pooling them would halve the power of
    both). Benjamini–Hochberg q-values within each, `significant` = q < aggregate.alpha, so the expected
    share of false stars among a family's stars is at most alpha. The minimum detectable AIS of a row uses
    alpha / (family size), a conservative stand-in for the BH threshold, which depends on how many other
    rows are discoveries.
    """
    import numpy as np

    discordance: dict[str, list[float]] = {}
    for is_p_correct in (False, True):
        family = [
            row for row in profile.rows if not math.isnan(row.p_value) and (row.metric == P_CORRECT) == is_p_correct
        ]
        if is_p_correct:
            profile.family_size_p_correct = len(family)
        else:
            profile.family_size = len(family)
        if not family:
            continue
        for row, q in zip(family, bh_qvalues(np.array([row.p_value for row in family]))):
            row.q_value = float(q)
            material = profile.bootstrap > 0 and row.dropped > 0.05 * profile.bootstrap
            if material:  # a material share of resamples undefined: the interval is over a selected rest
                profile.notes.append(
                    f"{row.benchmark} {row.ability}/k{format_k(row.k)}/{row.region}: {row.dropped} of "
                    f"{profile.bootstrap} resamples had no AIS (original mean 0); its interval is over the rest "
                    "and it gets no star"
                )
            row.significant = bool(q < profile.alpha) and not material
        level = profile.alpha / len(family)
        for row in family:
            if row.n_docs and row.flips_lost is not None and row.flips_gained is not None:
                share = (row.flips_lost + row.flips_gained) / row.n_docs
                row.mde = float(minimum_detectable_ais(row.n_docs, share, row.score_original, level))
                if row.region == "top" and math.isclose(row.k, profile.report_k):
                    discordance.setdefault(row.benchmark, []).append(share)
            elif id(row) in row_spread:
                spread = row_spread[id(row)]
                row.mde = float(minimum_detectable_ais_continuous(row.n_docs, spread, row.score_original, level))
    profile.discordance = {b: float(np.median(shares)) for b, shares in discordance.items()}


def _set_interval(row: AisRow, draws: NDArray[np.float64], test: bool = False) -> None:
    """The 95% percentile interval of a row's bootstrap draws; with `test`, also its p-value (derived
    rows: top-random and specificity, whose null is 0). Stars come later, from the q-values."""
    import numpy as np

    row.ci_low, row.ci_high = percentile_ci(draws)
    row.dropped = int(np.isnan(draws).sum())
    if test:
        row.p_value = float(bootstrap_p_value(draws))


def random_pool(loaded: dict[tuple[str, float], dict[str, _Score]], k: float) -> list[_Score]:
    """Every random draw at k on one benchmark, of every ability (random, random2, ...): the control
    distribution of random regions of that size. Where the original has per-document values, only draws
    that have them too (the pool the interval resamples is the pool of the point estimate)."""
    draws = [
        score
        for (ability, k_), ablated in loaded.items()
        if math.isclose(k_, k)
        for region, score in ablated.items()
        if random_draw(region)
    ]
    with_docs = [score for score in draws if score.per_doc is not None]
    return with_docs or draws


def _null_calibration(
    benchmark: str,
    k: float,
    original: _Score,
    pool: list[_Score],
    resamples: int,
    settings: AggregateSettings,
    clusters: dict[tuple[Any, Any], str],
) -> NullCalibration | None:
    """ais.null_calibration on one benchmark at k: each random draw of the pool tested, as a top region
    would be, against the others; None with fewer than two draws with per-document values."""
    import numpy as np

    if original.per_doc is None or len(pool) < 2 or any(score.per_doc is None for score in pool):
        return None
    docs = list(original.per_doc)
    base = np.array([original.per_doc[d] for d in docs])
    draws = np.array([[score.per_doc[d] for d in docs] for score in pool if score.per_doc is not None])
    cell = Cell(MEAN, k, benchmark, resamples, settings.seed, clusters)
    cluster_ids, strata = cell.groups(docs)
    p_values, share = null_calibration(
        base,
        draws,
        resamples,
        cell_rng(settings.seed + 3, "null", k, benchmark),
        settings.alpha,
        cluster_ids,
        strata,
    )
    flagged = int(np.sum(p_values < settings.alpha))
    return NullCalibration(benchmark, k, len(pool), flagged, share, [float(p) for p in p_values])


@dataclass
class Cell:
    """One (ability, k, benchmark) cell of the profile and how its bootstrap resamples."""

    ability: str
    k: float
    benchmark: str
    resamples: int
    seed: int
    clusters: dict[tuple[Any, Any], str]  # (task, doc_id) -> cluster, where the documents carry one

    def groups(self, docs: list[DocKey]) -> tuple[list[str] | None, list[str] | None]:
        """(cluster ids, stratum ids) of `docs` for ais.resample_counts, None where there are none: a
        document's cluster within its task (a document without one is its own), the task as stratum when
        the benchmark is a group of several subtasks."""
        tasks = [str(task) for task, _, _ in docs]
        strata = tasks if len(set(tasks)) > 1 else None
        if not any((task, doc_id) in self.clusters for task, doc_id, _ in docs):
            return None, strata
        clusters = [f"{task}\x00{self.clusters.get((task, doc_id), f'document {doc_id}')}" for task, doc_id, _ in docs]
        return clusters, strata


def _cell_rows(
    profile: Profile,
    cell: Cell,
    metric: str,
    original: _Score,
    ablated: dict[str, _Score],
    samples_out: dict[CellKey, NDArray[np.float64]] | None = None,
    row_spread: dict[int, float] | None = None,
    pool: list[_Score] | None = None,
) -> list[AisRow]:
    """The rows of one (ability, k, benchmark) cell on one metric: one per region present, plus top-random.

    top-random = AIS(top) − the mean AIS of the `pool` of random draws at k (every ability's; default
    this cell's own draws), its interval the two-level bootstrap over items and draws
    (ais.two_level_bootstrap) and a bootstrap p-value. Each region row gets its paired test against the
    original (exact McNemar for 0/1 metrics, Wilcoxon signed-rank for continuous ones). `samples_out[(ability,
    k, benchmark, region)]` receives each region's bootstrap AIS samples, `row_spread[id(row)]` the sd of
    a continuous row's paired differences (for its minimum detectable AIS)."""
    import numpy as np

    row_spread = {} if row_spread is None else row_spread
    ability, k, benchmark, resamples = cell.ability, cell.k, cell.benchmark, cell.resamples

    def new_row(region: str, score_ablated: float | None, ais: float) -> AisRow:
        return AisRow(profile.model, ability, benchmark, k, region, metric, original.value, score_ablated, ais)

    # AIS > 0 means the ablation hurt: for a lower-is-better metric (a loss, an error rate) that is s' > s
    sign = -1.0 if original.lower_is_better else 1.0
    rows = {
        region: new_row(region, score.value, sign * impact_score(original.value, score.value))
        for region, score in ablated.items()
    }
    control = pool if pool is not None else [score for region, score in ablated.items() if random_draw(region)]
    if "top" in rows and control:
        control_ais = [sign * impact_score(original.value, score.value) for score in control]
        rows[ADJUSTED] = new_row(ADJUSTED, None, rows["top"].ais - float(np.mean(control_ais)))
        rows[ADJUSTED].control_draws = len(control)

    # paired bootstrap over the documents every available per-sample file shares
    paired = {region: score.per_doc for region, score in ablated.items() if score.per_doc is not None}
    if resamples > 0 and original.per_doc is not None and paired:
        shared = set(original.per_doc)
        for per_doc in paired.values():
            shared &= set(per_doc)
        docs = [d for d in original.per_doc if d in shared]  # the original file's order
        if len(docs) < len(original.per_doc):
            profile.notes.append(
                f"{benchmark} {ability}/k{format_k(k)}: intervals over the {len(docs)} of "
                f"{len(original.per_doc)} documents that every per-sample file holds"
            )
        if docs:
            base = np.array([original.per_doc[d] for d in docs])
            matrix = np.array([[per_doc[d] for d in docs] for per_doc in paired.values()])
            clusters, strata = cell.groups(docs)
            rng = cell_rng(cell.seed, ability, k, benchmark)
            draws = sign * bootstrap_ais(base, matrix, resamples, rng, clusters=clusters, strata=strata)
            samples = dict(zip(paired, draws))
            if ADJUSTED in rows and "top" in paired and all(score.per_doc is not None for score in control):
                pool_values = np.array([[score.per_doc[d] for d in docs] for score in control if score.per_doc])
                top_values = np.array([paired["top"][d] for d in docs])
                rng = cell_rng(cell.seed + 2, ability, k, benchmark)  # the two-level bootstrap's own draws
                two_level = two_level_bootstrap(base, top_values, pool_values, resamples, rng, clusters, strata)
                samples[ADJUSTED] = sign * two_level
            for region, values in samples.items():
                if samples_out is not None:
                    samples_out[(ability, k, benchmark, region)] = values
                row = rows[region]
                _set_interval(row, values, test=region == ADJUSTED)
                row.n_docs = len(docs)
            binary = bool(np.isin(base, (0.0, 1.0)).all() and np.isin(matrix, (0.0, 1.0)).all())
            for region, values_ablated in zip(paired, matrix):
                row = rows[region]
                if math.isnan(row.ais):
                    continue  # AIS undefined (original score 0): nothing to test
                if binary:  # exact McNemar on the discordant documents
                    lost, gained = flip_counts(base, values_ablated)
                    if sign < 0:  # lower is better: 0 -> 1 is the loss
                        lost, gained = gained, lost
                    row.flips_lost, row.flips_gained = int(lost), int(gained)
                    row.p_value = float(mcnemar_p(lost, gained))
                else:
                    row.p_value = float(signed_rank_p(base, values_ablated, clusters))
                    row_spread[id(row)] = float(np.std(base - values_ablated, ddof=1)) if len(docs) > 1 else math.nan
    chance = profile.chance.get(benchmark, math.nan)
    for row in rows.values():
        if row.score_ablated is not None:
            row.chance = chance
            if sign > 0:  # a chance level means nothing for a loss
                row.ais_above_chance = float(ais_above_chance(row.score_original, row.score_ablated, chance))
    return list(rows.values())


def specificity_rows(profile: Profile, samples: dict[CellKey, NDArray[np.float64]]) -> list[AisRow]:
    """ais.csv rows (benchmark "specificity") per (ability, k, region): AIS on the ability's own split
    minus the mean AIS on every other ability split in evals.benchmarks (a fixed set: when one of them
    has no AIS, the row has no value and a note says which); `samples[(ability, k, benchmark, region)]`
    holds the cell's bootstrap AIS samples (same resample count everywhere), when there were per-sample files."""
    own_splits = ability_benchmarks(profile.benchmarks)
    rows = []
    for ability in profile.abilities:
        if ability not in own_splits:
            continue
        for k in profile.k_values:
            for region in profile.regions_with_adjusted:
                own = profile.row(ability, ability, k, region)
                cells = {b: profile.row(ability, b, k, region) for b in own_splits if b != ability}
                lacking = [b for b, r in cells.items() if r is None or math.isnan(r.ais)]
                if own is None or math.isnan(own.ais) or not cells:
                    continue
                if lacking:
                    profile.notes.append(
                        f"specificity of {ability} at k={format_k(k)} ({region}): no value, "
                        f"no AIS on {', '.join(lacking)}"
                    )
                    continue
                others = [r for r in cells.values() if r is not None]
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
                present = [d for d in draws if d is not None]
                if len(present) == len(draws) and len({len(d) for d in present}) == 1:
                    _set_interval(row, specificity_score(present[0], present[1:]), test=True)
                rows.append(row)
    return rows


def mean_specificity_rows(
    profile: Profile,
    original_docs: dict[str, PerDoc],
    ablated_docs: dict[tuple[str, str, float, str], PerDoc],
    resamples: int,
    seed: int,
) -> list[AisRow]:
    """Rows of ability MEAN: the mean of the abilities' specificity per (k, region), over the abilities
    with a specificity row whose every cell (ability, each ability split) was evaluated; the interval
    from ais.mean_specificity_bootstrap over the documents every per-sample file of a split holds.

    `original_docs[split]` holds the original per-document values of an ability split,
    `ablated_docs[(split, ability, k, region)]` the ablated ones.
    """
    import numpy as np

    splits = ability_benchmarks(profile.benchmarks)
    rows = []
    for k in profile.k_values:
        for region in profile.regions_with_adjusted:
            members = [
                a
                for a in profile.abilities
                if profile.row(a, SPECIFICITY, k, region) is not None
                and all((r := profile.row(a, b, k, region)) is not None and not math.isnan(r.ais) for b in splits)
            ]
            if len(members) < 2:
                continue
            spec = [r.ais for a in members if (r := profile.row(a, SPECIFICITY, k, region)) is not None]
            row = AisRow(
                profile.model, MEAN, SPECIFICITY, k, region, SPECIFICITY_METRIC, math.nan, None, float(np.mean(spec))
            )
            parts = ("top", POOL) if region == ADJUSTED else (region,)
            if resamples > 0:
                docs = _with_pool(ablated_docs, splits, k, members) if region == ADJUSTED else ablated_docs
                draws = _mean_specificity_draws(members, splits, k, parts, original_docs, docs, resamples, seed)
                if draws is not None:
                    _set_interval(row, draws, test=True)
            rows.append(row)
    return rows


POOL = "random pool"  # the per-document mean over the random draws at k, in _with_pool


def _with_pool(
    ablated_docs: dict[tuple[str, str, float, str], PerDoc], splits: list[str], k: float, members: list[str]
) -> dict[tuple[str, str, float, str], PerDoc]:
    """`ablated_docs` plus, per split, the per-document mean over every random draw at k (all abilities'),
    under (split, member, k, POOL) for each member: the pooled control of the top-random rows. AIS is
    linear in the ablated mean, so the mean AIS over the draws is the AIS of this per-document mean; the
    mean specificity's interval resamples the items, not the draws."""
    out = dict(ablated_docs)
    for split in splits:
        draws = [
            v for (s, _, k_, r), v in ablated_docs.items() if s == split and math.isclose(k_, k) and random_draw(r)
        ]
        if not draws:
            continue
        shared = set.intersection(*(set(v) for v in draws))
        pooled = {d: sum(v[d] for v in draws) / len(draws) for d in shared}
        out.update({(split, a, k, POOL): pooled for a in members})
    return out


def _mean_specificity_draws(
    members: list[str],
    splits: list[str],
    k: float,
    parts: tuple[str, ...],
    original_docs: dict[str, PerDoc],
    ablated_docs: dict[tuple[str, str, float, str], PerDoc],
    resamples: int,
    seed: int,
) -> NDArray[np.float64] | None:
    """The documents of each split as arrays for ais.mean_specificity_bootstrap, and its samples; None
    when a per-sample file is missing or a split has no document every file holds."""
    import numpy as np

    original, ablated = [], []
    for split in splits:
        keys = [(split, a, k, part) for a in members for part in parts]
        if split not in original_docs or any(key not in ablated_docs for key in keys):
            return None
        shared = set(original_docs[split])
        for key in keys:
            shared &= set(ablated_docs[key])
        docs = [d for d in original_docs[split] if d in shared]
        if not docs:
            return None
        original.append(np.array([original_docs[split][d] for d in docs]))
        ablated.append(
            np.array([[[ablated_docs[(split, a, k, part)][d] for d in docs] for part in parts] for a in members])
        )
    own = [splits.index(a) for a in members]
    rngs = [cell_rng(seed, MEAN, k, split) for split in splits]  # independent of the per-ability cells' resamples
    return mean_specificity_bootstrap(original, ablated, own, resamples, rngs)


def write_profile(profile: Profile, layout: Layout, plots: bool = True) -> list[Path]:
    """ais.csv, ais.json, ais.md, benchmarks.csv, similarity.csv and the plots of one model into its profile
    folder (atomic writes)."""
    return (
        write_tables(profile, layout)
        + write_analyses(profile, layout, plots=plots)
        + (write_plots(profile, layout) if plots else [])
    )


def aggregate(cfg: Config, model: str | None = None, report_k: float | None = None, plots: bool = True) -> None:
    """Ability Impact Scores, bootstrap intervals, tables and plots under <model>/profile/.

    AIS = (s(original) - s(ablated)) / s(original) on each benchmark's primary metric (aggregate.metrics,
    else the first of acc_norm, acc, exact_match, pass@1 in the results). Works on whatever
    evaluations exist; missing or unreadable ones are listed in ais.md and ais.json.

    Writes, per model: ais.csv (one column per AisRow field of profile.py: the cell, scores, AIS, 95%
    interval, paired test, Benjamini-Hochberg q-value and star, chance level, minimum detectable AIS;
    docs/statistics.md; region "top-random" rows hold AIS(top) minus the mean AIS of every ability's
    random draws at k; metric "p_correct" rows the same cells on each item's probability of the correct
    option; benchmark "specificity" rows hold AIS on the ability's own split minus the mean AIS on the
    other abilities' splits; empty cells are undefined or unavailable), ais.json, ais.md (with the
    statistics, the null calibration of the random control, specificity and diagonal dominance),
    benchmarks.csv (each benchmark's significantly positive and negative abilities and the spread of its positive
    AIS mass, docs/analyses.md), similarity.csv and similarity.png (every pair of benchmarks' profiles),
    heatmap.png, ribbons.png, profile_<benchmark>.png, ksweep_<benchmark>.png, and from the masks overlap.csv,
    overlap_k<k>.png, layers.csv and layers_k<k>.png (as `benchprof overlap`). An evaluation made on
    a mask that extract has since replaced (e.g. after switching extract.score) is listed as missing. With several
    models, also outputs/compare/: profiles.csv, correlation.csv, compare.md and profiles.png (each benchmark's
    profile per model, its similarity between models, the findings that hold in every model).

    Arguments:
        cfg: the config (on the command line: the path of config.yml).
        model: only this model (name or tag).
        report_k: k for the headline tables and plots; default aggregate.report_k or the largest k.
        plots: also draw the PNG plots.
    """
    started = time.time()
    specs = cfg.selected_models(model)
    compare_dir = CompareLayout(cfg.output_root).compare_dir
    if len(specs) > 1 and any(Path(cfg.output_root) / spec.tag == compare_dir for spec in specs):
        raise BenchprofError(f"models: the tag {compare_dir.name!r} is the folder of the comparison; rename the model")
    k = default_report_k(cfg, report_k)
    done: list[tuple[Profile, Path, int]] = []
    draws: dict[str, JointDraws] = {}  # model -> its benchmarks' joint resamples
    for spec in specs:
        model_started = time.time()
        draws[spec.tag] = {}
        profile = load_scores(cfg, spec.tag, report_k=k, joint_out=draws[spec.tag])
        layout = Layout(cfg.output_root, spec.tag)
        folder = layout.profile_dir
        if not profile.original_scores and all(m.reason in ("missing", NO_ORIGINAL) for m in profile.missing):
            overlap_files, _, _ = model_overlap(cfg, spec.tag, plots)  # masks alone still show their overlap
            print(
                f"aggregate: {spec.tag}: no evaluations under {folder.parent}; skipped"
                + (f" (wrote {len(overlap_files)} overlap files)" if overlap_files else "")
            )
            continue
        clear_manifest(folder)  # the manifest, written last, marks a complete profile
        overlap_files, overlap_rows, overlap_notes = model_overlap(cfg, spec.tag, plots)
        profile.overlap = [line for line in overlap_summary(overlap_rows).splitlines() if line]
        profile.notes += overlap_notes
        written = write_profile(profile, layout, plots=plots) + overlap_files
        write_manifest(
            folder,
            inputs=profile_inputs(cfg, k),
            extra={
                "rows": len(profile.rows),
                "missing": len(profile.missing),
                "files": [p.name for p in written],
                "evaluations": evaluation_hashes(layout.model_dir),  # status: is the profile behind them?
            },
            started=model_started,
        )
        done.append((profile, folder, len(written)))
    if not any(profile.rows for profile, _, _ in done):
        tags = ", ".join(s.tag for s in specs)
        raise BenchprofError(
            f"aggregate: no AIS could be computed for {tags} under {cfg.output_root} "
            "(run `benchprof evaluate` first; ais.md lists what is missing)"
            if done
            else f"aggregate: no evaluation results for {tags} under {cfg.output_root} (run `benchprof evaluate` first)"
        )
    compared = [profile for profile, _, _ in done if profile.rows]
    compare_files: list[Path] = []
    if len(compared) > 1:
        comparison = compare_models(compared, [draws[p.model] for p in compared])
        compare_files = write_comparison(comparison, cfg.output_root, plots=plots)
    for profile, _, _ in done:
        star = f"q < {cfg.aggregate.alpha:g}, Benjamini-Hochberg over the profile"
        print(f"\n{profile.model}: AIS at k = {format_k(k)}, top region (* {star})")
        print(ais_table(profile))
        for line in profile.overlap + specificity_summary(profile, k) + breadth_summary(profile, k):
            print(line)
    if compare_files:
        print(f"\ncompare: {len(compared)} models -> {compare_dir} ({len(compare_files)} files)")
    print(
        f"\naggregate: {sum(len(p.rows) for p, _, _ in done)} rows, "
        f"{counted(sum(len(p.missing) for p, _, _ in done), 'missing evaluation')}, "
        f"{sum(files for _, _, files in done)} files -> {', '.join(str(f) for _, f, _ in done)} "
        f"in {time.time() - started:.1f} s"
    )
