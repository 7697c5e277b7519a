"""The breadth control of a profile's claims (docs/claims.md, rule 3): per benchmark and k, every top region's
top − random AIS against its damage to the other abilities' splits (stats.breadth), written on its top − random
row as `breadth` (the region's mean top − random AIS on the ability splits that are neither its ability's nor the
benchmark), `breadth_residual` and `breadth_p` (one-sided, Holm over the abilities' regions of one selection). The
line is corrected for each breadth's item noise where the top rows' intervals give it (stats.breadth's x_var).
"""

from __future__ import annotations

import math

from benchprof.core.region_names import selection_of
from benchprof.profile.rows import SPECIFICITY, AisRow, Profile, ability_benchmarks, control_of, is_top
from benchprof.stats.breadth import breadth_residuals
from benchprof.stats.multitest import holm


def top_random_rows(profile: Profile) -> dict[tuple[str, float, str, str], AisRow]:
    """(ability, k, benchmark, top region) -> its top − random row on the benchmark's primary metric."""
    out = {}
    for row in profile.rows:
        control = control_of(row.region)
        if control is None or control[1] != "random" or row.benchmark == SPECIFICITY:
            continue
        if row.metric == profile.metrics.get(row.benchmark):
            out[(row.ability, row.k, row.benchmark, control[0])] = row
    return out


def region_breadth(
    rows: dict[tuple[str, float, str, str], AisRow],
    splits: list[str],
    ability: str,
    k: float,
    top: str,
    benchmark: str,
    tops: dict[tuple[str, float, str, str], AisRow],
) -> tuple[float, float]:
    """A top region's breadth, its mean top − random AIS over the ability splits that are neither its own
    ability's nor the benchmark, and that mean's item variance: each split's from its top row's 95% interval
    (half-width / 1.96, squared), over the splits squared. NaN when a split has no AIS (or there are none); the
    variance NaN when an interval is missing."""
    keys = [(ability, k, split, top) for split in splits if split not in (ability, benchmark)]
    if not keys or any(key not in rows for key in keys):
        return math.nan, math.nan
    spreads = [(tops[key].ci_high - tops[key].ci_low) / (2 * 1.96) if key in tops else math.nan for key in keys]
    return sum(rows[key].ais for key in keys) / len(keys), sum(s**2 for s in spreads) / len(keys) ** 2


def apply_breadth(profile: Profile) -> None:
    """Set breadth, breadth_residual and breadth_p on every top − random row of a benchmark above chance, where the
    profile scores at least one other ability split per region and the line has enough regions (stats.breadth)."""
    splits = [b for b in ability_benchmarks(profile.benchmarks, profile.abilities) if b in profile.abilities]
    if not splits:
        return
    rows = top_random_rows(profile)
    tops = {  # the top regions' own rows (each selection's), whose intervals give a breadth's item noise
        (r.ability, r.k, r.benchmark, r.region): r
        for r in profile.rows
        if r.metric == profile.metrics.get(r.benchmark) and is_top(r.region)
    }
    cells: dict[tuple[float, str], list[tuple[str, str]]] = {}
    for ability, k, benchmark, top in rows:
        if benchmark not in profile.at_chance:
            cells.setdefault((k, benchmark), []).append((ability, top))
    for (k, benchmark), regions in cells.items():
        chosen = [rows[(a, k, benchmark, t)] for a, t in regions]
        noise = []
        for row, (ability, top) in zip(chosen, regions, strict=True):
            row.breadth, variance = region_breadth(rows, splits, ability, k, top, benchmark, tops)
            noise.append(variance)
        measured = all(not math.isnan(v) for v, r in zip(noise, chosen, strict=True) if not math.isnan(r.breadth))
        groups = [a for a, _ in regions]  # each line without the region's ability; its noise where intervals say it
        x_var = noise if measured else None
        found = breadth_residuals([r.ais for r in chosen], [r.breadth for r in chosen], groups, x_var)
        by_selection: dict[int, list[tuple[AisRow, float]]] = {}
        for row, result, (_, top) in zip(chosen, found, regions, strict=True):
            if result is None:
                continue
            row.breadth_residual = result.residual
            chosen_as = selection_of(top)
            by_selection.setdefault(chosen_as[1] if chosen_as else 1, []).append((row, result.p_value))
        for tested in by_selection.values():  # Holm over the benchmark's abilities, one selection at a time
            for (row, _), adjusted in zip(tested, holm([p for _, p in tested]), strict=True):
                row.breadth_p = float(adjusted)
