"""A model's benchmark profile as Python objects: what `aggregate` computes, `report` writes and `plots`
draws (`aggregate.load_scores` returns one). ais.csv has one column per AisRow field; ais.json is the
Profile itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import ais
from .config import ABILITIES, random_draw
from .layout import format_k

ADJUSTED = "top-random"  # region name of the control-adjusted rows in ais.csv / ais.json
SPECIFICITY = "specificity"  # the benchmark name of specificity rows in ais.csv
SPECIFICITY_METRIC = "AIS(own) - mean AIS(other abilities)"
MEAN = "mean"  # the ability name of the rows holding the mean specificity over the abilities
P_CORRECT = "p_correct"  # the metric of rows computed on each item's probability of the correct option


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
    p_value: float = math.nan  # exact McNemar (0/1), Wilcoxon signed-rank (continuous), bootstrap (derived rows)
    q_value: float = math.nan  # Benjamini-Hochberg over every row of the model's profile with a p-value
    chance: float = math.nan  # the benchmark's chance level (mean 1/#options, or aggregate.chance)
    ais_above_chance: float = math.nan  # (s - s') / (s - chance)
    mde: float = math.nan  # smallest AIS detectable at 80% power at alpha / (rows in the family)
    dropped: int = 0  # bootstrap resamples without an AIS (their original mean was 0), left out of the interval
    control_draws: int = 0  # top-random rows: the random draws pooled as the control (every ability's at k)


@dataclass
class NullCalibration:
    """One benchmark at one k: each random draw tested against the pool of the others (ais.null_calibration)."""

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


def ability_benchmarks(benchmarks: list[str]) -> list[str]:
    """The benchmarks that are an ability's own test split."""
    return [b for b in benchmarks if b in ABILITIES]


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
    overlap: list[str] = field(default_factory=list)  # summary lines of overlap.csv, for ais.md
    alpha: float = 0.05  # aggregate.alpha: the false discovery rate of the stars
    chance: dict[str, float] = field(default_factory=dict)  # benchmark -> chance level
    chance_p: dict[str, float] = field(default_factory=dict)  # benchmark -> p of "original above chance"
    discordance: dict[str, float] = field(default_factory=dict)  # benchmark -> median share of flipped items
    family_size: int = 0  # rows in the multiplicity family (headline-metric rows with a p-value)
    family_size_p_correct: int = 0  # rows in the p_correct family
    null_calibration: list[NullCalibration] = field(default_factory=list)  # per (k, benchmark): random vs pool

    @property
    def at_chance(self) -> list[str]:
        """Benchmarks whose original score is not above chance (one-sided test at alpha): their AIS is
        noise about nothing, so they are left out of headline tables and plots (and listed)."""
        return [b for b, p in self.chance_p.items() if not p < self.alpha]

    @property
    def headline_benchmarks(self) -> list[str]:
        return [b for b in self.benchmarks if b not in self.at_chance]

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
        """The regions (random draws after the first left out: they are the pool behind top-random, in
        ais.csv), and "top-random" (the control-adjusted rows) when top and random are among them."""
        shown = [r for r in self.regions if random_draw(r) in (None, 1)]
        return shown + ([ADJUSTED] if {"top", "random"} <= set(self.regions) else [])

    def diagonal_dominance(self, k: float, region: str = "top") -> dict[str, bool | None]:
        """ability -> whether its own split has the largest AIS in its row (over the ability splits with
        an AIS); None when its own split or every other one lacks an AIS (ais.diagonal_dominance)."""
        splits = ability_benchmarks(self.benchmarks)
        return ais.diagonal_dominance(
            {
                ability: {b: r.ais for b in splits if (r := self.row(ability, b, k, region)) is not None}
                for ability in self.abilities
                if ability in splits
            }
        )
