"""The paper's findings as outputs: how many abilities each benchmark draws on (breadth), which benchmarks rely on
the same mixture of abilities (similarity), and which of these findings hold in every model (comparison).

Part of the aggregate stage and, like it, opens no evaluation itself: `profile_scores.load_scores` hands over each
benchmark's per-item scores (`JointCell`) and the profile with its q-values. The statistics are stats/profiles.py's
(`breadth_bootstrap`, `positive_mass_entropy`, `profile_similarity`), the tables report.py's and compare_report.py's,
the figures plots.py's; docs/analyses.md defines every number.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from benchprof.core.layout import CompareLayout, Layout, format_k
from benchprof.profile.compare_report import write_comparison_tables
from benchprof.profile.plots import plot_comparison, plot_similarity
from benchprof.profile.report import write_analysis_tables
from benchprof.profile.rows import (
    MEAN,
    SAME_MIXTURE,
    SPECIFICITY,
    Breadth,
    Comparison,
    Consensus,
    Difference,
    Profile,
    Similarity,
    ability_benchmarks,
    cell_key,
)
from benchprof.stats.impact import specificity_score
from benchprof.stats.multitest import bh_qvalues
from benchprof.stats.profiles import breadth_bootstrap, count_above, positive_mass_entropy, profile_similarity
from benchprof.stats.resampling import basic_ci, cell_rng, difference_test, material_drop, percentile_ci

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

BREADTH = "breadth"  # the ability name in cell_rng of the joint resamples: one generator per (benchmark, k)
SEED_OFFSET = 5  # aggregate.seed + this seeds the joint resamples (the per-cell intervals use seed .. seed + 3)


@dataclass
class JointCell:
    """One benchmark at one k as the joint resample needs it: per-item scores of the original (n,) and of the
    model without each ability's top region (A, n; rows in the profile's ability order, NaN for an ability without
    per-item scores), on the n items every one of those files holds, in a canonical order (sorted keys), so two
    models that scored the same items draw the same resamples. clusters and strata: one id per item or None."""

    benchmark: str
    k: float
    original: NDArray[np.float64]
    ablated: NDArray[np.float64]
    clusters: list[str] | None
    strata: list[str] | None
    sign: float  # -1 for a lower-is-better metric, so AIS > 0 means harm
    items: int  # a digest of the item keys: equal digests, paired resamples across models


# (benchmark, k) -> (AIS (A, B), a digest of the items and the generator's key: equal digests, paired resamples)
JointDraws = dict[tuple[str, str], tuple["NDArray[np.float64]", int]]


def _key(benchmark: str, k: float) -> tuple[str, str]:
    return benchmark, format_k(k)


def joint_draws(cells: Sequence[JointCell], resamples: int, seed: int, key_k: float | None = None) -> JointDraws:
    """stats.profiles.breadth_bootstrap of every cell, each with its own generator
    cell_rng(seed + SEED_OFFSET, cell_key("breadth", k, benchmark)): independent across benchmarks, and the same
    draws in every model for the same items. `key_k` draws every cell with the generator of that k instead of its
    own (models compared each at its own k, paired on the same items); the digest holds the generator's k, so only
    draws made alike read as paired."""
    out: JointDraws = {}
    if resamples <= 0:
        return out
    for cell in cells:
        drawn_at = cell.k if key_k is None else key_k
        rng = cell_rng(seed + SEED_OFFSET, cell_key(BREADTH, drawn_at, cell.benchmark))
        ais, _, _ = breadth_bootstrap(
            cell.original, cell.ablated, resamples, rng, cell.clusters, cell.strata, sign=cell.sign
        )
        out[_key(cell.benchmark, cell.k)] = (ais, hash((cell.items, format_k(drawn_at))))
    return out


def _point(profile: Profile, benchmark: str, k: float) -> NDArray[np.float64]:
    """The top-region AIS over the profile's abilities on the headline metric (NaN where there is none)."""
    import numpy as np

    rows = [profile.row(a, benchmark, k, "top") for a in profile.abilities]
    return np.array([row.ais if row is not None else np.nan for row in rows])


