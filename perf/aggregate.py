"""The statistics of `aggregate` (benchprof.stats) on a synthetic profile, against a straightforward per-resample loop.

A profile of C cells (default 2,000: 200 benchmarks x 10 abilities at one k), each an original and two ablated
runs (top, random) over n items (default 1,000) of 0/1 scores, with B bootstrap resamples (default 1,000). What
aggregate computes, per cell: the paired bootstrap AIS of both regions with their 95% percentile intervals and
exact McNemar tests, and top-random against the pool of the benchmark's ten random draws (the two-level
bootstrap over items and draws, its interval and bootstrap p); per benchmark, the null calibration of that pool
(each draw against the other nine); then Benjamini-Hochberg over every row.

  (a) benchprof: `stats.resampling.bootstrap_ais`, `two_level_bootstrap` and `null_calibration` (each
      resample's item counts drawn at once and every run averaged by one matrix product per chunk),
      `stats.paired.mcnemar_p`, `stats.multitest.bh_qvalues`.
  (b) straightforward: per benchmark, a Python loop over the resamples that draws each resample's item
      indices and averages every run on them, picks the pool's draws for the second level, then the same tests.

(a) and (b) draw different random numbers, so their intervals agree in distribution, not bit for bit: the
script checks that their median interval widths agree within 10%. Both run on the first `--loop_benchmarks`
benchmarks (measured ratio); (a) also on the whole profile. Peak memory: tracemalloc's peak of Python and numpy
allocations for each part (numpy reports its buffers to tracemalloc).

    .venv/bin/python perf/aggregate.py [--benchmarks 200] [--abilities 10] [--items 1000] [--resamples 1000]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from benchprof.profile.rows import cell_key
from benchprof.stats.multitest import bh_qvalues
from benchprof.stats.paired import mcnemar_exact
from benchprof.stats.resampling import (
    bootstrap_ais,
    bootstrap_p_value,
    cell_rng,
    null_calibration,
    percentile_ci,
    two_level_bootstrap,
)

Result = TypeVar("Result")


@dataclass
class Benchmark:
    """One benchmark at one k: the original's per-item scores (n,) and each ability's top and random (A, n)."""

    original: NDArray[np.float64]
    top: NDArray[np.float64]
    random: NDArray[np.float64]


@dataclass
class Rows:
    """What the statistics give: per region row (ci_low, ci_high, p), per top-random row the same, the null
    calibration's p-values per benchmark, and the q-values of every row."""

    regions: list[tuple[float, float, float]]
    adjusted: list[tuple[float, float, float]]
    calibration: list[NDArray[np.float64]]
    q_values: NDArray[np.float64]


