"""A profile's specificity rows: each region's AIS on its ability's own split minus its mean AIS on the other
ability splits (`specificity_rows`), the top-random specificity against what the random draws at k show on the
same splits (`specificity_against_pool`, the claim), and their mean over the abilities (`mean_specificity_rows`).
Numbers only, from rows and bootstrap draws cells.py computed; every formula is in stats/.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from benchprof.core.layout import format_k
from benchprof.core.region_names import random_draw
from benchprof.core.results import PerDoc
from benchprof.profile.cells import CellKey, finite_variance, set_interval
from benchprof.profile.rows import (
    ADJUSTED,
    MEAN,
    SPECIFICITY,
    SPECIFICITY_METRIC,
    AisRow,
    Profile,
    ability_benchmarks,
    cell_key,
)
from benchprof.stats.control import MIN_DRAWS, top_against_random
from benchprof.stats.impact import specificity_score
from benchprof.stats.resampling import cell_rng, mean_specificity_bootstrap

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray


def specificity_rows(profile: Profile, samples: dict[CellKey, NDArray[np.float64]]) -> list[AisRow]:
    """ais.csv rows (benchmark "specificity") per (ability, k, region): AIS on the ability's own split
    minus the mean AIS on every other ability split in evals.benchmarks (a fixed set: when one of them
    has no AIS, the row has no value and a note says which); `samples[(ability, k, benchmark, region)]`
    holds the cell's bootstrap AIS samples (same resample count everywhere), when there were per-sample files."""
    own_splits = ability_benchmarks(profile.benchmarks, profile.abilities)
    rows = []
    for ability in profile.abilities:
        if ability not in own_splits:
            continue
        for k in profile.k_values:
            for region in profile.regions_with_adjusted:
                own = profile.row(ability, ability, k, region)
                cells = {b: profile.row(ability, b, k, region) for b in own_splits if b != ability}
                lacking = [b for b, r in cells.items() if r is None or math.isnan(r.ais)]
                if own is None or math.isnan(own.ais) or not cells:
                    continue
                if lacking:
                    profile.notes.append(
                        f"specificity of {ability} at k={format_k(k)} ({region}): no value, "
                        f"no AIS on {', '.join(lacking)}"
                    )
                    continue
                others = [r for r in cells.values() if r is not None]
                row = AisRow(
                    profile.model,
                    ability,
                    SPECIFICITY,
                    k,
                    region,
                    SPECIFICITY_METRIC,
                    math.nan,
                    None,
                    float(specificity_score(own.ais, [r.ais for r in others])),
                    n_docs=own.n_docs + sum(r.n_docs for r in others),
                )
                if region == ADJUSTED:  # the claim: against what random regions show on the same splits
                    specificity_against_pool(profile, row, ability, k, own_splits, samples)
                else:  # the top region's own specificity, against 0 (descriptive: item noise only)
                    spec = specificity_draws(samples, ability, k, ability, [r.benchmark for r in others], region)
                    if spec is not None:
                        set_interval(row, spec, test=True)
                rows.append(row)
    return rows


def specificity_draws(
    samples: dict[CellKey, NDArray[np.float64]], region_of: str, k: float, split: str, others: list[str], region: str
) -> NDArray[np.float64] | None:
    """Bootstrap draws of one region's specificity for `split` (its AIS there minus the mean on `others`), from
    each split's own resamples: the splits hold different documents, so they combine index by index."""
    draws = [samples.get((region_of, k, b, region)) for b in [split, *others]]
    present = [d for d in draws if d is not None]
    if len(present) != len(draws) or len({len(d) for d in present}) != 1:
        return None
    return specificity_score(present[0], present[1:])


def specificity_against_pool(
    profile: Profile,
    row: AisRow,
    ability: str,
    k: float,
    splits: list[str],
    samples: dict[CellKey, NDArray[np.float64]],
) -> None:
    """A top-random specificity row's estimate, interval and test: ability's top-region specificity against the
    specificity every random draw at k shows for the same split (its AIS on `ability`'s split minus its mean on
    the others), by stats.control.top_against_random with each run's bootstrap variance as item noise. A region
    that hurts every split alike, or whose damage merely varies by split as random regions' does, is one more
    draw of that distribution: not a discovery. With fewer than MIN_DRAWS draws: no interval, no test."""
    others = [b for b in splits if b != ability]

    def specificity_of(region_of: str, region: str) -> tuple[float, float] | None:
        cells = [profile.row(region_of, b, k, region) for b in [ability, *others]]
        if any(c is None or math.isnan(c.ais) for c in cells):
            return None
        values = [c.ais for c in cells if c is not None]
        spec = specificity_draws(samples, region_of, k, ability, others, region)
        return float(specificity_score(values[0], values[1:])), finite_variance(spec) if spec is not None else math.nan

    top = specificity_of(ability, "top")
    pool = [s for c in profile.abilities for r in profile.regions if random_draw(r) if (s := specificity_of(c, r))]
    row.ci_low = row.ci_high = row.p_value = math.nan
    if top is None:
        return
    noise = [v for _, v in pool]
    known = not math.isnan(top[1]) and not any(math.isnan(v) for v in noise)
    comparison = top_against_random(
        top[0], [s for s, _ in pool], top_var=top[1] if known else None, random_vars=noise if known else None
    )
    if comparison is None:
        profile.notes.append(
            f"top-random specificity rows at k={format_k(k)}: {len(pool)} random draw(s) cannot say how much "
            f"random regions' specificity varies (needs {MIN_DRAWS}); no interval and no test in any of them"
        )
        return
    row.ais, row.ci_low, row.ci_high, row.p_value = (
        comparison.estimate,
        comparison.ci_low,
        comparison.ci_high,
        comparison.p_value,
    )


