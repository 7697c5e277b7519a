"""A model's benchmark profile as Python objects: what `aggregate` computes, `report` writes and `plots`
draws (`profile_scores.load_scores` returns one). ais.csv has one column per AisRow field; ais.json is the
Profile itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from benchprof.core.config import KNOWN_ABILITIES, TRANSFER, split_of
from benchprof.core.layout import format_k
from benchprof.core.region_names import random_draw, selection_of
from benchprof.stats.impact import diagonal_dominance

ADJUSTED = "top-random"  # region name of the control-adjusted rows in ais.csv / ais.json
SPECIFICITY = "specificity"  # the benchmark name of specificity rows in ais.csv
SPECIFICITY_METRIC = "AIS(own) - mean AIS(other abilities)"
MEAN = "mean"  # the ability name of the rows holding the mean specificity over the abilities
P_CORRECT = "p_correct"  # the metric of rows computed on each item's probability of the correct option
# AisRow.family (cells.family_of): the claim rows (does the ability's region do more than a region of no ability, on
# a real benchmark?), the same question on the ability splits and specificity (own), the damage rows (does zeroing
# the region hurt at all?), the other tested rows, and the random controls; the claim rows on p_correct, where
# aggregate.p_correct_claims declares them, are a claim family of their own
PRIMARY, OWN, DAMAGE, SECONDARY, CONTROL = "claim", "own", "damage", "secondary", "control"
P_CLAIM = "claim_p_correct"
HOLM_FAMILIES = (PRIMARY, OWN, P_CLAIM)  # the families whose stars are claims: Holm, each on its own
SAME_MIXTURE = 0.9  # two ability profiles "measure the same mixture" when their cosine's 95% interval lies above


CONTROLS = ("random", "placebo")  # the control kinds a top region is measured against (cells.cell_rows)


def control_name(top: str, kind: str) -> str:
    """The region name of a top region's row against a control kind: top-random (ADJUSTED), top2-placebo, ..."""
    return f"{top}-{kind}"


def control_of(region: str) -> tuple[str, str] | None:
    """(top region, control kind) of a control row's region name (control_name's inverse); None for a region."""
    top, _, kind = region.partition("-")
    return (top, kind) if kind in CONTROLS and is_top(top) else None


def is_top(region: str) -> bool:
    """Whether a region name is an ability's top region (top, top2, ...: one per selection, core.region_names)."""
    chosen = selection_of(region)
    return chosen is not None and chosen[0] == "top"


def is_placebo(region: str) -> bool:
    """Whether a region name is a placebo region (placebo, placebo2, ...: core.config.selection_of)."""
    chosen = selection_of(region)
    return chosen is not None and chosen[0] == "placebo"


def cell_key(ability: str, k: float, benchmark: str) -> str:
    """The name of one (ability, k, benchmark) cell's bootstrap stream (stats.resampling.cell_rng)."""
    return f"{ability}|{format_k(k)}|{benchmark}"


