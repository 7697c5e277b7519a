"""The claim rule as one test per claim (docs/claims.md, "The rule as one test per claim"): the same five rules,
each a test at level alpha of one (benchmark, ability) pair, combined as an intersection–union test, with Holm's
correction over the real benchmarks' pairs only.

A claim "B draws on A" needs every rule at once, so its null is the union of the rules' nulls; a test that rejects
only when every rule's test rejects keeps its size at alpha with no correction across the rules (Berger 1982).
Per selection s of A's region, p_s is the largest of its one-sided p-values: top_s − random (rule 1), top_s −
placebo (rule 2), its residual beyond breadth (rule 3, `breadth_p`), and 1 where the ablated score is below chance
(rule 4). "A majority of S selections" is the m-th smallest p_s (m = S // 2 + 1), which is at most t for at least m
of S p-values whose nulls hold with probability at most S·t/m (Markov's inequality on their count, under any
dependence between the selections), so the pair's selections give p = min(1, S/m · p_(m)). Rule 5, the mean over
the selections above random regions (`selections_p`), is one more test in the conjunction. The pair's p is the
largest of these; Holm's correction over the pairs of the benchmarks that are neither an ability split nor at
chance keeps the chance of any false claim in a profile at alpha.

The rule of claims.py corrects each rule's rows over a family of every row of every rule and selection, ability
splits included; this form tests the same rules with one p-value per claim. A lab function for now: its rates are
measured in tests/test_placebo_rates.py and its reach on spiked benchmarks by lab/spikes.py; ais.csv keeps the
rule of claims.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from benchprof.profile.rows import (
    ADJUSTED,
    MEAN,
    P_CORRECT,
    SPECIFICITY,
    AisRow,
    Profile,
    ability_benchmarks,
    control_name,
    is_placebo,
    is_top,
)
from benchprof.stats.multitest import holm
from benchprof.stats.paired import one_sided_p


@dataclass(frozen=True)
class PairTest:
    """One (benchmark, ability) pair's test under the conjunction form."""

    benchmark: str
    ability: str
    figure: float  # the claim's figure: the mean over selections of top − random (one selection: its top − random)
    p_value: float  # the intersection–union p-value of the five rules
    adjusted: float  # Holm over the profile's pairs
    claimed: bool


def _one_sided(row: AisRow | None) -> float:
    """A row's one-sided p-value that its AIS is above its control's; 1 where the row or its test is missing."""
    if row is None or math.isnan(row.p_value) or math.isnan(row.ais):
        return 1.0
    return float(one_sided_p(row.p_value, row.ais))


def selection_p(rows: dict[str, AisRow], top: str, placebo: bool, breadth: bool) -> float:
    """One selection's p-value for rules 1 to 4 on a cell (`rows`: its rows by region): the largest of its one-sided
    p-values, 1 where a row the rule needs is missing or the ablated score is below chance."""
    if top not in rows or rows[top].below_chance:
        return 1.0
    beyond = rows.get(control_name(top, "random"))
    tests = [_one_sided(beyond)]
    if placebo:
        tests.append(_one_sided(rows.get(control_name(top, "placebo"))))
    if breadth:
        measured = beyond is not None and beyond.breadth_residual > 0 and not math.isnan(beyond.breadth_p)
        tests.append(beyond.breadth_p if measured and beyond is not None else 1.0)
    return max(tests)


def majority_p(p_values: list[float]) -> float:
    """The p-value of "a majority of the S selections pass": S/m times the m-th smallest, m = S // 2 + 1."""
    s = len(p_values)
    m = s // 2 + 1
    return min(1.0, s / m * sorted(p_values)[m - 1])


def pair_tests(profile: Profile) -> list[PairTest]:
    """Every (benchmark, ability) pair of the profile's real benchmarks above chance at the report k, on each
    benchmark's primary metric, with its conjunction p-value and Holm's correction over the pairs."""
    k = profile.report_k
    tops = [r for r in profile.regions if is_top(r)] or ["top"]
    placebo = any(is_placebo(r) for r in profile.regions)
    breadth = any(not math.isnan(r.breadth_p) for r in profile.rows)
    splits = set(ability_benchmarks(profile.benchmarks, profile.abilities))
    cells: dict[tuple[str, str], dict[str, AisRow]] = {}
    for row in profile.rows:
        real = row.benchmark not in splits and row.benchmark != SPECIFICITY and row.benchmark not in profile.at_chance
        if real and row.ability != MEAN and row.metric != P_CORRECT and math.isclose(row.k, k):
            if row.metric == profile.metrics.get(row.benchmark, row.metric):
                cells.setdefault((row.benchmark, row.ability), {})[row.region] = row
    tested = []
    for (benchmark, ability), rows in cells.items():
        overall = rows.get(ADJUSTED)
        if overall is None or any(r.at_chance for r in rows.values()):
            continue
        p = majority_p([selection_p(rows, top, placebo, breadth) for top in tops])
        figure = overall.ais
        if len(tops) > 1:
            figure = overall.selections_ais
            rule5 = 1.0 if math.isnan(overall.selections_p) else float(one_sided_p(overall.selections_p, figure))
            p = max(p, rule5)
        tested.append((benchmark, ability, figure, p))
    adjusted: list[float] = [float(q) for q in holm([p for *_, p in tested])] if tested else []
    return [
        PairTest(b, a, figure, p, float(q), bool(q < profile.alpha and figure > 0))
        for (b, a, figure, p), q in zip(tested, adjusted, strict=True)
    ]


def conjunction_claims(profile: Profile) -> list[tuple[str, str]]:
    """The (benchmark, ability) pairs the conjunction form claims, in the profile's order."""
    return [(t.benchmark, t.ability) for t in pair_tests(profile) if t.claimed]
