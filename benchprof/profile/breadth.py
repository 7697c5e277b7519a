"""The breadth control of a profile's claims (docs/claims.md, rule 3): per benchmark and k, every top region's
top − random AIS against its damage to the other abilities' splits (stats.breadth), written on its top − random
row as `breadth` (the region's mean top − random AIS on the ability splits that are neither its ability's nor the
benchmark; on their p_correct where the line has it there), `breadth_residual` and `breadth_p` (one-sided, Holm over
the abilities' regions of one selection). The line is corrected for each breadth's item noise (stats.breadth's
x_var): from the per-document scores, only the part the regions of the line do not share (`line_noise`); without
them, from the top rows' intervals.
"""

from __future__ import annotations

import math
from typing import Any

from benchprof.core.region_names import random_draw, selection_of
from benchprof.core.results import PerDoc
from benchprof.profile.rows import (
    P_CLAIM,
    P_CORRECT,
    SPECIFICITY,
    AisRow,
    Profile,
    ability_benchmarks,
    control_of,
    is_top,
)
from benchprof.stats.breadth import breadth_residuals, unshared_variance
from benchprof.stats.multitest import holm

RowsByRegion = dict[tuple[str, float, str, str], AisRow]  # (ability, k, benchmark, region) -> its row


def top_random_rows(profile: Profile, metric: str | None = None) -> RowsByRegion:
    """(ability, k, benchmark, top region) -> its top − random row on the benchmark's primary metric (or on
    `metric`, e.g. p_correct)."""
    out = {}
    for row in profile.rows:
        control = control_of(row.region)
        if control is None or control[1] != "random" or row.benchmark == SPECIFICITY:
            continue
        if row.metric == (metric or profile.metrics.get(row.benchmark)):
            out[(row.ability, row.k, row.benchmark, control[0])] = row
    return out


def top_rows(profile: Profile, metric: str | None = None) -> RowsByRegion:
    """(ability, k, benchmark, top region) -> the top region's own row (its interval gives the item noise)."""
    return {
        (r.ability, r.k, r.benchmark, r.region): r
        for r in profile.rows
        if r.metric == (metric or profile.metrics.get(r.benchmark)) and is_top(r.region)
    }