def mean_specificity_rows(
    profile: Profile,
    original_docs: dict[str, PerDoc],
    ablated_docs: dict[tuple[str, str, float, str], PerDoc],
    resamples: int,
    seed: int,
) -> list[AisRow]:
    """Rows of ability MEAN: the mean of the abilities' specificity per (k, region), over the abilities
    with a specificity row whose every cell (ability, each ability split) was evaluated; the interval
    from stats.resampling.mean_specificity_bootstrap over the documents every per-sample file of a split holds.

    `original_docs[split]` holds the original per-document values of an ability split,
    `ablated_docs[(split, ability, k, region)]` the ablated ones.
    """
    import numpy as np

    splits = ability_benchmarks(profile.benchmarks, profile.abilities)
    rows = []
    for k in profile.k_values:
        for region in profile.regions_with_adjusted:
            members = [
                a
                for a in profile.abilities
                if profile.row(a, SPECIFICITY, k, region) is not None
                and all((r := profile.row(a, b, k, region)) is not None and not math.isnan(r.ais) for b in splits)
            ]
            if len(members) < 2:
                continue
            spec = [r.ais for a in members if (r := profile.row(a, SPECIFICITY, k, region)) is not None]
            row = AisRow(
                profile.model, MEAN, SPECIFICITY, k, region, SPECIFICITY_METRIC, math.nan, None, float(np.mean(spec))
            )
            parts = ("top", POOL) if region == ADJUSTED else (region,)
            if resamples > 0:
                docs = _with_pool(ablated_docs, splits, k, members) if region == ADJUSTED else ablated_docs
                draws = _mean_specificity_draws(members, splits, k, parts, original_docs, docs, resamples, seed)
                if draws is not None:
                    set_interval(row, draws, test=True)
            rows.append(row)
    return rows


POOL = "random pool"  # the per-document mean over the random draws at k, in _with_pool


def _with_pool(
    ablated_docs: dict[tuple[str, str, float, str], PerDoc], splits: list[str], k: float, members: list[str]
) -> dict[tuple[str, str, float, str], PerDoc]:
    """`ablated_docs` plus, per split, the per-document mean over every random draw at k (all abilities'),
    under (split, member, k, POOL) for each member: the pooled control of the top-random rows. AIS is
    linear in the ablated mean, so the mean AIS over the draws is the AIS of this per-document mean; the
    mean specificity's interval resamples the items, not the draws."""
    out = dict(ablated_docs)
    for split in splits:
        draws = [
            v for (s, _, k_, r), v in ablated_docs.items() if s == split and math.isclose(k_, k) and random_draw(r)
        ]
        if not draws:
            continue
        shared = set.intersection(*(set(v) for v in draws))
        pooled = {d: sum(v[d] for v in draws) / len(draws) for d in shared}
        out.update({(split, a, k, POOL): pooled for a in members})
    return out


def _mean_specificity_draws(
    members: list[str],
    splits: list[str],
    k: float,
    parts: tuple[str, ...],
    original_docs: dict[str, PerDoc],
    ablated_docs: dict[tuple[str, str, float, str], PerDoc],
    resamples: int,
    seed: int,
) -> NDArray[np.float64] | None:
    """The documents of each split as arrays for stats.resampling.mean_specificity_bootstrap, and its samples; None
    when a per-sample file is missing or a split has no document every file holds."""
    import numpy as np

    original, ablated = [], []
    for split in splits:
        keys = [(split, a, k, part) for a in members for part in parts]
        if split not in original_docs or any(key not in ablated_docs for key in keys):
            return None
        shared = set(original_docs[split])
        for key in keys:
            shared &= set(ablated_docs[key])
        docs = [d for d in original_docs[split] if d in shared]
        if not docs:
            return None
        original.append(np.array([original_docs[split][d] for d in docs]))
        ablated.append(
            np.array([[[ablated_docs[(split, a, k, part)][d] for d in docs] for part in parts] for a in members])
        )
    own = [splits.index(a) for a in members]
    rngs = [
        cell_rng(seed, cell_key(MEAN, k, split)) for split in splits
    ]  # independent of the per-ability cells' resamples
    return mean_specificity_bootstrap(original, ablated, own, resamples, rngs)
