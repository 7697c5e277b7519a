"""The claim rule's tests, one per claim (docs/claims.md): each (benchmark, ability) pair at k gets one p-value for
"A's region does more on B than random and placebo regions of its size", corrected over the pairs of its family.

Per selection s of A's region, p_s is the larger of its one-sided p-values top_s − random (rule 1) and top_s −
placebo (rule 2), both needed, so their intersection–union test (Berger 1982) needs no correction across the two;
p_s is 1 where s fails the breadth control (rule 3: residual above 0 at Holm p < alpha over the benchmark's
abilities) or its ablated score is below chance (rule 4), or where a row it needs is missing. "A majority of S
selections" is the m-th smallest p_s (m = S // 2 + 1). With up to m − 1 selections doing more (one sample of items
can make a region that does) and the rest null, p_(m) ≤ t needs one of the S − m + 1 null ones at most t:
probability at most (S − m + 1)·t under any dependence (Bonferroni), so the pair's p is min(1, (S − m + 1)·p_(m))
(`claim_p` on its top − random row; 2·p_(2) for three selections). Holm's correction over the pairs of one family at
one k (`claim_q`): the claim family's real benchmarks, the own family's ability splits. A pair is claimed when
claim_q < alpha and rule 5 holds (claims.py). `selections_agree` counts the selections whose own p_s passes at the
pair's Holm step (so it reaches m exactly when claim_q < alpha).

The gate (aggregate.claim_gate, statistics 12): the own family is tested first, and a real benchmark's pair enters
its claim family only where the ability's region is claimed on the ability's own split. "B draws on A" through a
region that is not shown to remove A says nothing of A; and Holm over fewer pairs asks less of each. The gate reads
the own splits only, never B, so it filters on a statistic apart from the pair's (Bourgon, Gentleman and Huber
2010, independent filtering); the regions and control pools the two share are what tests/test_claim_gate.py
simulates. A pair outside the gate keeps its claim_p, with claim_q NaN: not tested.

`conjunction_claims` is the stricter form measured beside it (tests/test_placebo_rates.py, lab/spikes.py): rule 3's
p and rule 5's enter the maximum too, so every rule is corrected over the real benchmarks' pairs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from benchprof.profile.rows import (
    ADJUSTED,
    HOLM_FAMILIES,
    MEAN,
    OWN,
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


def selection_p(rows: dict[str, AisRow], top: str, placebo: bool, breadth: bool, gate: float | None = None) -> float:
    """One selection's p-value on a cell (`rows`: its rows by region): the largest of its one-sided top − random
    and top − placebo (`placebo`) p-values; 1 where a row the rule needs is missing or the ablated score is below
    chance. With `breadth`, the breadth residual must be above 0 at Holm p < `gate` (the rule), or, without a gate,
    its p joins the maximum (the conjunction form)."""
    if top not in rows or rows[top].below_chance:
        return 1.0
    beyond = rows.get(control_name(top, "random"))
    tests = [_one_sided(beyond)]
    if placebo:
        tests.append(_one_sided(rows.get(control_name(top, "placebo"))))
    if breadth:
        measured = beyond is not None and beyond.breadth_residual > 0 and not math.isnan(beyond.breadth_p)
        p_breadth = beyond.breadth_p if measured and beyond is not None else 1.0
        if gate is None:
            tests.append(p_breadth)
        elif not p_breadth < gate:
            return 1.0
    return max(tests)


def majority_p(p_values: list[float]) -> float:
    """The p-value of "a majority of the S selections pass": S − m + 1 times the m-th smallest, m = S // 2 + 1."""
    s = len(p_values)
    m = s // 2 + 1
    return min(1.0, (s - m + 1) * sorted(p_values)[m - 1])


def _design(profile: Profile) -> tuple[list[str], bool, bool]:
    """The profile's selections (top, top2, ...), whether it has placebo regions, whether it measures breadth."""
    tops = [r for r in profile.regions if is_top(r)] or ["top"]
    placebo = any(is_placebo(r) for r in profile.regions)
    return tops, placebo, any(not math.isnan(r.breadth_p) for r in profile.rows)


