"""A model's evaluations read into a Profile: `load_scores`, the part of the aggregate stage that computes.

Per benchmark, the original evaluation (its primary metric, chance level, clusters and p_correct) and every
ablated one paired with it, checked for the same documents, model, task and scoring and for the mask now on
disk (an evaluation it cannot use is listed as missing, with the reason); profile/cells.py turns each cell into
AIS rows with intervals and tests, then the specificity rows, the multiplicity correction and the analyses
follow. Reads the result JSONs and per-sample files (results.py); writes nothing.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from benchprof import BenchprofError
from benchprof.core.config import AggregateSettings, Config
from benchprof.core.layout import Layout, Variant, format_k
from benchprof.core.regions import region_metadata
from benchprof.core.results import (
    DocId,
    PerDoc,
    Score,
    Unusable,
    load_score,
    option_counts,
    primary_metric,
    read_clusters,
    read_p_correct,
    read_results,
)
from benchprof.profile.analyses import JointCell, JointDraws, profile_analyses
from benchprof.profile.breadth import apply_breadth
from benchprof.profile.cells import (
    Cell,
    CellKey,
    CellScores,
    Loaded,
    cell_rows,
    correct_for_multiplicity,
    correct_k_steps,
    joint_cell,
    k_steps,
    pool_calibration,
    random_pool,
)
from benchprof.profile.claim_tests import apply_claim_rule
from benchprof.profile.controls import placebo_stars
from benchprof.profile.rows import P_CORRECT, MissingEval, Profile, ability_benchmarks
from benchprof.profile.specificity import mean_specificity_rows, specificity_rows
from benchprof.stages.damage import eval_dtype
from benchprof.stages.overlap import mask_score
from benchprof.stats.impact import chance_level, chance_test

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
    from tqdm import tqdm


NO_ORIGINAL = "no usable original score"


def never_evaluated(profile: Profile) -> bool:
    """Whether every evaluation the profile lacks is simply absent (none was ever run), not stale or unusable."""
    return all(m.reason in ("missing", NO_ORIGINAL) for m in profile.missing)


# (variant, benchmark) -> (state, why) of its evaluation, as status.evaluation_states judges it
Judged = dict[tuple[Variant, str], tuple[str, str]]


# The definition of the profile's statistics: raised whenever a test, interval or family changes, so that a profile
# computed by an earlier benchprof reads as stale and is recomputed (seconds), never reported with old stars.
# 2: the revised mean and clustered tests, hull intervals, predictive top-random, declared families. 3: specificity
# rows on the Wald test of their bootstrap se; k steps tested. 4: the clustered McNemar test exact at every size.
# 5: the claim family apart from the damage family, Holm within the claim; no control test without spread. 6: no
# mean test below the size its differences' skewness needs. 7: per-selection top-random and top-placebo rows, the
# breadth control, selections_agree, documents.tar.gz.
# 8: the claim's figure over selections, required by the rule; .tar.xz. 9: p_correct where a target is text.
# 10: one test per claim (claim_p, claim_q), the ability splits' rows a family apart (own); breadth on the splits'
#     p_correct, noise-corrected. 11: the rule on p_correct too (aggregate.p_correct_claims). 12: aggregate.claim_gate.
STATISTICS_VERSION = 12


def profile_inputs(cfg: Config, report_k: float | str | None = None) -> dict[str, Any]:
    """What a model's profile is computed from: its manifest's inputs (`status` compares them)."""
    return {
        "statistics": STATISTICS_VERSION,
        "aggregate": asdict(cfg.aggregate),
        "report_k": default_report_k(cfg, report_k),
        "abilities": cfg.abilities(),
        "benchmarks": list(cfg.evals.benchmarks),
        "k_values": list(cfg.settings.k_values),
        "regions": cfg.extract.region_names(),
    }


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


def _load_score(
    layout: Layout,
    variant: Variant,
    benchmark: str,
    metric_key: str,
    notes: list[str],
    mask_hash: Callable[[Variant], str | None] | None = None,
    original_inputs: dict[str, Any] | None = None,
) -> Score:
    """results.load_score of one evaluation, at the layout's paths; with `mask_hash`, checked against the mask
    file now on disk; with `original_inputs`, paired only with an original of the same model, task and scoring."""
    return load_score(
        layout.eval_file(variant, benchmark),
        layout.samples_file(variant, benchmark),
        metric_key,
        f"{benchmark} {variant.label()}",
        notes,
        None if mask_hash is None else lambda: mask_hash(variant),
        original_inputs,
    )


def _load_p_correct(layout: Layout, variant: Variant, benchmark: str, metric_key: str, base: Score) -> Score:
    """One evaluation's per-document p_correct as a Score (its mean over the documents). Unusable (with the
    reason) where the samples file has no option log-likelihoods to compute it from, or where it holds other
    documents than `base` (the original's score, on either metric)."""
    import numpy as np

    per_doc, why = read_p_correct(layout.samples_file(variant, benchmark), metric_key)
    if per_doc is None:
        raise Unusable(f"p_correct: {why}")
    if base.per_doc is not None and set(per_doc) != set(base.per_doc):
        raise Unusable("p_correct: its samples file holds other documents than the original's")
    return Score(float(np.mean(list(per_doc.values()))), per_doc, base.limit, base.n_samples)


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


@dataclass
class ScoreRun:
    """One model's `load_scores` in progress: where it reads, and what its benchmarks have added so far."""

    layout: Layout
    settings: AggregateSettings
    profile: Profile
    resamples: int
    splits: list[str]  # the benchmarks that are an ability's own test split
    mask_hashes: dict[Variant, str | None] = field(default_factory=dict)
    samples: dict[CellKey, NDArray[np.float64]] = field(default_factory=dict)  # bootstrap AIS samples of each cell
    original_docs: dict[str, PerDoc] = field(default_factory=dict)  # ability splits' values, for the mean specificity
    ablated_docs: dict[tuple[str, str, float, str], PerDoc] = field(default_factory=dict)  # (split, ability, k, region)
    p_original_docs: dict[str, PerDoc] = field(default_factory=dict)  # the same on p_correct, for the breadth line
    p_ablated_docs: dict[tuple[str, str, float, str], PerDoc] = field(default_factory=dict)
    row_spread: dict[int, float] = field(default_factory=dict)  # id(row) -> sd of a continuous row's differences
    joint_cells: list[JointCell] = field(default_factory=list)  # per (benchmark, k): every ability's top region
    judged: Judged | None = None  # each evaluation's state as `status` judges it; None: read what is on disk
    unvouched: int = 0  # evaluations read that record no inputs, so no judgement can vouch for them
    scored_notes: int = 0  # the profile's notes before the tests over the whole profile (_judge) added theirs

    def not_current(self, variant: Variant, benchmark: str) -> None:
        """Raise Unusable where `status` calls the evaluation stale (it was computed from another model, dtype,
        mask, task or scorer than the config gives now). One that records no inputs at all (not written by
        `benchprof evaluate`) is read and counted; an absent one is left to load_score ("missing")."""
        if self.judged is None:
            return
        state, why = self.judged.get((variant, benchmark), ("done", ""))
        if state == "done":
            return
        if state == "stale":
            raise Unusable(f"stale ({why}); `benchprof run` brings it up to date")
        if self.layout.eval_file(variant, benchmark).is_file():
            self.unvouched += 1

    def note_unvouched(self) -> None:
        """Say in the profile's notes how many evaluations it read that record no inputs."""
        if self.unvouched:
            self.profile.notes.append(
                f"{self.unvouched} evaluation(s) record no inputs (not written by `benchprof evaluate`): read as they "
                "are, unchecked against the config and the model"
            )

    def variants(self) -> list[Variant]:
        """Every ablated variant of the profile: ability, then k, then region."""
        profile = self.profile
        return [Variant(a, k, r) for a in profile.abilities for k in profile.k_values for r in profile.regions]

    def mask_hash(self, variant: Variant) -> str | None:
        """The hash of the variant's mask file now on disk (None: there is none), hashed once per run."""
        from benchprof.core.storage import file_hash

        if variant not in self.mask_hashes:
            path = self.layout.mask_file(*variant.parts())
            self.mask_hashes[variant] = file_hash(path) if path.is_file() else None
        return self.mask_hashes[variant]

    def missing(self, benchmark: str, variant: Variant, reason: str) -> None:
        """List one evaluation of the benchmark as missing from the profile, with the reason."""
        path = self.layout.eval_file(variant, benchmark)
        self.profile.missing.append(MissingEval(benchmark, variant.label(), str(path), reason))


@dataclass(frozen=True)
class _Original:
    """A benchmark's original evaluation: what every ablated evaluation of it is paired with."""

    benchmark: str
    metric_key: str
    score: Score
    inputs: dict[str, Any]  # its result JSON's inputs: an ablation pairs only with the same model, task and scoring
    clusters: dict[DocId, str]  # (task, doc_id) -> cluster, where the documents carry one
    p_correct: Score | None  # on p_correct: multiple-choice benchmarks on a higher-is-better metric


def _load_original(run: ScoreRun, benchmark: str) -> tuple[str, Score, dict[str, Any]]:
    """(primary metric, score, result JSON inputs) of the benchmark's original evaluation; Unusable with the reason."""
    original_path = run.layout.eval_file(Variant(), benchmark)
    run.not_current(Variant(), benchmark)
    if not original_path.is_file():
        raise Unusable("missing")
    original_payload, results = read_results(original_path)
    inputs = original_payload.get("inputs")
    original_inputs = inputs if isinstance(inputs, dict) else {}
    override = run.settings.metrics.get(benchmark)
    metric_key = primary_metric(results, override)
    if metric_key is None:
        wanted = f"aggregate.metrics.{benchmark} {override!r}" if override else "any metric"
        raise Unusable(f"{wanted} not in results (has: {', '.join(results)})")
    original = _load_score(run.layout, Variant(), benchmark, metric_key, run.profile.notes)
    if not math.isclose(original.value, original.reported, abs_tol=1e-6):  # noted once, for the original
        run.profile.notes.append(
            f"{benchmark}: the reported {metric_key} ({original.reported:.4f}) is not the mean over its "
            f"documents ({original.value:.4f}); AIS and intervals use the document means"
        )
    return metric_key, original, original_inputs


def _test_chance(run: ScoreRun, benchmark: str, original: Score, options: list[int]) -> None:
    """The benchmark's chance level and the original's one-sided test of being above it, into the profile."""
    import numpy as np

    settings, profile = run.settings, run.profile
    chance = settings.chance.get(benchmark, chance_level(options) if options else 0.0)
    profile.chance[benchmark] = chance
    # a lower-is-better metric (a loss) has no chance level to be above: its rows are never at chance
    if original.per_doc is None or original.lower_is_better:
        return
    values = np.array(list(original.per_doc.values()))
    profile.chance_p[benchmark] = chance_test(values, chance)
    generation = not options and benchmark not in settings.chance  # chance 0: any right item beats it
    credited = int((values > 0).sum())  # items right (or with any credit, on a continuous metric)
    if generation and credited < settings.min_correct:
        profile.chance_p[benchmark] = 1.0
        profile.notes.append(
            f"{benchmark}: the original gets {credited} of {values.size} items right, fewer than "
            f"aggregate.min_correct ({settings.min_correct}): treated as at chance, its AIS is not shown"
        )


def _record_original(
    run: ScoreRun, benchmark: str, metric_key: str, original: Score, original_inputs: dict[str, Any]
) -> _Original:
    """Put the benchmark's original score, metric and chance level into the profile; what its ablations pair with."""
    samples_file = run.layout.samples_file(Variant(), benchmark)
    run.profile.metrics[benchmark] = metric_key
    run.profile.original_scores[benchmark] = original.value
    options = option_counts(samples_file)
    _test_chance(run, benchmark, original, options)
    if benchmark in run.splits and original.per_doc is not None:
        run.original_docs[benchmark] = original.per_doc
    clusters = read_clusters(samples_file) if run.settings.clusters else {}
    p_original = None
    if options and not original.lower_is_better:
        with contextlib.suppress(Unusable):  # no log-likelihoods to compute it from: no p_correct rows
            p_original = _load_p_correct(run.layout, Variant(), benchmark, metric_key, original)
    if benchmark in run.splits and p_original is not None and p_original.per_doc is not None:
        run.p_original_docs[benchmark] = p_original.per_doc
    return _Original(benchmark, metric_key, original, original_inputs, clusters, p_original)


def _unpaired(run: ScoreRun, base: _Original, variant: Variant, score: Score) -> str | None:
    """Why an ablated score cannot share an AIS with the original's (its missing reason); None where it can."""
    original = base.score
    if (score.per_doc is None) != (original.per_doc is None):
        # a mean over documents against lm-eval's own aggregate: two scales, never one AIS
        unusable = variant if score.per_doc is None else Variant()
        return (
            f"the per-sample file of {unusable.label()} has no usable values while the other has: "
            "one population per cell; rerun `benchprof evaluate` for it"
        )
    other_docs = (
        score.per_doc is not None and original.per_doc is not None and set(score.per_doc) != set(original.per_doc)
    )
    other_limit = (score.limit, score.n_samples) != (original.limit, original.n_samples)
    if other_docs or other_limit:  # one population per cell: never an AIS over other documents than the original's
        return (
            f"scored other documents than {run.layout.eval_file(Variant(), base.benchmark)} "
            f"(limit/n_samples {score.limit}/{score.n_samples} against "
            f"{original.limit}/{original.n_samples}); rerun `benchprof evaluate` with one evals.limit"
        )
    return None


def _load_ablated(run: ScoreRun, base: _Original, ability: str, k: float) -> dict[str, Score]:
    """region -> score of one (ability, k) cell on the benchmark; the evaluations it cannot use listed as missing."""
    ablated: dict[str, Score] = {}
    for region in run.profile.regions:
        variant = Variant(ability, k, region)
        try:
            run.not_current(variant, base.benchmark)
            score = _load_score(
                run.layout, variant, base.benchmark, base.metric_key, run.profile.notes, run.mask_hash, base.inputs
            )
        except Unusable as err:
            run.missing(base.benchmark, variant, str(err))
            continue
        unpaired = _unpaired(run, base, variant, score)
        if unpaired is not None:
            run.missing(base.benchmark, variant, unpaired)
            continue
        ablated[region] = score
    return ablated


def _load_p_cell(
    run: ScoreRun, base: _Original, p_original: Score, ability: str, k: float, ablated: dict[str, Score]
) -> dict[str, Score]:
    """region -> p_correct of the cell's usable regions; a region without one is noted, its accuracy row stands."""
    p_ablated: dict[str, Score] = {}
    for region in ablated:
        variant = Variant(ability, k, region)
        try:
            p_ablated[region] = _load_p_correct(run.layout, variant, base.benchmark, base.metric_key, p_original)
        except Unusable as err:
            run.profile.notes.append(f"{base.benchmark}: no p_correct rows ({err})")
    return p_ablated


def _load_cells(run: ScoreRun, base: _Original, bar: tqdm) -> tuple[Loaded, Loaded]:
    """(ability, k) -> region -> score of every cell of the benchmark, on its metric and on p_correct."""
    loaded: Loaded = {}
    p_loaded: Loaded = {}
    for ability in run.profile.abilities:
        for k in run.profile.k_values:
            ablated = _load_ablated(run, base, ability, k)
            loaded[(ability, k)] = ablated
            if base.p_correct is not None:  # the same cell on each item's probability of the correct option
                p_loaded[(ability, k)] = _load_p_cell(run, base, base.p_correct, ability, k, ablated)
            if base.benchmark in run.splits:
                for docs, scores in ((run.ablated_docs, ablated), (run.p_ablated_docs, p_loaded.get((ability, k), {}))):
                    docs.update(
                        {
                            (base.benchmark, ability, k, region): score.per_doc
                            for region, score in scores.items()
                            if score.per_doc is not None
                        }
                    )
            bar.update(1)
    return loaded, p_loaded


def _add_rows(run: ScoreRun, base: _Original, loaded: Loaded, p_loaded: Loaded) -> None:
    """The benchmark's AIS rows, k steps, joint cells and null calibration, into the profile."""
    profile, settings, benchmark, original = run.profile, run.settings, base.benchmark, base.score
    for k in profile.k_values:
        joint = joint_cell(profile.abilities, benchmark, k, original, loaded, base.clusters)
        if joint is not None:
            run.joint_cells.append(joint)
    # the control of every top region at k: the random draws of every ability at k on this benchmark
    pools = {k: random_pool(loaded, k) for k in profile.k_values}
    p_pools = {k: random_pool(p_loaded, k) for k in profile.k_values}
    # ... and every ability's placebo regions at k: the procedure's regions on items no skill answers
    placebos = {k: random_pool(loaded, k, placebo=True) for k in profile.k_values}
    p_placebos = {k: random_pool(p_loaded, k, placebo=True) for k in profile.k_values}
    for (ability, k), ablated in loaded.items():
        cell = Cell(ability, k, benchmark, run.resamples, settings.seed, base.clusters)
        on_metric = CellScores(base.metric_key, original, ablated, pools[k], placebos[k])
        profile.rows.extend(cell_rows(profile, cell, on_metric, run.samples, run.row_spread))
        if (ability, k) in p_loaded and base.p_correct is not None:
            on_p_correct = CellScores(P_CORRECT, base.p_correct, p_loaded[(ability, k)], p_pools[k], p_placebos[k])
            profile.rows.extend(cell_rows(profile, cell, on_p_correct, None, run.row_spread))
    profile.k_steps += k_steps(profile, benchmark, original, loaded, base.clusters)
    for k in profile.k_values:
        calibration = pool_calibration(benchmark, k, original, pools[k], settings.alpha)
        if calibration is not None:
            profile.null_calibration.append(calibration)


def load_scores(
    cfg: Config,
    model: str | None = None,
    report_k: float | str | None = None,
    bootstrap: int | None = None,
    progress: bool = True,
    joint_out: JointDraws | None = None,
    cells_out: list[JointCell] | None = None,
    judged: Judged | None = None,
    run_out: list[ScoreRun] | None = None,
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
        cells_out: receives the cells those are drawn from (to draw them again under another k's generator).
        judged: each evaluation's state as `status` judges it (status.evaluation_states): one it calls stale is
            listed as missing, never read. None reads what is on disk (archived documents, hand-made results).
        run_out: receives the run, to score one benchmark again (rescore_benchmark).
    """
    from benchprof.core.console import progress as progress_bar

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
        p_correct_claims=settings.p_correct_claims,
        claim_gate=settings.claim_gate,
        dtype=eval_dtype(cfg, spec),
    )
    profile.score, profile.loss_on = region_provenance(layout, profile.abilities, profile.k_values, profile.notes)
    splits = ability_benchmarks(profile.benchmarks, profile.abilities)
    run = ScoreRun(layout, settings, profile, resamples, splits, judged=judged)
    bar = progress_bar(
        total=len(profile.benchmarks) * len(profile.abilities) * len(profile.k_values),
        desc=f"aggregate {spec.tag}",
        unit="cell",
        disable=None if progress else True,
    )
    for benchmark in profile.benchmarks:
        _score_benchmark(run, benchmark, bar)
    bar.close()
    run.note_unvouched()
    profile.rows.extend(specificity_rows(profile, run.samples))
    profile.rows.extend(mean_specificity_rows(profile, run.original_docs, run.ablated_docs, resamples, settings.seed))
    _judge(run)
    draws = profile_analyses(profile, run.joint_cells, resamples, settings.seed)
    if joint_out is not None:
        joint_out.update(draws)
    if cells_out is not None:
        cells_out.extend(run.joint_cells)
    if run_out is not None:
        run_out.append(run)
    return profile


def _score_benchmark(run: ScoreRun, benchmark: str, bar: tqdm) -> None:
    """One benchmark's rows, k steps and chance level into the run's profile; listed as missing where unusable."""
    try:
        metric_key, original, original_inputs = _load_original(run, benchmark)
    except Unusable as err:
        run.missing(benchmark, Variant(), str(err))
        for variant in run.variants():  # their rows cannot be computed: list them, never drop them
            run.missing(benchmark, variant, NO_ORIGINAL)
        bar.update(len(run.profile.abilities) * len(run.profile.k_values))
        return
    base = _record_original(run, benchmark, metric_key, original, original_inputs)
    loaded, p_loaded = _load_cells(run, base, bar)
    _add_rows(run, base, loaded, p_loaded)


def _judge(run: ScoreRun) -> None:
    """The tests over the whole profile: the families' corrections, the breadth control, the claim rule (after the
    q-values: breadth and the rule read the stars' families), the placebo regions' stars and the k steps'."""
    profile = run.profile
    run.scored_notes = len(profile.notes)  # the notes of reading the evaluations; the tests add theirs
    correct_for_multiplicity(profile, run.row_spread)
    apply_breadth(profile, (run.original_docs, run.ablated_docs), (run.p_original_docs, run.p_ablated_docs))
    apply_claim_rule(profile)
    profile.placebo_stars = list(placebo_stars(profile))
    correct_k_steps(profile)


def rescore_benchmark(run: ScoreRun, benchmark: str) -> Profile:
    """The run's profile (load_scores' `run_out`, left as it was) with one benchmark, not an ability split, read
    again (a spiked benchmark, lab/spikes.py): its rows, k steps and chance level afresh, the other benchmarks' rows
    kept, the tests over the whole profile applied again (no analyses across benchmarks)."""
    from tqdm import tqdm

    if benchmark in run.splits:
        raise BenchprofError(f"{benchmark}: an ability split cannot be scored again alone")
    old = run.profile
    kept = [row for row in old.rows if row.benchmark != benchmark]
    rows = [replace(row) for row in kept]
    spread = {id(n): run.row_spread[id(r)] for r, n in zip(kept, rows, strict=True) if id(r) in run.row_spread}
    profile = replace(
        old,
        rows=rows,
        k_steps=[replace(s) for s in old.k_steps if s.benchmark != benchmark],  # their q-values are set again
        null_calibration=[replace(c) for c in old.null_calibration if c.benchmark != benchmark],
        missing=[m for m in old.missing if m.benchmark != benchmark],
        chance=dict(old.chance),
        chance_p=dict(old.chance_p),
        metrics=dict(old.metrics),
        original_scores=dict(old.original_scores),
        notes=[n for n in old.notes[: run.scored_notes] if not n.startswith((f"{benchmark}:", f"{benchmark} "))],
    )
    again = replace(run, profile=profile, row_spread=spread, samples=dict(run.samples), joint_cells=[])
    _score_benchmark(again, benchmark, tqdm(disable=True))
    _judge(again)
    return profile
