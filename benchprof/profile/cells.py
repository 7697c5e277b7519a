"""A profile's rows from its loaded evaluations: the glue between results.Score and the arrays of stats/.

Per (ability, k, benchmark) cell, on one metric: each region's AIS with its paired bootstrap interval and
paired test, and top-random against the pool of every ability's random draws at k (`cell_rows`); the null
calibration of that pool; the joint cell of a benchmark's profile (analyses.py); and the
multiplicity correction over the whole profile. Numbers only: every formula is in stats/, and nothing here
reads or writes a file.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from benchprof.core.layout import format_k
from benchprof.core.region_names import random_draw
from benchprof.core.results import DocId, DocKey, Score
from benchprof.profile.analyses import JointCell
from benchprof.profile.controls import set_selections
from benchprof.profile.rows import (
    ADJUSTED,
    CONTROL,
    DAMAGE,
    HOLM_FAMILIES,
    MEAN,
    OWN,
    P_CLAIM,
    P_CORRECT,
    PRIMARY,
    SECONDARY,
    SPECIFICITY,
    AisRow,
    KStep,
    NullCalibration,
    Profile,
    ability_benchmarks,
    cell_key,
    control_name,
    control_of,
    is_placebo,
    is_top,
)
from benchprof.stats.control import MIN_DRAWS, top_against_random
from benchprof.stats.control import null_calibration as control_calibration
from benchprof.stats.impact import adjusted_ais, ais_above_chance, ais_to_chance, impact_score
from benchprof.stats.multitest import bh_qvalues, holm
from benchprof.stats.paired import paired_test
from benchprof.stats.power import minimum_detectable_ais, minimum_detectable_ais_continuous
from benchprof.stats.resampling import (
    bootstrap_ais,
    cell_rng,
    material_drop,
    percentile_ci,
    selections_bootstrap,
    two_level_bootstrap,
    wald_test,
)

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

CellKey = tuple[str, float, str, str]  # (ability, k, benchmark, region)
Loaded = dict[tuple[str, float], dict[str, Score]]  # one benchmark: (ability, k) -> region -> score


def joint_cell(
    abilities: list[str],
    benchmark: str,
    k: float,
    original: Score,
    loaded: Loaded,
    clusters: dict[DocId, str],
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


def family_of(row: AisRow, splits: frozenset[str] = frozenset(), p_claims: bool = False) -> str:
    """The multiplicity family a tested row belongs to (AisRow.family), declared before any result is seen.

    claim: what a profile is read for, on each real benchmark's primary metric: does ability a's top region do more
    than random regions of its size, and more than placebo regions (the same procedure on items no skill
    answers)? Its top-random and top-placebo rows per benchmark, k and selection (top-random, top2-random, ...,
    top-placebo, ...); top regions of every selection are damage rows, placebo regions controls. own: the same rows
    on the ability splits (`splits`), and the top-random specificity (its own split hurt more than the others,
    beyond what random regions show there): whether a region does its ability is a question apart from which
    abilities a benchmark draws on, so the real benchmarks' claims do not pay for the splits' tests. damage: does
    zeroing the top region hurt at all (top against the original)? On a real LLM any region of the paper's size hurts a
    little, so these rows are nearly all true; in the claim's family their discoveries would loosen
    Benjamini-Hochberg for the rows that ask about the ability, so they are a family apart. control: random
    regions and their specificity, and the top region's specificity against 0, tested so a reader sees them,
    never starred: a region that hurts every split a little differs from 0 on one split more than another by chance, and
    with the damage rows beside it Benjamini-Hochberg starred that in 20% of simulated profiles with no ability
    (docs/research/statistics-simulations.md); the specificity a star may claim is top-random's. secondary: everything
    else with a p-value (p_correct rows, bottom regions). claim_p_correct (`p_claims`: aggregate.p_correct_claims):
    the claim family's rows on p_correct, a family of their own, so neither metric's claims pay for the other's.
    The mean top-random specificity is in none: the pool cancels in it, so it equals the mean top specificity.
    """
    if math.isnan(row.p_value) or row.at_chance:
        return ""
    if random_draw(row.region) or is_placebo(row.region):
        return CONTROL
    if row.ability == MEAN and row.region == ADJUSTED:
        return ""
    claim_shaped = row.region == ADJUSTED or (row.benchmark != SPECIFICITY and control_of(row.region) is not None)
    real = row.benchmark not in splits and row.benchmark != SPECIFICITY
    if row.metric == P_CORRECT:
        return P_CLAIM if p_claims and claim_shaped and real else SECONDARY
    if claim_shaped:
        return PRIMARY if real else OWN
    if row.benchmark == SPECIFICITY and row.region == "top":
        return CONTROL
    return DAMAGE if is_top(row.region) else SECONDARY


def correct_for_multiplicity(profile: Profile, row_spread: dict[int, float]) -> None:
    """q-values, stars and minimum detectable AIS over the model's profile.

    Rows of a benchmark at chance (Profile.at_chance) are marked `at_chance`, keep their p-value and get no
    q-value and no star: an ablation of a model that cannot do the task measures noise. Every other row with a
    p-value is put in its family (`family_of`): Holm-adjusted p-values within the claim family and, apart, within the
    own family (and the claim rows on p_correct, a family apart), so the chance of any false claim star in one family
    is at most alpha whatever the damage rows and the true claims do;
    Benjamini–Hochberg q-values within the damage and the secondary families, so the expected share of false
    stars among a family's stars is at most alpha. `significant` = adjusted p (column q_value) < aggregate.alpha.
    Control rows keep their p-value and get neither q-value nor star. The minimum detectable AIS of a row uses
    alpha / (its family's size; the damage one's for control rows): Holm's first step, and a conservative
    stand-in for the BH threshold, which depends on how many other rows are discoveries.
    """
    import numpy as np

    at_chance = set(profile.at_chance)
    splits = frozenset(ability_benchmarks(profile.benchmarks, profile.abilities))
    splits_at_chance = at_chance & splits
    for row in profile.rows:  # a specificity row compares every ability split: one at chance makes it noise too
        row.at_chance = bool(splits_at_chance) if row.benchmark == SPECIFICITY else row.benchmark in at_chance
        row.family = family_of(row, splits, profile.p_correct_claims)
        if not math.isnan(row.p_value) and row.family in ("", CONTROL):
            row.significant = False
    names = (PRIMARY, OWN, P_CLAIM, DAMAGE, SECONDARY, CONTROL)
    families = {name: [row for row in profile.rows if row.family == name] for name in names}
    profile.family_size, profile.family_size_damage = len(families[PRIMARY]), len(families[DAMAGE])
    profile.family_size_own = len(families[OWN])
    profile.family_size_secondary = len(families[SECONDARY])
    profile.family_size_p = len(families[P_CLAIM])
    discordance: dict[str, list[float]] = {}
    for name, family in families.items():
        if not family:
            continue
        if name != CONTROL:
            p_values = np.array([row.p_value for row in family])
            # the claim: Holm, so the chance of any false claim star in the profile is at most alpha whatever the
            # other rows do (true discoveries loosen Benjamini-Hochberg for the rest); the others: BH
            adjusted = holm(p_values) if name in HOLM_FAMILIES else bh_qvalues(p_values)
            for row, q in zip(family, adjusted):
                row.q_value = float(q)
                material = material_drop(row.dropped, profile.bootstrap)
                if material:  # a material share of resamples undefined: the interval is over a selected rest
                    profile.notes.append(
                        f"{row.benchmark} {row.ability}/k{format_k(row.k)}/{row.region}: {row.dropped} of "
                        f"{profile.bootstrap} resamples had no AIS (original mean 0); its interval is over the rest "
                        "and it gets no star"
                    )
                row.significant = bool(q < profile.alpha) and not material
        level = profile.alpha / max(1, len(families[name if name != CONTROL else DAMAGE]))
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


def set_interval(row: AisRow, draws: NDArray[np.float64], test: bool = False) -> None:
    """The 95% percentile interval of a row's bootstrap draws; with `test` (specificity rows, whose null is 0), the
    interval and p-value of stats.resampling.wald_test instead, which has no floor at 1 / (resamples + 1). Stars
    come later, from the q-values."""
    import numpy as np

    row.ci_low, row.ci_high = percentile_ci(draws)
    row.dropped = int(np.isnan(draws).sum())
    if test:
        row.ci_low, row.ci_high, row.p_value = wald_test(row.ais, draws)


def finite_variance(values: NDArray[np.float64]) -> float:
    """The sample variance of the finite values (NaN with fewer than two)."""
    import numpy as np

    finite = values[np.isfinite(values)]
    return float(np.var(finite, ddof=1)) if finite.size > 1 else math.nan


def set_control(
    row: AisRow,
    top: float,
    control: list[float],
    top_var: float | None = None,
    random_vars: list[float] | None = None,
    top_df: float = math.inf,
) -> bool:
    """A top-random row's interval and p-value from stats.control.top_against_random; False (nothing set) when
    the pool is too small to say how much random regions differ."""
    comparison = top_against_random(top, control, top_var=top_var, random_vars=random_vars, top_df=top_df)
    if comparison is None:
        return False
    row.ci_low, row.ci_high, row.p_value = comparison.ci_low, comparison.ci_high, comparison.p_value
    return True


def widen_for_sparse_flips(
    row: AisRow, original: NDArray[np.float64], ablated: NDArray[np.float64], sign: float
) -> None:
    """A 0/1 row's interval: the hull of its bootstrap interval and Newcombe's score interval for the paired
    difference over the original mean (stats.paired.paired_difference_interval). With a few flipped items the
    percentile bootstrap covers 80% where 95% is asked; the score interval keeps its coverage there but ignores
    clusters, which the bootstrap resamples; the hull keeps both (the coverage table:
    docs/research/statistics-simulations.md)."""
    import numpy as np

    from benchprof.stats.paired import paired_difference_interval

    s = float(np.mean(original))
    if s <= 0 or math.isnan(row.ci_low) or math.isnan(row.ci_high):
        return
    low, high = (sign * v / s for v in paired_difference_interval(original, ablated))
    low, high = min(low, high), max(low, high)  # a lower-is-better metric turns the interval round
    row.ci_low, row.ci_high = min(row.ci_low, low), max(row.ci_high, high)


def random_pool(loaded: Loaded, k: float, placebo: bool = False) -> list[Score]:
    """Every random draw at k on one benchmark, of every ability (random, random2, ...): the control
    distribution of random regions of that size; with `placebo`, every placebo region instead (placebo,
    placebo2, ...: the procedure's regions chosen on items no skill answers). Where the original has per-document
    values, only regions that have them too (the pool the interval resamples is the pool of the point estimate)."""
    draws = [
        score
        for (ability, k_), ablated in loaded.items()
        if math.isclose(k_, k)
        for region, score in ablated.items()
        if (is_placebo(region) if placebo else random_draw(region))
    ]
    with_docs = [score for score in draws if score.per_doc is not None]
    return with_docs or draws


def pool_calibration(
    benchmark: str, k: float, original: Score, pool: list[Score], alpha: float
) -> NullCalibration | None:
    """stats.control.null_calibration on one benchmark at k: each random draw of the pool tested, as a top region
    would be, against the others; None with too few draws."""
    sign = -1.0 if original.lower_is_better else 1.0
    ais = [sign * impact_score(original.value, score.value) for score in pool]
    result = control_calibration(ais, alpha)
    if result is None:
        return None
    p_values, share = result
    return NullCalibration(benchmark, k, len(p_values), sum(p < alpha for p in p_values), share, p_values)


@dataclass
class Cell:
    """One (ability, k, benchmark) cell of the profile and how its bootstrap resamples."""

    ability: str
    k: float
    benchmark: str
    resamples: int
    seed: int
    clusters: dict[DocId, str]  # (task, doc_id) -> cluster, where the documents carry one

    def groups(self, docs: list[DocKey]) -> tuple[list[str] | None, list[str] | None]:
        """(cluster ids, stratum ids) of `docs` for stats.resampling.resample_counts, None where there are none: a
        document's cluster within its task (a document without one is its own), the task as stratum when
        the benchmark is a group of several subtasks."""
        tasks = [str(task) for task, _, _ in docs]
        strata = tasks if len(set(tasks)) > 1 else None
        if not any((task, doc_id) in self.clusters for task, doc_id, _ in docs):
            return None, strata
        clusters = [f"{task}\x00{self.clusters.get((task, doc_id), f'document {doc_id}')}" for task, doc_id, _ in docs]
        return clusters, strata


@dataclass(frozen=True)
class CellScores:
    """One cell's scores on one metric: the original's, each region's, and the `pool` of random draws at k its
    top-random row is measured against (every ability's; None: this cell's own draws)."""

    metric: str
    original: Score
    ablated: dict[str, Score]  # region -> score
    pool: list[Score] | None = None
    placebo: list[Score] | None = None  # every ability's placebo regions at k (None: this cell's own)


def cell_rows(
    profile: Profile,
    cell: Cell,
    scores: CellScores,
    samples_out: dict[CellKey, NDArray[np.float64]] | None = None,
    row_spread: dict[int, float] | None = None,
) -> list[AisRow]:
    """The rows of one (ability, k, benchmark) cell on one metric: one per region present, plus top-random.

    top-random = AIS(top) − the mean AIS of the pool of random draws (CellScores.pool), its interval and test
    the top region against the distribution of the draws
    (stats.control.top_against_random: is it outside what random regions of its size do?); its two-level
    bootstrap samples (stats.resampling.two_level_bootstrap) still feed the top-random specificity rows. Each
    region row gets its paired test against the original (stats.paired.paired_test). `samples_out[(ability,
    k, benchmark, region)]` receives each region's bootstrap AIS samples, `row_spread[id(row)]` the sd of
    a continuous row's paired differences (for its minimum detectable AIS)."""
    import numpy as np

    row_spread = {} if row_spread is None else row_spread
    ability, k, benchmark, resamples = cell.ability, cell.k, cell.benchmark, cell.resamples
    metric, original, ablated, pool = scores.metric, scores.original, scores.ablated, scores.pool

    def new_row(region: str, score_ablated: float | None, ais: float) -> AisRow:
        return AisRow(profile.model, ability, benchmark, k, region, metric, original.value, score_ablated, ais)

    # AIS > 0 means the ablation hurt: for a lower-is-better metric (a loss, an error rate) that is s' > s
    sign = -1.0 if original.lower_is_better else 1.0
    rows = {
        region: new_row(region, score.value, sign * impact_score(original.value, score.value))
        for region, score in ablated.items()
    }
    controls = {
        "random": pool if pool is not None else [score for region, score in ablated.items() if random_draw(region)],
        "placebo": scores.placebo if scores.placebo is not None else [s for r, s in ablated.items() if is_placebo(r)],
    }
    tops = [region for region in profile.regions if is_top(region)]  # every configured selection's
    # each top region (one per selection: top, top2, ...) against each control kind present: top-random, ...
    pairs = {
        control_name(region, kind): (region, control)
        for region in list(rows)
        if is_top(region)
        for kind, control in controls.items()
        if control
    }
    control_ais: dict[str, list[float]] = {}
    for name, (top, control) in pairs.items():
        control_ais[name] = [sign * impact_score(original.value, score.value) for score in control]
        adjusted = rows[name] = new_row(name, None, adjusted_ais(rows[top].ais, control_ais[name]))
        adjusted.control_draws = len(control)
        # the interval and test: the top region against the distribution of the control's regions (stats.control);
        # refined below with each run's item noise where per-document values give it
        if not set_control(adjusted, rows[top].ais, control_ais[name]) and not math.isnan(adjusted.ais):
            # one note for the whole table: every such row at this k lacks the same thing
            kind = name.split("-", 1)[1]
            profile.notes.append(
                f"top-{kind} rows at k={format_k(k)}: {len(control)} {kind} region(s) cannot say how much {kind} "
                f"regions differ (needs {MIN_DRAWS}); no interval and no test in any of them "
                + ("(raise extract.random_draws)" if kind == "random" else "(raise extract.selections)")
            )

    # paired tests and bootstrap over the documents every available per-sample file shares (0 resamples: no
    # intervals, the tests still run)
    paired = {region: score.per_doc for region, score in ablated.items() if score.per_doc is not None}
    if original.per_doc is not None and paired:
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
            for region in paired:
                rows[region].n_docs = len(docs)
            samples: dict[str, NDArray[np.float64]] = {}
            if resamples > 0:
                rng = cell_rng(cell.seed, cell_key(ability, k, benchmark))
                draws = sign * bootstrap_ais(base, matrix, resamples, rng, clusters=clusters, strata=strata)
                samples = dict(zip(paired, draws))
            for name, (top, control) in pairs.items():
                if not (samples and top in paired and all(score.per_doc is not None for score in control)):
                    continue
                pool_values = np.array([[score.per_doc[d] for d in docs] for score in control if score.per_doc])
                top_values = np.array([paired[top][d] for d in docs])
                # the two-level bootstrap's own draws (top-random's stream as before selections and placebos)
                stream = cell_key(ability, k, benchmark) + ("" if name == ADJUSTED else f"|{name}")
                rng = cell_rng(cell.seed + 2, stream)
                two_level = two_level_bootstrap(base, top_values, pool_values, resamples, rng, clusters, strata)
                top_samples = samples[top]
                samples[name] = sign * two_level
                if len(control) >= MIN_DRAWS:  # each run's item noise: the top's from its bootstrap, a draw's own
                    pool_draws = bootstrap_ais(base, pool_values, resamples, rng, clusters=clusters, strata=strata)
                    noise = [finite_variance(draw) for draw in pool_draws]
                    units = len(set(clusters)) if clusters is not None else len(docs)  # what the bootstrap drew
                    ais = rows[top].ais
                    set_control(rows[name], ais, control_ais[name], finite_variance(top_samples), noise, units - 1)
                    # the claim's figure: the mean over every configured selection, each with its documents
                    if name == ADJUSTED and len(tops) > 1 and all(t in paired for t in tops):
                        tops_values = np.array([[paired[t][d] for d in docs] for t in tops])
                        noises = selections_bootstrap(base, tops_values, pool_values, resamples, rng, clusters, strata)
                        set_selections(rows[name], [rows[t].ais for t in tops], control_ais[name], noises, units - 1)
            for region, values in samples.items():
                if samples_out is not None:
                    samples_out[(ability, k, benchmark, region)] = values
                row = rows[region]
                if region not in pairs:  # its interval and test come from the draws' distribution, above
                    set_interval(row, values)
                row.n_docs = len(docs)
            for region, values_ablated in zip(paired, matrix):
                row = rows[region]
                if math.isnan(row.ais):
                    continue  # AIS undefined (original score 0): nothing to test
                test = paired_test(base, values_ablated, clusters, lower_is_better=sign < 0)
                row.p_value, row.flips_lost, row.flips_gained = test.p_value, test.flips_lost, test.flips_gained
                if test.needs_units:  # one note per benchmark and metric (the notes are de-duplicated)
                    profile.notes.append(untested_note(benchmark, metric))
                if test.flips_lost is None:
                    row_spread[id(row)] = test.spread
                elif region in samples:
                    widen_for_sparse_flips(row, base, values_ablated, sign)
    chance = profile.chance.get(benchmark, math.nan)
    for row in rows.values():
        if row.score_ablated is not None:
            row.chance = chance
            if sign > 0:  # a chance level means nothing for a loss
                row.ais_above_chance = float(ais_above_chance(row.score_original, row.score_ablated, chance))
                row.ais_to_chance = float(ais_to_chance(row.score_original, row.score_ablated, chance))
                row.below_chance = bool(row.score_ablated < chance)
    return list(rows.values())


def untested_note(benchmark: str, what: str) -> str:
    """The note for rows of `benchmark` that got no mean test (stats.paired.mean_test_units)."""
    return (
        f"{benchmark} ({what}): rows with too few changed documents (or clusters) for the skewness of their "
        "changes get no mean test and no star (they need more than 28 + 25·G1², Sugden et al. 2000; "
        "docs/statistics.md#the-mean-test)"
    )


def k_steps(
    profile: Profile,
    benchmark: str,
    original: Score,
    loaded: Loaded,
    clusters: dict[DocId, str],
) -> list[KStep]:
    """Per ability, the change of its top region's AIS on `benchmark` between neighbouring k values, tested by
    stats.paired.paired_test between the two ablated runs on the documents both hold (their clusters respected):
    both share the original run, so the change is (s'(k_from) − s'(k_to)) / s (reversed for a lower-is-better
    metric) and needs no bootstrap. Only where both runs have per-document values."""
    out = []
    sign = -1.0 if original.lower_is_better else 1.0
    k_values = sorted(profile.k_values)
    for ability in profile.abilities:
        for k_from, k_to in zip(k_values, k_values[1:]):
            first = loaded.get((ability, k_from), {}).get("top")
            second = loaded.get((ability, k_to), {}).get("top")
            if first is None or second is None or first.per_doc is None or second.per_doc is None:
                continue
            docs = [d for d in first.per_doc if d in second.per_doc]
            if not docs or original.value == 0:
                continue
            ais_from = sign * impact_score(original.value, first.value)
            ais_to = sign * impact_score(original.value, second.value)
            cell = Cell(ability, k_to, benchmark, 0, 0, clusters)
            test = paired_test(
                [first.per_doc[d] for d in docs],
                [second.per_doc[d] for d in docs],
                cell.groups(docs)[0],
                lower_is_better=original.lower_is_better,
            )
            if test.needs_units:
                profile.notes.append(untested_note(benchmark, "changes between k values"))
            out.append(
                KStep(
                    benchmark,
                    ability,
                    k_from,
                    k_to,
                    ais_from,
                    ais_to,
                    ais_to - ais_from,
                    test.flips_lost,
                    test.flips_gained,
                    test.p_value,
                )
            )
    return out


def correct_k_steps(profile: Profile) -> None:
    """Benjamini-Hochberg q-values and stars over the profile's k steps (a family of their own), leaving out
    benchmarks at chance."""
    tested = [s for s in profile.k_steps if not math.isnan(s.p_value) and s.benchmark not in profile.at_chance]
    for step, q in zip(tested, bh_qvalues([s.p_value for s in tested]), strict=True):
        step.q_value, step.significant = float(q), bool(q < profile.alpha)