@dataclass
class AisRow:
    """One line of ais.csv. `region` is top, bottom, random or "top-random" (control-adjusted:
    ais = AIS(top) - AIS(random), score_ablated is None). NaN: undefined (original score 0) or no
    interval (no per-sample file, or bootstrap 0); `significant` is None when there is no interval."""

    model: str
    ability: str
    benchmark: str
    k: float
    region: str
    metric: str
    score_original: float
    score_ablated: float | None
    ais: float
    ci_low: float = math.nan
    ci_high: float = math.nan
    significant: bool | None = None  # q_value < aggregate.alpha (before 0.2: the 95% interval excluded 0)
    n_docs: int = 0  # documents in the paired bootstrap
    flips_lost: int | None = None  # documents right on the original, wrong ablated (0/1 metrics)
    flips_gained: int | None = None  # wrong on the original, right ablated
    p_value: float = math.nan  # McNemar, clustered if items are (0/1); mean test (continuous); bootstrap (derived)
    q_value: float = math.nan  # Benjamini-Hochberg over every row of the model's profile with a p-value
    chance: float = math.nan  # the benchmark's chance level (mean 1/#options, or aggregate.chance)
    ais_above_chance: float = math.nan  # (s - s') / (s - chance)
    ais_to_chance: float = math.nan  # (s - max(s', chance)) / s: removal counted down to chance only
    below_chance: bool = False  # the ablated score is below the chance level: steering, not removal
    mde: float = math.nan  # smallest AIS detectable at 80% power at alpha / (rows in the family)
    dropped: int = 0  # bootstrap resamples without an AIS (their original mean was 0), left out of the interval
    control_draws: int = 0  # top-random rows: the random draws pooled as the control (every ability's at k)
    selections: int = 0  # top-random rows: the top regions of the ability, one per attribution sample
    selections_agree: int = 0  # top-random rows: the samples whose region meets the claim rule (claim_tests.py)
    selections_ais: float = math.nan  # top-random rows: mean over the selections of top − random (controls.py)
    selections_low: float = math.nan  # ... its 95% interval: items, selections and random draws resampled
    selections_high: float = math.nan
    selections_p: float = math.nan  # ... two-sided p of "the selections do on average what random regions do"
    breadth: float = math.nan  # top-random rows: the region's mean top-random AIS on the other ability splits
    breadth_residual: float = math.nan  # ... its AIS here beyond what that breadth predicts (profile/breadth.py)
    breadth_p: float = math.nan  # ... one-sided p of that residual, Holm over the abilities of its selection
    claim_p: float = math.nan  # top-random rows: the pair's p over its selections, rules 1-4 (claim_tests.py)
    claim_q: float = math.nan  # ... Holm over its family's pairs at its k: claimed below alpha, with rule 5
    at_chance: bool = False  # the benchmark's original score is not above chance: no q-value, no star
    family: str = ""  # claim, damage, secondary or control (random regions: tested, never starred); "" untested

    @classmethod
    def from_record(cls, record: Mapping[str, str]) -> AisRow:
        """One line of ais.csv as core.storage.read_csv returns it, back into a row (the inverse of
        core.storage.csv_cell): an empty cell is NaN for a float field and None where the field may be None."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            text, kind = record.get(f.name, ""), str(f.type)  # a column added since the file was written: empty
            if kind == "str":
                values[f.name] = text
            elif text == "":
                values[f.name] = None if "None" in kind else {"float": math.nan, "int": 0, "bool": False}[kind]
            elif kind.startswith("bool"):
                values[f.name] = text == "true"
            else:
                values[f.name] = int(text) if kind.startswith("int") else float(text)
        return cls(**values)


@dataclass
class NullCalibration:
    """One benchmark at one k: each random draw tested against the pool of the others
    (stats.control.null_calibration)."""

    benchmark: str
    k: float
    draws: int
    flagged: int  # draws with a raw p-value below alpha
    share: float
    p_values: list[float]


@dataclass
class MissingEval:
    """An evaluation that was expected but could not be used."""

    benchmark: str
    variant: str  # "original" or "<ability>/k<k>/<region>"
    path: str
    reason: str


@dataclass
class Breadth:
    """One line of benchmarks.csv: how many abilities a benchmark draws on, at one k (top region, headline metric).

    positive / negative: the abilities whose top-region AIS is significantly above / below 0 (q < alpha in the
    profile's Benjamini-Hochberg family). normalised_entropy and effective_abilities:
    stats.profiles.positive_mass_entropy of the AIS vector over the abilities, their 95% intervals from
    stats.profiles.breadth_bootstrap (one joint resample of the items for every ability); dropped: resamples without a
    value (no positive AIS, or original mean 0).
    headline False: the original is not above chance there, and no breadth is computed."""

    model: str
    benchmark: str
    k: float
    headline: bool
    abilities: int = 0  # abilities with an AIS on this benchmark
    n_positive: int = 0
    positive: list[str] = field(default_factory=list)
    n_negative: int = 0
    negative: list[str] = field(default_factory=list)
    normalised_entropy: float = math.nan  # 0: one ability holds all the positive AIS mass; 1: spread evenly
    entropy_ci_low: float = math.nan
    entropy_ci_high: float = math.nan
    effective_abilities: float = math.nan  # exp(entropy): 1 to the number of abilities
    effective_ci_low: float = math.nan
    effective_ci_high: float = math.nan
    n_above: int = 0  # abilities whose AIS exceeds aggregate.threshold (the paper's ribbons), and its 95% interval
    above_ci_low: float = math.nan
    above_ci_high: float = math.nan
    n_docs: int = 0  # items in the joint resample
    dropped: int = 0


@dataclass
class Similarity:
    """One line of similarity.csv (or, with model_b, of the cross-model correlation): how alike two ability
    profiles are (stats.profiles.profile_similarity over the abilities both have an AIS for), with 95% bootstrap
    intervals.

    Within a model: two benchmarks' profiles, their resamples independent (one generator per benchmark).
    Across models: one benchmark's profile in two models, resample r of each drawn from the same generator, so
    on the same documents (paired) when both models scored the same ones. verdict: "same mixture" when the
    cosine interval lies above SAME_MIXTURE, "differ" when below it, "undecided" when it holds it (across
    models: whether the benchmark's profile is the same mixture in both), "no profile" when a benchmark (a model)
    has no significantly positive ability, so its AIS vector is noise."""

    model: str
    k: float
    benchmark_a: str
    benchmark_b: str
    abilities: int
    cosine: float
    cosine_ci_low: float = math.nan
    cosine_ci_high: float = math.nan
    spearman: float = math.nan
    spearman_ci_low: float = math.nan
    spearman_ci_high: float = math.nan
    verdict: str = ""
    model_b: str = ""  # across models: the second model (benchmark_b == benchmark_a)
    paired: bool = False  # across models: both models' resamples drew the same items
    k_b: float = math.nan  # across models: the second model's k (k is the first's; they differ under a size rule)


@dataclass
class Consensus:
    """A finding checked in every model of a comparison at one k: kind "breadth" (a benchmark's significantly
    positive abilities), "negative" (its significantly negative ones), "same mixture" / "differ" (benchmark
    pairs, benchmark ""). per_model: model -> its list; common: the entries every model has."""

    kind: str
    benchmark: str
    k: float
    per_model: dict[str, list[str]]
    common: list[str]

    @property
    def identical(self) -> bool:
        """Every model has exactly the same list."""
        return all(sorted(v) == sorted(self.common) for v in self.per_model.values())


def ability_benchmarks(benchmarks: list[str], abilities: Sequence[str] = ()) -> list[str]:
    """The benchmarks that are an ability's own test split: a built-in ability's, or one of `abilities` (the
    profile's, the user's own among them)."""
    return [b for b in benchmarks if b in KNOWN_ABILITIES or b in abilities]


def transfer_benchmarks(benchmarks: list[str]) -> dict[str, str]:
    """ability -> the benchmark that is its transfer split (abilities.transfer_benchmark), for those among
    `benchmarks`."""
    return {split[0]: b for b in benchmarks if (split := split_of(b)) is not None and split[1] == TRANSFER}


def real_benchmarks(benchmarks: list[str], abilities: Sequence[str] = ()) -> list[str]:
    """The benchmarks that are no split of an ability (neither a test nor a transfer split; `abilities`: the
    profile's, the user's own among them)."""
    return [b for b in benchmarks if split_of(b, abilities) is None]


@dataclass
class Profile:
    """Everything `aggregate` writes for one model, as Python objects."""

    model: str  # tag
    name: str
    abilities: list[str]
    benchmarks: list[str]
    k_values: list[float]
    regions: list[str]
    report_k: float
    threshold: float
    bootstrap: int
    metrics: dict[str, str] = field(default_factory=dict)  # benchmark -> "metric,filter"
    original_scores: dict[str, float] = field(default_factory=dict)
    rows: list[AisRow] = field(default_factory=list)
    missing: list[MissingEval] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    score: str = "importance"  # extract.score of the evaluated top/bottom masks (from their headers)
    loss_on: str = ""  # finetune.loss_on of the importance files ("" when unknown)
    dtype: str = ""  # what the evaluations were scored in (evals.dtype, else the model's; "" when unknown)
    # what placebo regions alone would claim (profile/controls.py): [starred, tested] rows on real benchmarks
    placebo_stars: list[int] = field(default_factory=list)
    overlap: list[str] = field(default_factory=list)  # summary lines of overlap.csv, for ais.md
    reach: list[str] = field(default_factory=list)  # reach lines of a current spikes.csv (profile/spikes.py)
    # benchmark -> the reach its "no claim" line quotes (spikes.no_claim_reach), on accuracy and on p_correct
    no_claim_reach: dict[str, str] = field(default_factory=dict)
    no_claim_reach_p: dict[str, str] = field(default_factory=dict)
    alpha: float = 0.05  # aggregate.alpha: every star's level (Holm in the claim family, Benjamini-Hochberg elsewhere)
    chance: dict[str, float] = field(default_factory=dict)  # benchmark -> chance level
    chance_p: dict[str, float] = field(default_factory=dict)  # benchmark -> p of "original above chance"
    discordance: dict[str, float] = field(default_factory=dict)  # benchmark -> median share of flipped items
    family_size: int = 0  # rows in the claim family (cells.family_of)
    family_size_own: int = 0  # rows in the own family
    family_size_damage: int = 0  # rows in the damage family
    family_size_secondary: int = 0  # rows in the secondary family
    family_size_p: int = 0  # rows in the claim family on p_correct
    p_correct_claims: bool = False  # aggregate.p_correct_claims: the claim rule applied on p_correct too
    claim_gate: bool = False  # aggregate.claim_gate: only abilities claimed on their own split enter the claim families
    null_calibration: list[NullCalibration] = field(default_factory=list)  # per (k, benchmark): random vs pool
    k_steps: list[KStep] = field(default_factory=list)  # per (benchmark, ability, neighbouring k): tested changes
    breadth: list[Breadth] = field(default_factory=list)  # per (benchmark, k): benchmarks.csv
    similarity: list[Similarity] = field(default_factory=list)  # per (k, benchmark pair): similarity.csv

    @property
    def at_chance(self) -> list[str]:
        """Benchmarks whose original score is not above chance (one-sided test at alpha): their AIS is
        noise about nothing, so they are left out of headline tables and plots (and listed)."""
        return [b for b, p in self.chance_p.items() if not p < self.alpha]

    @property
    def headline_benchmarks(self) -> list[str]:
        return [b for b in self.benchmarks if b not in self.at_chance]

    def chance_mark(self, benchmark: str) -> str:
        """What a table heading or plot title of `benchmark` adds when the model is at chance on it."""
        return "; at chance: its AIS is noise" if benchmark in self.at_chance else ""

    def row(
        self, ability: str, benchmark: str, k: float | None = None, region: str = "top", p_correct: bool = False
    ) -> AisRow | None:
        """The row for one cell on the benchmark's headline metric (with `p_correct`: on p_correct), or None
        when it could not be computed."""
        k = self.report_k if k is None else k
        index = getattr(self, "_index", None)
        if index is None or len(index) != len(self.rows):
            index = {(r.ability, r.benchmark, format_k(r.k), r.region, r.metric == P_CORRECT): r for r in self.rows}
            self._index = index  # not a dataclass field: asdict() leaves it out
        return index.get((ability, benchmark, format_k(k), region, p_correct))

    def matrix(
        self, k: float | None = None, region: str = "top", p_correct: bool = False
    ) -> dict[str, dict[str, float]]:
        """ability -> benchmark -> AIS at k (default the report k) on the headline metric (or p_correct);
        cells without a result are absent."""
        k = self.report_k if k is None else k
        out: dict[str, dict[str, float]] = {a: {} for a in self.abilities}
        for row in self.rows:
            if (
                row.region == region
                and math.isclose(row.k, k)
                and row.benchmark in self.benchmarks
                and (row.metric == P_CORRECT) == p_correct
            ):
                out.setdefault(row.ability, {})[row.benchmark] = row.ais
        return out

    @property
    def regions_with_adjusted(self) -> list[str]:
        """The regions (random draws and placebo regions after the first, and top regions of later selections, left
        out: they are the pools behind top-random and top-placebo, and their rows, in ais.csv), and "top-random"
        (the control-adjusted rows) when top and random are among them."""
        shown = [r for r in self.regions if random_draw(r) in (None, 1) and selection_of(r) in (None, ("top", 1))]
        shown += ["placebo"] if "placebo" in self.regions else []  # the first placebo region stands for all
        return shown + ([ADJUSTED] if {"top", "random"} <= set(self.regions) else [])

    def diagonal_dominance(self, k: float, region: str = "top") -> dict[str, bool | None]:
        """ability -> whether its own split has the largest AIS in its row (over the ability splits with
        an AIS); None when its own split or every other one lacks an AIS (stats.impact.diagonal_dominance)."""
        splits = ability_benchmarks(self.benchmarks, self.abilities)
        return diagonal_dominance(
            {
                ability: {b: r.ais for b in splits if (r := self.row(ability, b, k, region)) is not None}
                for ability in self.abilities
                if ability in splits
            }
        )


@dataclass
class KStep:
    """One line of ais.md's k sweep tests: a top region's AIS on one benchmark at two neighbouring k, and the paired
    test of the change (stats.paired.paired_test between the two ablated runs: the same documents and the same
    original, so AIS(k_to) − AIS(k_from) = (s'(k_from) − s'(k_to)) / s, the sign reversed for a lower-is-better
    metric). q_value: Benjamini-Hochberg over the
    profile's k steps, a family of their own. Read "the damage grows with k" from here, not from two stars."""

    benchmark: str
    ability: str
    k_from: float
    k_to: float
    ais_from: float
    ais_to: float
    difference: float  # ais_to - ais_from
    lost: int | None = None  # documents right at k_from and wrong at k_to (0/1 metrics)
    gained: int | None = None
    p_value: float = math.nan
    q_value: float = math.nan
    significant: bool | None = None


@dataclass
class Difference:
    """One line of compare/differences.csv: a top region's AIS on one benchmark at one k in two models, and the
    test of their difference (stats.resampling.difference_test on the joint resamples; paired when both models
    scored the same items). q_value: Benjamini-Hochberg over every difference of the comparison, a family of its
    own; significant: q < alpha. This, not two columns of stars, says whether a model's profile changed."""

    benchmark: str
    k: float
    ability: str
    model_a: str
    model_b: str
    ais_a: float
    ais_b: float
    difference: float  # ais_a - ais_b
    ci_low: float = math.nan
    ci_high: float = math.nan
    p_value: float = math.nan
    q_value: float = math.nan
    significant: bool | None = None
    paired: bool = False
    dropped: int = 0  # resamples without both values (an original mean of 0): more than 5% and no star
    k_b: float = math.nan  # model_b's k (k is model_a's; they differ when each model is compared at its own k)


@dataclass
class Comparison:
    """Several models' profiles side by side (outputs/compare/): what analyses.compare_models computes,
    report writes and plots draw."""

    profiles: list[Profile]
    benchmarks: list[str]  # above chance in every model
    at_chance: list[str]  # at chance in at least one model: left out of the comparison
    report_k: float
    correlations: list[Similarity] = field(default_factory=list)  # per (benchmark, k, model pair)
    consensus: list[Consensus] = field(default_factory=list)  # per (kind, benchmark, k)
    differences: list[Difference] = field(default_factory=list)  # per (benchmark, k, ability, model pair)
    # each model at its own report k (a size rule: the same share of neurons is a different k in each model), not
    # every model at every k they share
    own_k: bool = False

    @property
    def models(self) -> list[str]:
        return [p.model for p in self.profiles]

    def k_of(self, model: str) -> float:
        """The k at which `model` is shown in the headline tables: its profile's report k."""
        return next(p.report_k for p in self.profiles if p.model == model)