def region_breadth(
    rows: RowsByRegion, splits: list[str], ability: str, k: float, top: str, benchmark: str, tops: RowsByRegion
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


SplitDocs = dict[tuple[str, str, float, str], PerDoc]  # (ability split, ability, k, region) -> per-document values


def line_noise(
    regions: list[tuple[str, str]],
    splits: list[str],
    k: float,
    benchmark: str,
    original_docs: dict[str, PerDoc],
    ablated_docs: SplitDocs,
) -> list[float] | None:
    """The item noise of each (ability, top region)'s breadth that the line sees (stats.breadth.unshared_variance),
    from the splits' per-document values; None where a split lacks them for a region or its random pool. Region r's
    top − random AIS on split s is, linearised, the mean over its documents of (pool_d − ablated_rd) / the
    original's mean, pool_d the mean of the random draws at k (every ability's, as the rows' pool)."""
    import numpy as np

    if len(regions) < 2:
        return None
    damage = []
    for split in splits:
        if split == benchmark:
            continue
        if split not in original_docs:
            return None
        users = [i for i, (ability, _) in enumerate(regions) if ability != split]
        pool = [d for (s, _, k_, region), d in ablated_docs.items() if s == split and k_ == k and random_draw(region)]
        tops = [ablated_docs.get((split, regions[i][0], k, regions[i][1])) for i in users]
        if not pool or any(docs is None for docs in tops):
            return None
        keys = sorted(set(original_docs[split]).intersection(*pool, *(d for d in tops if d is not None)), key=str)
        mean = float(np.mean([original_docs[split][key] for key in keys])) if keys else 0.0
        if len(keys) < 2 or mean == 0:
            return None
        pooled = np.mean([[docs[key] for key in keys] for docs in pool], axis=0)
        rows = np.zeros((len(regions), len(keys)))
        for i, docs in zip(users, tops, strict=True):
            averaged = sum(1 for s in splits if s not in (regions[i][0], benchmark))
            rows[i] = (pooled - np.array([docs[key] for key in keys])) / (mean * averaged)  # type: ignore[index]
        damage.append(rows)
    return unshared_variance(damage) if damage else None


Docs = tuple[dict[str, PerDoc], SplitDocs]  # the splits' original and ablated per-document values on one metric


NoiseCache = dict[tuple[Any, ...], "list[float] | None"]  # line_noise by what it reads (line_breadths)


def line_breadths(
    profile: Profile,
    line: list[tuple[str, str]],
    k: float,
    benchmark: str,
    docs: Docs,
    metric: str | None = None,
    noise: NoiseCache | None = None,
) -> tuple[list[float], list[float] | None]:
    """The line's breadths on `metric` (default each split's primary) and the noise to correct it for: the part
    the regions do not share (line_noise) where the per-document values give it, else each top row's interval;
    None where neither does. `noise` keeps line_noise per (line, k, metric, benchmark where it is a split): the
    lines of every real benchmark at k hold the same regions over the same splits, so it is computed once."""
    splits = [b for b in ability_benchmarks(profile.benchmarks, profile.abilities) if b in profile.abilities]
    rows, tops = top_random_rows(profile, metric), top_rows(profile, metric)
    found = [region_breadth(rows, splits, ability, k, top, benchmark, tops) for ability, top in line]
    x = [value for value, _ in found]
    key = (tuple(line), k, metric, benchmark if benchmark in splits else "")
    noise = {} if noise is None else noise
    if key not in noise:
        noise[key] = line_noise(line, splits, k, benchmark, *docs)
    shared = noise[key]
    if shared is not None:
        return x, shared
    measured = all(not math.isnan(v) for value, v in found if not math.isnan(value))
    return x, [v for _, v in found] if measured else None


def apply_breadth(profile: Profile, docs: Docs | None = None, p_docs: Docs | None = None) -> None:
    """Set breadth, breadth_residual and breadth_p on every top − random row of a benchmark above chance, where the
    profile scores at least one other ability split per region and the line has enough regions (stats.breadth).

    Breadth is measured on the splits' p_correct where every region of the line has it there (`p_docs`: the
    splits' per-document p_correct, original and ablated): a continuous metric registers damage that flips no
    answer, so it measures breadth with less item noise than accuracy; else on each split's primary metric
    (`docs`). The line is corrected for the noise its regions do not share (line_noise)."""
    if not any(b in profile.abilities for b in ability_benchmarks(profile.benchmarks, profile.abilities)):
        return
    noise: dict[str, NoiseCache] = {"p_correct": {}, "primary": {}}  # one per metric's documents
    on_p = {key: row for key, row in top_random_rows(profile, P_CORRECT).items() if row.family == P_CLAIM}
    for claims in (top_random_rows(profile), on_p):  # the claims on each benchmark's primary metric, on p_correct
        _apply_lines(profile, claims, docs, p_docs, noise)


def _apply_lines(
    profile: Profile, claims: RowsByRegion, docs: Docs | None, p_docs: Docs | None, noise: dict[str, NoiseCache]
) -> None:
    """apply_breadth on one metric's top − random rows (`claims`): one line per benchmark and k; the regions'
    breadths are the same whichever metric the benchmark's side is read on."""
    cells: dict[tuple[float, str], list[tuple[str, str]]] = {}
    for ability, k, benchmark, top in claims:
        if benchmark not in profile.at_chance:
            cells.setdefault((k, benchmark), []).append((ability, top))
    for (k, benchmark), line in cells.items():
        chosen = [claims[(a, k, benchmark, t)] for a, t in line]
        x, x_var = line_breadths(profile, line, k, benchmark, p_docs or ({}, {}), P_CORRECT, noise["p_correct"])
        if any(math.isnan(value) for value in x) or x_var is None:
            x, x_var = line_breadths(profile, line, k, benchmark, docs or ({}, {}), None, noise["primary"])
        groups = [a for a, _ in line]  # each line without the region's ability
        found = breadth_residuals([r.ais for r in chosen], x, groups, x_var)
        by_selection: dict[int, list[tuple[AisRow, float]]] = {}
        for row, value, result, (_, top) in zip(chosen, x, found, line, strict=True):
            row.breadth = value
            if result is None:
                continue
            row.breadth_residual = result.residual
            chosen_as = selection_of(top)
            by_selection.setdefault(chosen_as[1] if chosen_as else 1, []).append((row, result.p_value))
        for tested in by_selection.values():  # Holm over the benchmark's abilities, one selection at a time
            for (row, _), adjusted in zip(tested, holm([p for _, p in tested]), strict=True):
                row.breadth_p = float(adjusted)
