"""What a profile claims, in words: one line per benchmark, the section `## Claims` that opens ais.md and the lines
`aggregate` prints last for each model.

A benchmark draws on an ability when the ability's top-random row at the report k, on the benchmark's primary
metric, is starred: Holm's correction over the claim family (cells.family_of, docs/statistics.md) says zeroing
the ability's region lowers the benchmark more than zeroing random regions of its size. A benchmark with tested
claim rows and no star gets the minimum detectable AIS of its top regions (the median of their `mde`): effects
below it could not have been seen. A benchmark the model is at chance on claims nothing. Everything is read from
the rows (AisRow), so a profile read back from ais.csv gets the same lines as the one `aggregate` computed.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from benchprof.core.layout import format_k
from benchprof.core.region_names import selection_of
from benchprof.profile.formatting import fmt_interval
from benchprof.profile.rows import (
    ADJUSTED,
    HOLM_FAMILIES,
    MEAN,
    OWN,
    P_CLAIM,
    P_CORRECT,
    PRIMARY,
    SPECIFICITY,
    AisRow,
    Profile,
    control_of,
    is_placebo,
)
from benchprof.stats.power import minimum_detectable_beyond_control


@dataclass
class Claim:
    """One benchmark's verdict at the report k. kind: "claims" (at least one starred claim row), "none" (tested,
    nothing starred), "chance" (the model is at chance on it), "untested" (no claim row with a test) or "gated"
    (tested rows, none of an ability through the gate: claim_tests.gate)."""

    benchmark: str
    kind: str
    draws_on: list[AisRow] = field(default_factory=list)  # starred top-random rows with AIS > 0, largest first
    less_than_random: list[AisRow] = field(default_factory=list)  # starred with AIS < 0, most negative first
    top: dict[str, float] = field(default_factory=dict)  # ability -> the top region's own AIS
    mde: float = math.nan  # kind "none": the median minimum detectable AIS of its top regions
    mde_placebo: float = math.nan  # ... and the smallest top − placebo its test would likely have seen
    # abilities that met the tests in a majority of their selections but have no figure over them (per-document
    # results of a selection missing, or aggregate.bootstrap 0): rule 5 could not be tested, so no claim
    unfigured: list[str] = field(default_factory=list)
    original: float = math.nan  # kind "chance": the original score and the chance level
    chance: float = math.nan
    on: str = ""  # the metric named in its line: "p_correct" for the claims on p_correct, "" for the primary one


def _is_claim_row(row: AisRow, k: float, on_p: bool = False) -> bool:
    """A top-random row of one ability on a benchmark's primary metric (`on_p`: on p_correct) at k, tested or not."""
    return (
        row.region == ADJUSTED
        and (row.metric == P_CORRECT) == on_p
        and row.ability != MEAN
        and row.benchmark != SPECIFICITY
        and math.isclose(row.k, k)
    )


def gated_out(row: AisRow) -> bool:
    """A claim row the gate left out (aggregate.claim_gate): its pair has a claim_p and no claim_q."""
    return not math.isnan(row.claim_p) and math.isnan(row.claim_q)


def _pairs(profile: Profile, family: str, on_p: bool = False) -> tuple[list[AisRow], list[AisRow]]:
    """The family's claim rows at the report k with a claim_p (statistics 10 on), and those of them through the gate."""
    pairs = [
        r
        for r in profile.rows
        if r.family == family and _is_claim_row(r, profile.report_k, on_p) and not math.isnan(r.claim_p)
    ]
    return pairs, [r for r in pairs if not gated_out(r)]


def ruled_claims(profile: Profile) -> bool:
    """Whether the profile's claims follow docs/claims.md's rule over selections and placebo regions: it has more
    than one attribution sample per ability, or placebo regions. Otherwise a claim is a starred top-random row."""
    return any(r.selections > 1 for r in profile.rows) or any(
        (c := control_of(r.region)) is not None and c[1] == "placebo" for r in profile.rows
    )


def _agree(row: AisRow, alpha: float) -> bool:
    """A top-random row whose ability meets the claim rule's tests in a majority of its selections (2 of 3): its
    pair's Holm-adjusted p (claim_q, claim_tests.py) below alpha; a profile from before statistics 10 has neither
    claim_p nor claim_q, and its selections_agree counted the selections whose rows were starred. A pair the gate
    left out (a claim_p, no claim_q) is never claimed."""
    majority = row.selections > 0 and row.selections_agree >= row.selections // 2 + 1
    return majority and (math.isnan(row.claim_p) or row.claim_q < alpha)