def breadth(profile: Profile, draws: JointDraws) -> list[Breadth]:
    """benchmarks.csv: per benchmark and k, the significantly positive and negative abilities (top region, q <
    alpha) and the spread of the positive AIS mass (stats.profiles.positive_mass_entropy) with 95% percentile
    intervals over the joint resamples, and the number of abilities whose AIS exceeds aggregate.threshold (the paper's
    ribbons) with its interval over the same resamples. A benchmark at chance gets a line saying so and nothing else."""
    import numpy as np

    out = []
    for k in profile.k_values:
        for benchmark in profile.benchmarks:
            if benchmark not in profile.original_scores:
                continue
            if benchmark in profile.at_chance:
                out.append(Breadth(profile.model, benchmark, k, headline=False))
                continue
            rows = {a: profile.row(a, benchmark, k, "top") for a in profile.abilities}
            found = {a: r for a, r in rows.items() if r is not None and not math.isnan(r.ais)}
            positive = [a for a, r in found.items() if r.significant and r.ais > 0]
            negative = [a for a, r in found.items() if r.significant and r.ais < 0]
            line = Breadth(
                profile.model,
                benchmark,
                k,
                headline=True,
                abilities=len(found),
                n_positive=len(positive),
                positive=positive,
                n_negative=len(negative),
                negative=negative,
            )
            point = _point(profile, benchmark, k)
            entropy, effective = positive_mass_entropy(point)
            line.normalised_entropy, line.effective_abilities = float(entropy), float(effective)
            line.n_above = int(np.nan_to_num(count_above(point, profile.threshold)))
            if _key(benchmark, k) in draws:
                ais, _ = draws[_key(benchmark, k)]
                shown = np.isfinite(point)
                if shown.any() and not np.all(np.isnan(ais[shown]), axis=1).any():  # every ability resampled
                    entropy_draws, effective_draws = positive_mass_entropy(ais[shown].T)
                    line.entropy_ci_low, line.entropy_ci_high = percentile_ci(entropy_draws)
                    line.effective_ci_low, line.effective_ci_high = percentile_ci(effective_draws)
                    low, high = percentile_ci(count_above(ais[shown].T, profile.threshold))
                    if not math.isnan(low):  # a count: the interpolated percentiles widened to whole abilities
                        line.above_ci_low, line.above_ci_high = float(math.floor(low)), float(math.ceil(high))
                    line.dropped = int(np.isnan(effective_draws).sum())
                    line.n_docs = max((r.n_docs for r in found.values()), default=0)
                else:
                    profile.notes.append(
                        f"breadth of {benchmark} at k={format_k(k)}: no interval (an ability's top region has no "
                        "per-item scores)"
                    )
            out.append(line)
    return out


NO_PROFILE = "no profile"  # the verdict where a benchmark has no significantly positive ability: its AIS is noise


def _has_profile(profile: Profile, benchmark: str, k: float) -> bool:
    """Whether the benchmark has at least one significantly positive ability at k (its breadth line)."""
    return any(b.benchmark == benchmark and math.isclose(b.k, k) and b.n_positive > 0 for b in profile.breadth)


def verdict(low: float, high: float, threshold: float = SAME_MIXTURE) -> str:
    """ "same mixture" when the cosine's interval [low, high] lies above `threshold`, "differ" when below it,
    "undecided" when it holds the threshold, "" without an interval."""
    if math.isnan(low) or math.isnan(high):
        return ""
    if low > threshold:
        return "same mixture"
    if high < threshold:
        return "differ"
    return "undecided"


def _similarity(
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    x_draws: NDArray[np.float64] | None,
    y_draws: NDArray[np.float64] | None,
    line: Similarity,
) -> Similarity:
    """Point estimates of stats.profiles.profile_similarity over the abilities x and y both have, and basic
    bootstrap intervals (stats.resampling.basic_ci) pairing resample r of x with resample r of y (none where
    either lacks an ability's resamples)."""
    import numpy as np

    both = np.isfinite(x) & np.isfinite(y)
    line.abilities = int(both.sum())
    cosine, rho = profile_similarity(x[both], y[both])
    line.cosine, line.spearman = float(cosine), float(rho)
    if x_draws is not None and y_draws is not None:
        xs, ys = x_draws[both], y_draws[both]
        if both.any() and not (np.all(np.isnan(xs), axis=1).any() or np.all(np.isnan(ys), axis=1).any()):
            cosine_draws, rho_draws = profile_similarity(xs.T, ys.T)
            # basic intervals: noise biases a cosine down, so percentile ones never covered a true cosine of 1
            line.cosine_ci_low, line.cosine_ci_high = basic_ci(line.cosine, cosine_draws, bounds=(-1.0, 1.0))
            line.spearman_ci_low, line.spearman_ci_high = basic_ci(line.spearman, rho_draws, bounds=(-1.0, 1.0))
    line.verdict = verdict(line.cosine_ci_low, line.cosine_ci_high)
    return line


