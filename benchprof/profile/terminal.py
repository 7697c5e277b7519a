"""What `aggregate` prints for one model, and only there: the headline AIS table (split into tables that fit the
terminal), the regions' overlap, specificity and breadth lines, then the claims in words, each line wrapped at
formatting.TERMINAL_WIDTH. ais.md holds the same content with each line whole (report.py, claims.py)."""

from __future__ import annotations

import math

from benchprof.core.layout import format_k
from benchprof.profile.claims import claim_lines
from benchprof.profile.formatting import fmt_interval, terminal_fill, terminal_table
from benchprof.profile.report import ais_cells
from benchprof.profile.rows import ADJUSTED, MEAN, SPECIFICITY, Profile


def print_profile(profile: Profile, k: float) -> None:
    """One model's headline AIS table at k, its overlap, specificity and breadth lines, then its claims in words
    (ais.md's opening section).

    With random regions the table is the claim's: top - random, starred by Holm over its family (the
    region hurts more than a random region of its size). Without them, the top region's AIS, starred by the
    damage family (zeroing it changes the score), and the heading says so."""
    alpha = f"{profile.alpha:g}"
    if ADJUSTED in profile.regions_with_adjusted:
        region = ADJUSTED
        heading = (
            f"top region minus random regions of its size (* Holm p < {alpha} over its family, claim or own: it hurts "
            "more than a random region, positive: it hurts, negative: it helps; the top region alone: ais.md)"
        )
    else:
        region = "top"
        heading = (
            f"top region (* q < {alpha}, Benjamini-Hochberg over the damage family: zeroing it changes the score, "
            "positive: it hurts, negative: it helps; no random region to claim more than)"
        )
    print("\n" + terminal_fill(f"{profile.model}: AIS at k = {format_k(k)}, {heading}"))
    print(terminal_table(*ais_cells(profile, k, region)))
    for line in profile.overlap + specificity_summary(profile, k) + breadth_summary(profile, k):
        print(terminal_fill(line))
    print("\n" + "\n".join(claims_terminal(profile)))  # last: what the profile claims, as ais.md opens


def specificity_summary(profile: Profile, k: float) -> list[str]:
    """The lines `aggregate` prints: mean specificity of the top region at k, and diagonal dominance."""
    row = profile.row(MEAN, SPECIFICITY, k, "top")
    if row is None:
        return []
    interval = "" if math.isnan(row.ci_low) else f" [{row.ci_low:+.3f}, {row.ci_high:+.3f}]"
    known = {a: v for a, v in profile.diagonal_dominance(k).items() if v is not None}
    return [
        f"{profile.model} k={format_k(k)} top (score {profile.score}): mean specificity {row.ais:+.3f}{interval}, "
        f"diagonal dominance {sum(known.values())} of {len(known)}"
    ]


def breadth_summary(profile: Profile, k: float) -> list[str]:
    """The line `aggregate` prints: per benchmark above chance at k, its significantly positive abilities and the
    effective number of abilities."""
    lines = [b for b in profile.breadth if b.headline and math.isclose(b.k, k)]
    if not lines:
        return []
    return [
        f"{profile.model} k={format_k(k)} breadth (significantly positive abilities; effective number): "
        + "; ".join(
            f"{b.benchmark} {b.n_positive}, "
            + fmt_interval(b.effective_abilities, b.effective_ci_low, b.effective_ci_high, 1)
            for b in lines
        )
    ]


def claims_terminal(profile: Profile) -> list[str]:
    """What `aggregate` prints last for one model: the same claims as ais.md's, under a key, each entry wrapped at
    TERMINAL_WIDTH (an entry of several lines holds newlines)."""
    entries = [
        f"{profile.model}: claims at k = {format_k(profile.report_k)} (draws on: the ability's region lowers the "
        "benchmark more than random regions of its size, top AIS then top − random [95% interval], Holm p < "
        f"{profile.alpha:g} over its family, claim or own, and on p_correct apart; no claim: none does, with the "
        "smallest AIS its test would likely have seen; ais.md opens with the same lines)"
    ] + [f"- {line}" for line in claim_lines(profile)]
    return [terminal_fill(entry) for entry in entries]