def region_cells(profile: Profile) -> dict[tuple[str, float, str, str], dict[str, AisRow]]:
    """Each (ability, k, benchmark, metric)'s rows by region, in the profile's order; the mean and the specificity
    rows left out."""
    cells: dict[tuple[str, float, str, str], dict[str, AisRow]] = {}
    for row in profile.rows:
        if row.benchmark != SPECIFICITY and row.ability != MEAN:
            cells.setdefault((row.ability, row.k, row.benchmark, row.metric), {})[row.region] = row
    return cells


def gate(profile: Profile, k: float) -> set[str] | None:
    """The abilities whose real-benchmark pairs enter the claim families at k (aggregate.claim_gate): those whose
    own-split pair is claimed (its claim_q below alpha and rule 5, claims.majority; a split at chance claims
    nothing); None, every ability's pairs tested, where the gate is off, the profile scores no ability's own split
    at k, or its claims are starred rows (one selection and no placebo regions: claims.ruled_claims), which claim_q
    does not decide."""
    from benchprof.profile.claims import majority, ruled_claims

    own = [
        r
        for r in profile.rows
        if r.region == ADJUSTED and r.benchmark == r.ability and r.metric != P_CORRECT and math.isclose(r.k, k)
    ]
    if not profile.claim_gate or not own or not ruled_claims(profile):
        return None
    return {r.ability for r in own if r.family == OWN and majority(r, profile.alpha)}


def apply_claim_rule(profile: Profile) -> None:
    """`selections`, `selections_agree`, `claim_p` and `claim_q` of every tested top − random row (after the
    q-values and the breadth control): one p-value per pair over its selections, Holm over its family's pairs at
    its k. A selection not yet evaluated (or missing a control row) counts as failing."""
    tops, placebo, breadth = _design(profile)
    families: dict[tuple[str, float], list[tuple[AisRow, list[float]]]] = {}
    for rows in region_cells(profile).values():
        overall = rows.get(ADJUSTED)
        if overall is None:
            continue
        overall.selections, overall.selections_agree = len(tops), 0
        overall.claim_p = overall.claim_q = math.nan
        if overall.family in HOLM_FAMILIES:  # a claim's row, tested, above chance
            selections = [selection_p(rows, top, placebo, breadth, profile.alpha) for top in tops]
            overall.claim_p = majority_p(selections)
            families.setdefault((overall.family, overall.k), []).append((overall, selections))
    spare = len(tops) - len(tops) // 2  # S − m + 1
    for (family, k), pairs in sorted(families.items(), key=lambda item: item[0][0] != OWN):  # own first: the gate
        opened = None if family == OWN else gate(profile, k)
        pairs = [(row, selections) for row, selections in pairs if opened is None or row.ability in opened]
        if not pairs:
            continue
        for (row, selections), q in zip(pairs, holm([row.claim_p for row, _ in pairs]), strict=True):
            row.claim_q = float(q)
            # Holm's factor for this pair, monotone steps included: a selection passes below alpha / (S − m + 1) / it
            factor = row.claim_q / row.claim_p if row.claim_p > 0 else len(pairs)
            row.selections_agree = sum(p < profile.alpha / (spare * factor) for p in selections)


def pair_tests(profile: Profile) -> list[PairTest]:
    """The conjunction form: every (benchmark, ability) pair of the profile's real benchmarks above chance at the
    report k (the gate's abilities only, where it is on), on each benchmark's primary metric, with every rule's p in
    the maximum and Holm over the pairs."""
    k = profile.report_k
    tops, placebo, breadth = _design(profile)
    splits = set(ability_benchmarks(profile.benchmarks, profile.abilities))
    opened = gate(profile, k)
    tested = []
    for (ability, k_cell, benchmark, metric), rows in region_cells(profile).items():
        real = benchmark not in splits and benchmark not in profile.at_chance
        primary = metric != P_CORRECT and metric == profile.metrics.get(benchmark, metric)
        if not (real and primary and math.isclose(k_cell, k)) or (opened is not None and ability not in opened):
            continue
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