def similarity(profile: Profile, draws: JointDraws) -> list[Similarity]:
    """similarity.csv: every pair of headline benchmarks at every k, the cosine and Spearman correlation of their
    top-region AIS vectors over the abilities, with intervals from their (independent) joint resamples. A pair where
    either benchmark has no significantly positive ability gets the verdict "no profile" (after `breadth`): the
    similarity of noise to anything is low, and "differ" would report the noise."""
    out = []
    benchmarks = [b for b in profile.headline_benchmarks if b in profile.original_scores]
    for k in profile.k_values:
        for a, b in itertools.combinations(benchmarks, 2):
            line = Similarity(profile.model, k, a, b, 0, math.nan)
            draws_a, draws_b = draws.get(_key(a, k)), draws.get(_key(b, k))
            out.append(
                _similarity(
                    _point(profile, a, k),
                    _point(profile, b, k),
                    None if draws_a is None else draws_a[0],
                    None if draws_b is None else draws_b[0],
                    line,
                )
            )
            if not (_has_profile(profile, a, k) and _has_profile(profile, b, k)):
                line.verdict = NO_PROFILE
    return out


def profile_analyses(profile: Profile, cells: Sequence[JointCell], resamples: int, seed: int) -> JointDraws:
    """Fill profile.breadth and profile.similarity (after its q-values: breadth counts the stars); returns the
    joint resamples per (benchmark, k) for the comparison across models."""
    draws = joint_draws(cells, resamples, seed)
    profile.breadth = breadth(profile, draws)
    profile.similarity = similarity(profile, draws)
    return draws


def write_analyses(profile: Profile, layout: Layout, plots: bool = True) -> list[Path]:
    """benchmarks.csv, similarity.csv and (with `plots`) similarity.png into the model's profile folder."""
    written = write_analysis_tables(profile, layout)
    if plots:
        written.append(plot_similarity(profile, layout.similarity_png))
    return written


def _consensus(kind: str, benchmark: str, k: float, per_model: dict[str, list[str]]) -> Consensus:
    lists = list(per_model.values())
    common = [x for x in lists[0] if all(x in other for other in lists[1:])] if lists else []
    return Consensus(kind, benchmark, k, per_model, common)


def _k_steps(profiles: Sequence[Profile], own_k: bool) -> list[tuple[float, ...]]:
    """The k of each profile at each step of a comparison: every k all the profiles have, the same in each, or
    (own_k) a single step with each model at its own report k."""
    if own_k:
        return [tuple(p.report_k for p in profiles)]
    shared = [k for k in profiles[0].k_values if all(any(math.isclose(k, k_) for k_ in p.k_values) for p in profiles)]
    return [(k,) * len(profiles) for k in shared]