def majority(row: AisRow, alpha: float) -> bool:
    """A top-random row whose ability meets the claim rule's tests in a majority of its selections (2 of 3), and,
    with more than one selection, whose mean over them is above random regions once items, selections and random
    draws are all resampled (the interval `selections_low`; NaN, as when the per-document results are missing,
    fails, and the line says so)."""
    return _agree(row, alpha) and (row.selections < 2 or row.selections_low > 0)


def _benchmarks(profile: Profile) -> list[str]:
    """The profile's benchmarks in its order, then any only its rows name (a profile read back from ais.csv)."""
    named = [b for b in profile.benchmarks if b != SPECIFICITY]
    return named + list(dict.fromkeys(r.benchmark for r in profile.rows if r.benchmark not in named + [SPECIFICITY]))


def _first_step(profile: Profile, tested: list[AisRow]) -> float:
    """The two-sided level of one selection's top − placebo test at Holm's first step over the claim family: one
    claim's p (claim_tests.py) is S − m + 1 times a selection's one-sided p, over the family's pairs at the report
    k; before statistics 10, alpha over the family's rows."""
    _, through = _pairs(profile, tested[0].family, tested[0].metric == P_CORRECT)
    if not through:  # before statistics 10
        return profile.alpha / max(1, len(_claim_family(profile)))
    selections = max(1, tested[0].selections)
    return 2 * profile.alpha / ((selections - selections // 2) * len(through))


def benchmark_claims(profile: Profile, on_p: bool = False) -> list[Claim]:
    """One Claim per benchmark with rows at the report k, in the profile's order; with `on_p`, on p_correct (the
    benchmarks whose claim rows are in the claim_p_correct family: aggregate.p_correct_claims)."""
    k = profile.report_k
    out = []
    for benchmark in _benchmarks(profile):
        rows = [
            r
            for r in profile.rows
            if r.benchmark == benchmark and math.isclose(r.k, k) and (r.metric == P_CORRECT) == on_p
        ]
        if on_p and not any(r.family == P_CLAIM for r in rows):
            continue
        if not rows:
            continue
        if any(r.at_chance for r in rows):
            scored = next((r for r in rows if not math.isnan(r.chance)), rows[0])
            out.append(Claim(benchmark, "chance", original=scored.score_original, chance=scored.chance))
            continue
        tested = claim_rows(profile, benchmark, on_p)
        if not tested:
            gated = any(gated_out(r) and _is_claim_row(r, k, on_p) for r in rows)
            out.append(Claim(benchmark, "gated" if gated else "untested"))
            continue
        starred = sorted((r for r in tested if r.significant), key=lambda r: -r.ais)
        ruled = ruled_claims(profile)
        top = _top_ais(rows, ruled)
        positive = [r for r in tested if majority(r, profile.alpha)] if ruled else [r for r in starred if r.ais > 0]
        positive.sort(key=lambda r: -(r.ais if math.isnan(r.selections_ais) else r.selections_ais))
        negative = [r for r in starred if r.ais < 0 and r not in positive]
        unfigured = [
            r.ability for r in tested if _agree(r, profile.alpha) and r.selections > 1 and math.isnan(r.selections_low)
        ]
        if positive or negative:
            out.append(Claim(benchmark, "claims", positive, negative[::-1], top, unfigured=unfigured))
            continue
        mdes = [r.mde for r in rows if r.region == "top" and not math.isnan(r.mde)]
        # the placebo pool is every ability's placebo regions at k: one figure per benchmark
        placebos = [r.ais for r in rows if is_placebo(r.region) and r.metric == tested[0].metric]
        beyond = math.nan
        if len(placebos := [a for a in placebos if not math.isnan(a)]) >= 3:
            level = _first_step(profile, tested)
            beyond = minimum_detectable_beyond_control(statistics.stdev(placebos), len(placebos), level)
        median = statistics.median(mdes) if mdes else math.nan
        out.append(Claim(benchmark, "none", mde=median, mde_placebo=beyond, unfigured=unfigured))
    for claim in out:
        claim.on = P_CORRECT if on_p else ""
    return out


def claimed_pairs(profile: Profile, on_p: bool = False) -> frozenset[tuple[str, str]]:
    """The (benchmark, ability) pairs the profile claims "draws on", on the primary metric (`on_p`: p_correct)."""
    return frozenset((c.benchmark, r.ability) for c in benchmark_claims(profile, on_p) for r in c.draws_on)


def claim_rows(profile: Profile, benchmark: str, on_p: bool = False) -> list[AisRow]:
    """The tested top-random rows a benchmark's claims are read from: one per ability, at the report k, on the
    benchmark's primary metric (`on_p`: on p_correct)."""
    return [
        r
        for r in profile.rows
        if r.benchmark == benchmark
        and _is_claim_row(r, profile.report_k, on_p)
        and r.family in HOLM_FAMILIES
        and not math.isnan(r.p_value)
        and not gated_out(r)
    ]


def _top_ais(rows: list[AisRow], ruled: bool) -> dict[str, float]:
    """ability -> the AIS its top region has on the benchmark (on the claim's metric); under the rule, the mean
    over its selections' top regions, beside the figure over selections it is quoted with."""
    metric = next((r.metric for r in rows if r.family in HOLM_FAMILIES), None)
    tops: dict[str, list[float]] = {}
    for r in rows:
        if (
            r.metric == metric
            and (chosen := selection_of(r.region))
            and chosen[0] == "top"
            and (ruled or chosen[1] == 1)
        ):
            tops.setdefault(r.ability, []).append(r.ais)
    return {ability: statistics.fmean(values) for ability, values in tops.items()}


def _figure(row: AisRow, top: dict[str, float], against: str = "beyond") -> str:
    """'Analogical_Reasoning (AIS +0.301, +0.144 [+0.072, +0.216] beyond random regions)'; a claim under the rule
    quotes its figures as means over the selections (the top AIS and the excess beyond random regions)."""
    own = top.get(row.ability, math.nan)
    excess = fmt_interval(row.ais, row.ci_low, row.ci_high, digits=3, sign="+")
    agree = f", {row.selections_agree} of {row.selections} selections" if row.selections > 1 else ""
    if against == "beyond" and row.selections > 1 and not math.isnan(row.selections_ais):
        excess = fmt_interval(row.selections_ais, row.selections_low, row.selections_high, digits=3, sign="+")
        agree = f" on average over {row.selections} selections, {row.selections_agree} agreeing"
    return (
        f"{row.ability} ("
        + ("" if math.isnan(own) else f"AIS {own:+.3f}, ")
        + f"{excess} {against} random regions{agree})"
    )


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


UNTESTED = (
    "no claim can be tested, no top − random row has a test at this k (random regions missing, or fewer draws than "
    "their spread needs: Notes)"
)


def claim_line(claim: Claim) -> str:
    """One benchmark's verdict in words (one line; said the same way in ais.md and on the terminal). What "draws
    on", "no claim" and "at chance" mean is said once, in the lead above the lines."""
    b = claim.benchmark + (f" ({claim.on})" if claim.on else "")
    if claim.kind == "chance":
        against = "" if math.isnan(claim.chance) else f" against {claim.chance:.3f}"
        return f"{b}: at chance ({claim.original:.3f}{against}); no claim."
    if claim.kind == "untested":  # compare.md's line for it (ais.md gathers these in one line: claim_lines)
        return f"{b}: {UNTESTED}."
    if claim.kind == "gated":
        return f"{b}: no claim tested, no ability through the gate (ais.md: Gate)."
    unfigured = (
        f" {_and(claim.unfigured)} met the tests in a majority of selections but has no figure over them "
        "(a selection's per-document results missing, or aggregate.bootstrap 0), so rule 5 is untested."
        if claim.unfigured
        else ""
    )
    if claim.kind == "none":
        return f"{b}: no claim{_detectable(claim)}.{unfigured}"
    parts = []
    if claim.draws_on:
        parts.append(f"{b} draws on " + _and([_figure(r, claim.top) for r in claim.draws_on]))
    if claim.less_than_random:
        figures = _and([_figure(r, claim.top, "against") for r in claim.less_than_random])
        parts.append(("" if parts else f"{b}: ") + f"the region of {figures} lowers it less than random regions do")
    return "; ".join(parts) + "." + unfigured


def _detectable(claim: Claim) -> str:
    """What a "no claim" could have seen, in parentheses: the minimum detectable AIS against the original model and
    beyond placebo regions."""
    beyond = "" if math.isnan(claim.mde_placebo) else f"at least {claim.mde_placebo:.2f} beyond placebo regions"
    if math.isnan(claim.mde):
        return (
            f" (minimum detectable AIS {beyond})" if beyond else " (no minimum detectable AIS: no per-document results)"
        )
    figures = f"{claim.mde:.2f} against the original model, {beyond}" if beyond else f"{claim.mde:.2f}"
    return f" (minimum detectable AIS {figures})"


def specificity_line(profile: Profile) -> str:
    """The abilities whose region lowers their own split more than the others, beyond what random regions show
    there (the starred top-random specificity rows at the report k); '' when the profile has no such rows."""
    rows = [
        r
        for r in profile.rows
        if r.benchmark == SPECIFICITY
        and r.region == ADJUSTED
        and r.ability != MEAN
        and r.family in HOLM_FAMILIES  # own; the claim family's before statistics 10
        and math.isclose(r.k, profile.report_k)
    ]
    if not rows:
        return ""
    starred = sorted((r for r in rows if r.significant and r.ais > 0), key=lambda r: -r.ais)
    if not starred:
        return (
            "Specificity: no region lowers its own split more than the other splits beyond what random regions show "
            f"({len(rows)} tested)."
        )
    figures = [f"{r.ability} ({fmt_interval(r.ais, r.ci_low, r.ci_high, digits=3, sign='+')})" for r in starred]
    return (
        f"Specificity: the regions of {_and(figures)} lower their own split more than the other splits, beyond what "
        f"random regions show there ({len(starred)} of {len(rows)} tested)."
    )


def claim_lines(profile: Profile) -> list[str]:
    """The Claims' lines: one per benchmark (those without a test in one line), then the specificity line."""
    claims = benchmark_claims(profile)
    reach = profile.no_claim_reach  # what the rule would have seen, where `benchprof spikes` measured it
    lines = [
        claim_line(c) + (f" {reach[c.benchmark]}" if c.kind == "none" and c.benchmark in reach else "")
        for c in claims
        if c.kind != "untested"
    ]
    untested = [c.benchmark for c in claims if c.kind == "untested"]
    if untested:
        lines.append(f"{', '.join(untested)}: {UNTESTED}.")
    lines += p_correct_lines(profile)
    if opened := gate_line(profile):
        lines.append(opened)
    if spec := specificity_line(profile):
        lines.append(spec)
    return lines


def gate_line(profile: Profile) -> str:
    """Which abilities' pairs the gate (aggregate.claim_gate, claim_tests.gate) let into the claim families at the
    report k: those with a claim_q; '' where every tested pair has one (the gate off, or every ability through)."""
    pairs = [r for family, on_p in ((PRIMARY, False), (P_CLAIM, True)) for r in _pairs(profile, family, on_p)[0]]
    shut = [a for a in profile.abilities if any(r.ability == a and gated_out(r) for r in pairs)]
    if not shut or not ruled_claims(profile):
        return ""
    through = [a for a in profile.abilities if a not in shut and any(r.ability == a for r in pairs)]
    its = "its region not claimed on its" if len(shut) == 1 else "their regions not claimed on their"
    untested = f"{_and(shut)}: not tested on real benchmarks, {its} own split"
    if not through:
        return f"Gate: no region is claimed on its own split, so no real benchmark's claim is tested ({untested})."
    return f"Gate: the claims above test {_and(through)}, whose region is claimed on its own split; {untested}."


NOT_CLAIMED = {"none": ("none",), "untested": ("untested", "gated")}  # p_correct_lines' one line: its two parts


def p_correct_lines(profile: Profile) -> list[str]:
    """The claims on p_correct (aggregate.p_correct_claims): a line per benchmark with one, then one line for the
    benchmarks with none; [] where the profile declares none."""
    claims = [c for c in benchmark_claims(profile, on_p=True) if c.kind != "chance"]
    if not claims:
        return []
    lines = [claim_line(c) for c in claims if c.kind == "claims"]
    rest = {kind: [c.benchmark for c in claims if c.kind in kinds] for kind, kinds in NOT_CLAIMED.items()}
    unclaimed = [c.benchmark + _detectable(c) for c in claims if c.kind == "none"]
    said = [
        f"no claim on {_and(unclaimed)}" if unclaimed else "",
        f"no test on {_and(rest['untested'])}" if rest["untested"] else "",
    ]
    reach = [
        f"{c.benchmark}: {profile.no_claim_reach_p[c.benchmark]}"
        for c in claims
        if c.kind == "none" and c.benchmark in profile.no_claim_reach_p
    ]
    if any(said):
        lines.append(" ".join(["On p_correct: " + "; ".join(s for s in said if s) + ".", *reach]))
    return lines


def _claim_family(profile: Profile) -> list[AisRow]:
    return [r for r in profile.rows if r.family == PRIMARY]


def _counted(profile: Profile, family: list[AisRow]) -> str:
    """What counts as a claim in ais.md's lead: one test per claim over the claim family's pairs (statistics 10, with
    selections), or the starred rows of the claim family (one selection, or a profile from before)."""
    pairs, through = _pairs(profile, PRIMARY)
    if ruled_claims(profile) and pairs:
        gated = (
            " whose ability's region is claimed on its own split (the gate, which reads the own splits only and is "
            "tested first; its rate: docs/statistics.md)"
            if len(through) < len(pairs)
            else ""
        )
        return (
            f"A claim is one test over its selections, Holm's correction over the {len(through)} (benchmark, "
            f"ability) pairs of the claim family{gated} (claim_q; the ability splits' pairs are a family apart), so "
            "the chance of any false claim on a real benchmark's primary metric in this profile"
        )
    if any(r.family == OWN for r in profile.rows):
        return (
            f"Only rows starred by Holm's correction over the {len(family)} rows of the claim family (the ability "
            "splits' rows are a family apart) count, so the chance of any false claim on a real benchmark in this "
            "profile"
        )  # profiles before statistics 10 held both in one family:
    return f"Only rows starred by Holm's correction over the {len(family)} rows of the claim family count, so the " + (
        "chance of any false claim in this profile"
    )


def claims_markdown(profile: Profile) -> list[str]:
    """ais.md's opening section: what its words mean, once, then one line per benchmark."""
    k = profile.report_k
    family = _claim_family(profile)
    draws = max((r.control_draws for r in profile.rows if _is_claim_row(r, k)), default=0)
    if not family:
        lead = (
            f"At k = {format_k(k)}, no claim was tested. A claim compares an ability's region with random regions of "
            "its size (extract.regions with random: at least three draws at k, pooled over the abilities); without "
            "them the tables below say which regions hurt a benchmark, not which abilities it draws on. At chance: "
            "the model does not score above chance there, so its AIS is noise."
        )
        return ["## Claims", "", lead, ""] + [f"- {line}" for line in claim_lines(profile)]
    lead = (
        f"At k = {format_k(k)}, on each benchmark's primary metric. **Draws on**: zeroing the ability's region lowers "
        "the benchmark more than zeroing random regions of the same size"
        + (f" ({draws} draws at this k, pooled over the abilities)" if draws else "")
        + "; the figures are the top region's AIS, then that excess (top − random) with its 95% interval. "
        + _counted(profile, family)
        + f" is at most {profile.alpha:g} (docs/statistics.md). **No claim**: no ability's "
        "region does so; the minimum detectable AIS (80% power, the median over the benchmark's top regions) is the "
        "smallest effect its test would likely have seen, and nothing can be said of smaller ones"
        + (
            "; its Reach is what the whole rule claims in 80% of resamples: the smallest share of the benchmark "
            "that an ability's own items, mixed in, must be (a benchmark not claimed takes no more of the ability, at "
            "that power), "
            "and the smallest AIS planted in the ability's top regions (docs/claims.md)"
            if profile.no_claim_reach
            else ""
        )
        + ". **At chance**: the "
        "model does not score above chance there, so its AIS is noise. Every cell is in the tables below and in "
        "ais.csv. "
        + (
            "A claim also needs the region to do more than placebo regions (the same option on the abilities' "
            "items with their answers drawn at random) where the profile has them, more than its damage to the "
            "other abilities' splits predicts (the breadth control, where the profile scores those splits), and "
            "the benchmark's ablated score not below chance, in a majority of the attribution samples "
            "(selections), and the mean over the selections above random regions once items, selections and "
            "random draws are all resampled; the figure is that mean with its interval (docs/claims.md). Where "
            "nothing is claimed, the second minimum detectable AIS bounds from below the smallest top − placebo "
            "the rule would likely have seen: the comparison with the placebo regions alone would need that much "
            "for 80% power at alpha over the claim family, from the spread of the benchmark's placebo regions."
            + (
                f" Placebo regions alone, each tested against random regions as a top region is (Holm over them), "
                f"would have starred {profile.placebo_stars[0]} of {profile.placebo_stars[1]} rows on real "
                "benchmarks: the false-claim rate of a claim beyond random regions only."
                if len(profile.placebo_stars) == 2 and profile.placebo_stars[1]
                else ""
            )
            if ruled_claims(profile)
            else "These claims are beyond random regions only: a region chosen the same way on items of the same "
            "format (placebo), its breadth and another attribution sample are not yet controlled (docs/claims.md)."
        )
    )
    _, p_pairs = _pairs(profile, P_CLAIM, on_p=True)  # through the gate
    if p_pairs:
        lead += (
            f" Lines marked (p_correct) apply the same rule to each item's probability of the right option "
            f"(aggregate.p_correct_claims), which registers damage that flips no answer: Holm over its own "
            f"{len(p_pairs)} pairs, a family apart, so the chance of any false claim on either metric is at most "
            f"{2 * profile.alpha:g}."
        )
    return ["## Claims", "", lead, ""] + [f"- {line}" for line in claim_lines(profile)]
