"""lab/busy.py: evaluate's workers rebuilt from the result files' times, their busy shares equal to the schedule
the files were written from."""

import json
import os
from datetime import datetime, timezone

import pytest

from benchprof import BenchprofError
from benchprof.lab.busy import job_intervals, worker_busy

T0 = datetime(2026, 12, 1, 12, 0, 0, tzinfo=timezone.utc).timestamp()


def write_jobs(folder, schedule):
    """One result JSON per (start, wall) of the schedule, written when the job ended (its modification time)."""
    for i, (start, wall) in enumerate(schedule):
        path = folder / "A" / "eval" / "k0.01" / f"r{i}" / "b.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"wall_seconds": wall, "results": {}}))
        os.utime(path, (T0 + start + wall, T0 + start + wall))


def test_two_workers_are_rebuilt_from_the_times_and_their_busy_shares_are_the_schedules(tmp_path):
    # issue 65's case: worker 2 stops at 40 with nothing left for it, worker 1 goes on to 100 with short gaps (two of
    # its jobs shorter than a second); a job taken by the worker free longest would put worker 2 back to work
    one = [(0, 30), (30, 0.4), (30.4, 0.5), (30.9, 29.1), (60.02, 39.98)]
    two = [(5, 35)]
    write_jobs(tmp_path, one + two)
    intervals = job_intervals(tmp_path)
    assert len(intervals) == 6
    busy, span = worker_busy(intervals, 2)
    assert span == pytest.approx(100) and sorted(busy) == pytest.approx([35, 99.98])
    with pytest.raises(BenchprofError, match="more than 1 jobs ran at once"):
        worker_busy(intervals, 1)


def test_one_run_of_a_resumed_evaluation_is_measured_alone(tmp_path, capsys):
    """A run killed at 40 and resumed at 1,000: over both, the 960 s between them is idle for both workers; from the
    second run's start (--since) each worker's share is its own again; a bad time is one line."""
    from benchprof.lab.busy import main

    write_jobs(tmp_path, [(0, 40), (0, 40), (1000, 50), (1000, 45), (1045, 5)])
    busy, span = worker_busy(job_intervals(tmp_path), 2)
    assert span == pytest.approx(1050) and sorted(busy) == pytest.approx([90, 90])  # 8.6% of the span each
    second = job_intervals(tmp_path, T0 + 1000)
    busy, span = worker_busy(second, 2)
    assert span == pytest.approx(50) and sorted(busy) == pytest.approx([50, 50])
    main(str(tmp_path), 2, since=datetime.fromtimestamp(T0 + 1000).isoformat())
    assert "3 jobs over 50 s; busy: worker 1 100.0%" in capsys.readouterr().out
    with pytest.raises(BenchprofError, match="--since: 'yesterday' is not a time"):
        main(str(tmp_path), 2, since="yesterday")
    with pytest.raises(BenchprofError, match="no evaluation job started at"):
        main(str(tmp_path), 2, since=datetime.fromtimestamp(T0 + 5000).isoformat())