def compare_models(profiles: Sequence[Profile], draws: Sequence[JointDraws], own_k: bool = False) -> Comparison:
    """Several models' profiles side by side: per benchmark above chance in every model, k and pair of models the
    similarity of the benchmark's profiles (stats.profiles.profile_similarity; resample r of both models drawn by the
    same generator, so on the same items when both scored the same ones: `paired`), the test of each ability's AIS
    difference between the two models (`differences`), and the findings that hold in every model: each benchmark's
    significantly positive and negative abilities, and the benchmark pairs judged the same mixture or different.
    At every k the models share, or (own_k) each model at its own report k: a size rule such as "0.5% of the MLP
    neurons" is a different k in each model. A line's k is its first model's, k_b its second's. A line is `paired`
    where both models' resamples are the same items drawn by one generator (for models at different k, `draws`
    made with joint_draws' key_k); else its test is that of two independent estimates."""
    at_chance = sorted({b for p in profiles for b in p.at_chance})
    benchmarks = [
        b for b in profiles[0].benchmarks if b not in at_chance and all(b in p.original_scores for p in profiles)
    ]
    comparison = Comparison(list(profiles), benchmarks, at_chance, profiles[0].report_k, own_k=own_k)
    steps = _k_steps(profiles, own_k)
    pairs = list(itertools.combinations(range(len(profiles)), 2))
    for step in steps:
        for benchmark in benchmarks:
            for i, j in pairs:
                first, second, k_a, k_b = profiles[i], profiles[j], step[i], step[j]
                a, b = draws[i].get(_key(benchmark, k_a)), draws[j].get(_key(benchmark, k_b))
                line = Similarity(first.model, k_a, benchmark, benchmark, 0, math.nan, model_b=second.model, k_b=k_b)
                comparison.correlations.append(
                    _similarity(
                        _aligned(profiles[0], first, benchmark, k_a),
                        _aligned(profiles[0], second, benchmark, k_b),
                        None if a is None else _aligned_draws(profiles[0], first, a[0]),
                        None if b is None else _aligned_draws(profiles[0], second, b[0]),
                        line,
                    )
                )
                line.paired = _paired(a, b)
                if not (_has_profile(first, benchmark, k_a) and _has_profile(second, benchmark, k_b)):
                    line.verdict = NO_PROFILE
                comparison.differences += _differences(profiles[0], first, second, benchmark, (k_a, k_b), a, b)
            for kind in ("breadth", "negative"):
                per_model = {}
                for p, k in zip(profiles, step, strict=True):
                    found = [r for r in p.breadth if r.benchmark == benchmark and math.isclose(r.k, k)]
                    names = (found[0].positive if kind == "breadth" else found[0].negative) if found else []
                    per_model[p.model] = names
                comparison.consensus.append(_consensus(kind, benchmark, step[0], per_model))
        for kind in ("same mixture", "differ"):
            per_model = {
                p.model: [
                    f"{s.benchmark_a} ~ {s.benchmark_b}"
                    for s in p.similarity
                    if math.isclose(s.k, k) and s.verdict == kind and {s.benchmark_a, s.benchmark_b} <= set(benchmarks)
                ]
                for p, k in zip(profiles, step, strict=True)
            }
            comparison.consensus.append(_consensus(kind, "", step[0], per_model))
    for step in steps:
        for i, j in pairs:
            change = _specificity_difference(
                profiles[0], profiles[i], profiles[j], benchmarks, (step[i], step[j]), draws[i], draws[j]
            )
            if change is not None:
                comparison.differences.append(change)
    tested = [d for d in comparison.differences if not math.isnan(d.p_value)]
    alpha = profiles[0].alpha
    for d, q in zip(tested, bh_qvalues([d.p_value for d in tested]), strict=True):
        d.q_value = float(q)
        d.significant = bool(q < alpha) and not material_drop(d.dropped, profiles[0].bootstrap)
    return comparison


def _paired(a: tuple[NDArray[np.float64], int] | None, b: tuple[NDArray[np.float64], int] | None) -> bool:
    """Whether two models' joint resamples of a benchmark are the same items: both scored the same items and were
    drawn by the same generator (joint_draws' digest holds both)."""
    return a is not None and b is not None and a[1] == b[1]


def _differences(
    reference: Profile,
    first: Profile,
    second: Profile,
    benchmark: str,
    ks: tuple[float, float],
    draws_a: tuple[NDArray[np.float64], int] | None,
    draws_b: tuple[NDArray[np.float64], int] | None,
) -> list[Difference]:
    """Per ability of `reference`, the top-region AIS on `benchmark` in two models (at ks, one k each) and the test
    of their difference (stats.resampling.difference_test) on their joint resamples: resample r of both drawn by one
    generator, so on the same items where both scored the same ones (`paired`). Where they scored different items
    the draws pair items by position only, which shares no noise, so the standard error of the difference is that
    of two independent estimates."""
    import numpy as np

    k, k_b = ks
    x, y = _aligned(reference, first, benchmark, k), _aligned(reference, second, benchmark, k_b)
    xs = None if draws_a is None else _aligned_draws(reference, first, draws_a[0])
    ys = None if draws_b is None else _aligned_draws(reference, second, draws_b[0])
    paired = _paired(draws_a, draws_b)
    out = []
    for i, ability in enumerate(reference.abilities):
        if not (np.isfinite(x[i]) and np.isfinite(y[i])):
            continue
        line = Difference(
            benchmark, k, ability, first.model, second.model, float(x[i]), float(y[i]), float(x[i] - y[i]), k_b=k_b
        )
        if xs is not None and ys is not None:
            line.difference, line.ci_low, line.ci_high, line.p_value = difference_test(
                float(x[i]), float(y[i]), xs[i], ys[i]
            )
            line.dropped = int((~(np.isfinite(xs[i]) & np.isfinite(ys[i]))).sum())
            line.paired = paired
        out.append(line)
    return out


