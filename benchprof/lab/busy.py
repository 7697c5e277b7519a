"""How busy evaluate's workers were, from the result files alone (issue 65: with jobs split by count, one of two CPU
workers finished 10 minutes before the other and left its core idle).

Every result JSON records its job's `wall_seconds`, and its file's modification time says when it was written (to
the nanosecond; `written_at` in the file is rounded to the second, too coarse for jobs of a second), so each job is
the interval [written − wall, written]. Workers run one job at a time, so the intervals split into as many chains
as there were workers; the chains are rebuilt greedily (each job, in order of start, to the free worker that
finished last, so that a worker that stopped early shows idle to the end). A folder copied without its files' times
(cp without -a) cannot be measured. A worker's busy share is the time its jobs took over the evaluation's span,
from the first job's start to the last one's end; the time between jobs (the model's load, a variant's mask)
counts as idle.

.venv/bin/python scripts/worker_busy.py outputs/<model> --workers 2
"""

from __future__ import annotations

import json
from pathlib import Path

from benchprof import BenchprofError

SLACK = 0.05  # seconds: the job's wall time is taken inside its process, the file written just after


def job_intervals(model_dir: Path, since: float = -float("inf")) -> list[tuple[float, float]]:
    """(start, end) in seconds since the epoch of every evaluation job whose result JSON is under model_dir: its file's
    modification time, less its wall_seconds; only the jobs that started at `since` or later (one `run` of an
    evaluation that was killed and resumed: the time between two runs is no worker's)."""
    out = []
    for path in sorted(model_dir.glob("**/eval/**/*.json")):
        try:
            wall = float(json.loads(path.read_text())["wall_seconds"])
            end = path.stat().st_mtime
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not a result of evaluate's (an older one without its wall time)
        if end - wall >= since:
            out.append((end - wall, end))
    return sorted(out)


def worker_busy(intervals: list[tuple[float, float]], workers: int) -> tuple[list[float], float]:
    """(each worker's busy seconds, the span) of jobs split into `workers` chains; refused when the jobs overlap
    more than that many workers could run."""
    if not intervals:
        raise BenchprofError("no evaluation result (a result JSON with wall_seconds) to measure")
    free = [-float("inf")] * workers  # when each worker finished its last job
    busy = [0.0] * workers
    for start, end in intervals:
        ready = [w for w in range(workers) if free[w] <= start + SLACK]
        if not ready:
            raise BenchprofError(f"more than {workers} jobs ran at once: were there more workers?")
        w = max(ready, key=lambda i: free[i])  # the worker that finished last: a worker that stopped stays idle
        free[w], busy[w] = end, busy[w] + (end - start)
    return busy, max(end for _, end in intervals) - intervals[0][0]


def main(model_dir: str, workers: int = 2, since: str = "") -> None:
    """Print each evaluate worker's busy share of the evaluation's span, from the result files under a model's
    outputs folder (outputs/<model>).

    Arguments:
        model_dir: the model's outputs folder.
        workers: how many workers evaluated side by side (evals.cpu_workers, or the GPUs).
        since: only the jobs that started at this time or later, "YYYY-MM-DD HH:MM[:SS]" in the machine's time
            (the start of one run of an evaluation that was killed and resumed).
    """
    from datetime import datetime

    if not any(Path(model_dir).glob("**/eval/**/*.json")):
        raise BenchprofError(f"{model_dir}: no evaluation results under it (outputs/<model>)")
    try:
        start = datetime.fromisoformat(str(since)).timestamp() if since else -float("inf")
    except ValueError:
        raise BenchprofError(f"--since: {since!r} is not a time (YYYY-MM-DD HH:MM[:SS])") from None
    intervals = job_intervals(Path(model_dir), start)
    if not intervals:
        raise BenchprofError(f"{model_dir}: no evaluation job started at {since} or later")
    busy, span = worker_busy(intervals, int(workers))
    shares = ", ".join(f"worker {i + 1} {b / max(span, 1e-9):.1%} ({b:,.0f} s)" for i, b in enumerate(busy))
    print(f"{model_dir}: {len(intervals)} jobs over {span:,.0f} s; busy: {shares}")
