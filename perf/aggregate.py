"""The statistics of `aggregate` (benchprof.ais) on a synthetic profile, against the straightforward per-cell loop.

A profile of C cells (default 2,000), each an original and two ablated runs (top, random) over n items
(default 1,000) of 0/1 scores, with B bootstrap resamples (default 1,000). Per cell, what aggregate
computes for the region rows: the paired bootstrap AIS of both regions, their 95% percentile intervals,
exact McNemar tests; then Benjamini-Hochberg over every row.

  (a) benchprof: `ais.bootstrap_ais` per cell (resamples drawn as one index array per chunk, the
      runs gathered and averaged in numpy, chunks bounded to 2M indices), `ais.mcnemar_p`, `ais.bh_qvalues`.
  (b) straightforward: per cell, a Python loop over the resamples drawing each resample's indices and
      averaging each run (the same generator calls, hence the same numbers), then the same tests.

Both run on the first `--loop_cells` cells (measured ratio; the loop checks that the intervals agree);
(a) also on all C cells. Peak memory: tracemalloc's peak of Python and numpy allocations for each part
(numpy reports its buffers to tracemalloc).

    .venv/bin/python perf/aggregate.py [--cells 2000] [--items 1000] [--resamples 1000] [--loop_cells 100]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

from benchprof.ais import bh_qvalues, bootstrap_ais, cell_rng, mcnemar_exact, percentile_ci


def synthetic_cells(cells: int, items: int, seed: int = 0) -> list[tuple[Any, Any]]:
    """Per cell (original (n,), ablated (2, n)): top flips 8% of the items to wrong, random 2% either way."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(cells):
        original = (rng.random(items) < 0.6).astype(float)
        top = np.where(rng.random(items) < 0.08, 0.0, original)
        random = np.where(rng.random(items) < 0.02, 1.0 - original, original)
        out.append((original, np.vstack([top, random])))
    return out


def vectorised(cells: list[tuple[Any, Any]], resamples: int) -> list[tuple[float, float, float]]:
    """(ci_low, ci_high, p) per region row, as aggregate computes them."""
    rows = []
    for c, (original, ablated) in enumerate(cells):
        draws = bootstrap_ais(original, ablated, resamples, cell_rng(0, "a", 0.01, f"b{c}"))
        for region, values in zip(ablated, draws):
            low, high = percentile_ci(values)
            rows.append((low, high, mcnemar_exact(original, region)[2]))
    bh_qvalues(np.array([p for _, _, p in rows]))
    return rows


def straightforward(cells: list[tuple[Any, Any]], resamples: int) -> list[tuple[float, float, float]]:
    """The same rows by a plain loop over the resamples of each cell (one generator call per resample)."""
    rows = []
    for c, (original, ablated) in enumerate(cells):
        rng = cell_rng(0, "a", 0.01, f"b{c}")
        n = original.size
        draws: list[list[float]] = [[] for _ in ablated]
        for _ in range(resamples):
            idx = rng.integers(0, n, size=n)
            s = original[idx].mean()
            for r, region in enumerate(ablated):
                draws[r].append((s - region[idx].mean()) / s if s else np.nan)
        for region, values in zip(ablated, draws):
            low, high = percentile_ci(values)
            rows.append((low, high, mcnemar_exact(original, region)[2]))
    bh_qvalues(np.array([p for _, _, p in rows]))
    return rows


def measure(run: Callable[[], Any]) -> tuple[Any, float, float]:
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
    parser.add_argument("--cells", type=int, default=2000)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--loop_cells", type=int, default=100)
    args = parser.parse_args()

    cells = synthetic_cells(args.cells, args.items)
    subset = cells[: args.loop_cells]
    vectorised(cells[:1], 10)  # imports (scipy) and first-call costs outside the timings
    fast, t_fast, m_fast = measure(lambda: vectorised(subset, args.resamples))
    slow, t_slow, m_slow = measure(lambda: straightforward(subset, args.resamples))
    assert np.allclose(np.array(fast), np.array(slow), rtol=1e-9, atol=1e-12), "the two ways disagree"
    _, t_all, m_all = measure(lambda: vectorised(cells, args.resamples))

    print(f"{args.items} items x {args.resamples} resamples per cell, 2 region rows per cell")
    print(f"{'':34}{'cells':>7}{'wall s':>10}{'peak MiB':>10}{'s / cell':>10}")
    for label, n, wall, peak in (
        ("(a) benchprof (ais.bootstrap_ais)", len(subset), t_fast, m_fast),
        ("(b) per-resample loop", len(subset), t_slow, m_slow),
        ("(a) benchprof, whole profile", len(cells), t_all, m_all),
    ):
        print(f"{label:34}{n:>7}{wall:>10.2f}{peak:>10.1f}{wall / n:>10.4f}")
    print(
        f"ratio (b)/(a) on the same {len(subset)} cells: {t_slow / t_fast:.1f}x time (measured); "
        f"(b) on all {len(cells)} cells: about {t_slow / len(subset) * len(cells):.0f} s (estimate, scaled by cells)"
    )


if __name__ == "__main__":
    main()