def _mean_specificity(
    reference: Profile, profile: Profile, splits: list[str], k: float, draws: JointDraws
) -> tuple[float, NDArray[np.float64] | None]:
    """The mean over the profiled abilities with an own split of spec_a = AIS_a(own split) − mean AIS_a(the other
    ability splits in `splits`) (stats.impact.specificity_score, as cells.specificity_rows), from the top-region
    AIS of `profile` at k, and its resamples from the joint resamples of the splits (independent across splits, so
    combined resample by resample); None without them."""
    import numpy as np

    matrix = np.array([_aligned(reference, profile, b, k) for b in splits])  # (split, ability of reference)
    own = [(s, reference.abilities.index(b)) for s, b in enumerate(splits) if b in reference.abilities]
    point = float(np.mean([specificity_score(matrix[s, a], list(np.delete(matrix[:, a], s))) for s, a in own]))
    found = [draws.get(_key(b, k)) for b in splits]
    if any(f is None for f in found):
        return point, None
    resampled = np.array([_aligned_draws(reference, profile, f[0]) for f in found if f is not None])  # (split, A, R)
    values = [specificity_score(resampled[s, a], list(np.delete(resampled[:, a], s, axis=0))) for s, a in own]
    return point, np.mean(values, axis=0)


def _specificity_difference(
    reference: Profile,
    first: Profile,
    second: Profile,
    benchmarks: list[str],
    ks: tuple[float, float],
    draws_a: JointDraws,
    draws_b: JointDraws,
) -> Difference | None:
    """The mean specificity of the top regions in two models, over the ability splits above chance in every model
    (each model's own mean specificity where no split is at chance), and the test of its difference
    (stats.resampling.difference_test): a line of differences.csv with benchmark "specificity" and ability "mean".
    None with fewer than two such splits, no profiled ability among them, or an AIS lacking."""
    import numpy as np

    splits = ability_benchmarks(benchmarks, reference.abilities)
    if len(splits) < 2 or not any(b in reference.abilities for b in splits):
        return None
    k, k_b = ks
    a, a_draws = _mean_specificity(reference, first, splits, k, draws_a)
    b, b_draws = _mean_specificity(reference, second, splits, k_b, draws_b)
    if not (np.isfinite(a) and np.isfinite(b)):
        return None
    line = Difference(SPECIFICITY, k, MEAN, first.model, second.model, a, b, a - b, k_b=k_b)
    if a_draws is not None and b_draws is not None:
        line.difference, line.ci_low, line.ci_high, line.p_value = difference_test(a, b, a_draws, b_draws)
        line.dropped = int((~(np.isfinite(a_draws) & np.isfinite(b_draws))).sum())
        line.paired = all(_paired(draws_a[_key(s, k)], draws_b[_key(s, k_b)]) for s in splits)
    return line


def _aligned(reference: Profile, profile: Profile, benchmark: str, k: float) -> NDArray[np.float64]:
    """`profile`'s top-region AIS on `benchmark` in the ability order of `reference` (NaN where absent)."""
    import numpy as np

    return np.array(
        [row.ais if (row := profile.row(a, benchmark, k, "top")) is not None else np.nan for a in reference.abilities]
    )


def _aligned_draws(reference: Profile, profile: Profile, ais: NDArray[np.float64]) -> NDArray[np.float64]:
    """Joint resamples (A, B) of `profile` in the ability order of `reference` (NaN rows where absent)."""
    import numpy as np

    out = np.full((len(reference.abilities), ais.shape[1]), np.nan)
    for i, ability in enumerate(reference.abilities):
        if ability in profile.abilities:
            out[i] = ais[profile.abilities.index(ability)]
    return out


def write_comparison(comparison: Comparison, layout: CompareLayout, plots: bool = True) -> list[Path]:
    """outputs/compare/ (or the folder of `layout`): profiles.csv, differences.csv, correlation.csv, compare.md
    and (with `plots`) profiles.png."""
    layout.compare_dir.mkdir(parents=True, exist_ok=True)
    written = write_comparison_tables(comparison, layout)
    if plots:
        written.append(plot_comparison(comparison, layout.profiles_png))
    return written
