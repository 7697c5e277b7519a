"""The claim's controls beyond one region against random ones: what the placebo regions alone would claim
(issue 63's false-claim rate on real data: every placebo region tested as if it were an ability's top region,
against the random regions of its size on each real benchmark), and the claim's figure over selections.

A placebo region is chosen by the procedure on items no skill answers; whatever it "draws on" is the procedure's
confound, not an ability. The share of placebo rows that top − random's test would star says how often a claim
beyond random regions alone is false on this model and these benchmarks.
"""

from __future__ import annotations

import math

from benchprof.core.region_names import random_draw
from benchprof.profile.rows import AisRow, Profile, is_placebo, real_benchmarks
from benchprof.stats.control import selections_against_control, top_against_random
from benchprof.stats.multitest import holm


def placebo_stars(profile: Profile) -> tuple[int, int]:
    """(starred, tested): the placebo rows of the real benchmarks above chance on their primary metric, each
    tested against every ability's random draws at its k by stats.control.top_against_random (the predictive t
    without the item-noise refinement), Holm over all of them; starred when the adjusted p < aggregate.alpha with
    AIS above the random regions' mean."""
    real = set(real_benchmarks(profile.benchmarks, profile.abilities)) - set(profile.at_chance)
    primary = [r for r in profile.rows if r.benchmark in real and r.metric == profile.metrics.get(r.benchmark)]
    pools: dict[tuple[float, str], list[float]] = {}
    for row in primary:
        if random_draw(row.region) and row.score_ablated is not None and not math.isnan(row.ais):
            pools.setdefault((row.k, row.benchmark), []).append(row.ais)
    tested: list[tuple[AisRow, float, float]] = []
    for row in primary:
        if is_placebo(row.region) and not math.isnan(row.ais):
            comparison = top_against_random(row.ais, pools.get((row.k, row.benchmark), []))
            if comparison is not None:
                tested.append((row, comparison.estimate, comparison.p_value))
    if not tested:
        return 0, 0
    adjusted = holm([p for _, _, p in tested])
    starred = sum(q < profile.alpha and estimate > 0 for (_, estimate, _), q in zip(tested, adjusted, strict=True))
    return int(starred), len(tested)


def set_selections(
    row: AisRow, tops: list[float], random: list[float], noises: tuple[float, float, float], item_df: float
) -> None:
    """Give a top-random row the claim's figure: the mean over the ability's selections of top − random, with the
    interval and p of stats.control.selections_against_control (items, selections and random draws resampled).
    noises: stats.resampling.selections_bootstrap's (item_var, top_noise, control_noise). Left NaN with one
    selection or too few random draws."""
    item_var, top_noise, control_noise = noises
    comparison = selections_against_control(tops, random, item_var, item_df, top_noise, control_noise)
    if comparison is not None:
        row.selections_ais, row.selections_p = comparison.estimate, comparison.p_value
        row.selections_low, row.selections_high = comparison.ci_low, comparison.ci_high