def synthetic_profile(benchmarks: int, abilities: int, items: int, seed: int = 0) -> list[Benchmark]:
    """Top regions flip 8% of the items to wrong, random regions 2% either way."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(benchmarks):
        original = (rng.random(items) < 0.6).astype(float)
        top = np.where(rng.random((abilities, items)) < 0.08, 0.0, original)
        random = np.where(rng.random((abilities, items)) < 0.02, 1.0 - original, original)
        out.append(Benchmark(original, top, random))
    return out


def _finish(rows: Rows, tests: list[float]) -> Rows:
    rows.q_values = bh_qvalues(np.array(tests + [p for _, _, p in rows.adjusted]))
    return rows


def vectorised(profile: list[Benchmark], resamples: int) -> Rows:
    """The rows as aggregate computes them (benchprof.stats)."""
    rows = Rows([], [], [], np.empty(0))
    tests: list[float] = []
    for b, bench in enumerate(profile):
        for a in range(bench.top.shape[0]):
            ablated = np.vstack([bench.top[a], bench.random[a]])
            draws = bootstrap_ais(bench.original, ablated, resamples, cell_rng(0, cell_key(f"a{a}", 0.01, f"b{b}")))
            for region, values in zip(ablated, draws):
                p = mcnemar_exact(bench.original, region)[2]
                rows.regions.append((*percentile_ci(values), p))
                tests.append(p)
            rng = cell_rng(2, cell_key(f"a{a}", 0.01, f"b{b}"))
            adjusted = two_level_bootstrap(bench.original, bench.top[a], bench.random, resamples, rng)
            rows.adjusted.append((*percentile_ci(adjusted), float(bootstrap_p_value(adjusted))))
        p_values, _ = null_calibration(
            bench.original, bench.random, resamples, cell_rng(3, cell_key("null", 0.01, f"b{b}"))
        )
        rows.calibration.append(p_values)
    return _finish(rows, tests)


def straightforward(profile: list[Benchmark], resamples: int) -> Rows:
    """The same rows by a plain loop over the resamples of each benchmark."""
    rows = Rows([], [], [], np.empty(0))
    tests: list[float] = []
    for b, bench in enumerate(profile):
        rng = np.random.default_rng(b)
        n, abilities = bench.original.size, bench.top.shape[0]
        top_ais = np.empty((resamples, abilities))
        random_ais = np.empty((resamples, abilities))
        for r in range(resamples):
            idx = rng.integers(0, n, size=n)
            s = bench.original[idx].mean()
            for a in range(abilities):
                top_ais[r, a] = (s - bench.top[a][idx].mean()) / s
                random_ais[r, a] = (s - bench.random[a][idx].mean()) / s
        for a in range(abilities):
            for region, values in ((bench.top[a], top_ais[:, a]), (bench.random[a], random_ais[:, a])):
                p = mcnemar_exact(bench.original, region)[2]
                rows.regions.append((*percentile_ci(values), p))
                tests.append(p)
            adjusted = [
                top_ais[r, a] - np.mean([random_ais[r, rng.integers(0, abilities)] for _ in range(abilities)])
                for r in range(resamples)
            ]
            rows.adjusted.append((*percentile_ci(adjusted), float(bootstrap_p_value(adjusted))))
        p_values = np.empty(abilities)
        for d in range(abilities):
            others = [o for o in range(abilities) if o != d]
            null = [
                random_ais[r, d] - np.mean([random_ais[r, others[rng.integers(0, len(others))]] for _ in others])
                for r in range(resamples)
            ]
            p_values[d] = bootstrap_p_value(null)
        rows.calibration.append(p_values)
    return _finish(rows, tests)


def median_width(intervals: list[tuple[float, float, float]]) -> float:
    return float(np.median([high - low for low, high, _ in intervals]))


def measure(run: Callable[[], Result]) -> tuple[Result, float, float]:
    """(result, wall seconds, tracemalloc peak MiB)."""
    tracemalloc.start()
    started = time.perf_counter()
    result = run()
    wall = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return result, wall, peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", type=int, default=200)
    parser.add_argument("--abilities", type=int, default=10)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--loop_benchmarks", type=int, default=10)
    args = parser.parse_args()

    profile = synthetic_profile(args.benchmarks, args.abilities, args.items)
    subset = profile[: args.loop_benchmarks]
    vectorised(profile[:1], 10)  # imports (scipy) and first-call costs outside the timings
    fast, t_fast, m_fast = measure(lambda: vectorised(subset, args.resamples))
    slow, t_slow, m_slow = measure(lambda: straightforward(subset, args.resamples))
    for what in ("regions", "adjusted"):
        a, b = median_width(getattr(fast, what)), median_width(getattr(slow, what))
        assert abs(a - b) <= 0.1 * b, f"{what}: median interval width {a:.4f} against the loop's {b:.4f}"
    _, t_all, m_all = measure(lambda: vectorised(profile, args.resamples))

    cells = args.abilities
    print(
        f"{args.items} items x {args.resamples} resamples; per cell (ability x benchmark) a top, a random and a "
        f"top-random row; per benchmark the null calibration of its {cells} random draws"
    )
    print(f"{'':38}{'cells':>7}{'wall s':>10}{'peak MiB':>10}{'s / cell':>10}")
    for label, n, wall, peak in (
        ("(a) benchprof (stats)", len(subset) * cells, t_fast, m_fast),
        ("(b) per-resample loop", len(subset) * cells, t_slow, m_slow),
        ("(a) benchprof, whole profile", len(profile) * cells, t_all, m_all),
    ):
        print(f"{label:38}{n:>7}{wall:>10.2f}{peak:>10.1f}{wall / n:>10.4f}")
    print(
        f"median interval width, (a) / (b): region rows {median_width(fast.regions):.4f} / "
        f"{median_width(slow.regions):.4f}, top-random {median_width(fast.adjusted):.4f} / "
        f"{median_width(slow.adjusted):.4f}"
    )
    print(
        f"ratio (b)/(a) on the same {len(subset) * cells} cells: {t_slow / t_fast:.1f}x time (measured); "
        f"(b) on all {len(profile) * cells} cells: about {t_slow / len(subset) * len(profile):.0f} s "
        "(estimate, scaled by benchmarks)"
    )


if __name__ == "__main__":
    main()
