"""scripts/validate.py --combine on the three SmolLM2 builds kept in docs/results/smollm2-plant: the shipped
table is what the code computes from the shipped builds, an interval equals a t interval worked by hand, and
builds that cannot be averaged are refused or their extra rows left out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results" / "smollm2-plant"
BUILDS = [RESULTS / f"seed{s}" for s in range(3)]


def combine(folders: list[Path], out: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(ROOT / "scripts" / "validate.py"), "--combine", ",".join(map(str, folders))]
    return subprocess.run([*command, "--out", str(out)], capture_output=True, text=True, cwd=ROOT)


def copy_build(source: Path, target: Path, change: Any) -> Path:
    """A copy of a build's validation.json with `change` applied to it."""
    result = json.loads((source / "validation.json").read_text())
    change(result)
    target.mkdir(parents=True)
    (target / "validation.json").write_text(json.dumps(result))
    return target


def test_combine_reproduces_the_shipped_table_and_a_hand_interval(tmp_path: Path) -> None:
    done = combine(BUILDS, tmp_path)
    assert done.returncode == 0, done.stderr
    got = json.loads((tmp_path / "combined.json").read_text())
    assert got["rows"] == json.loads((RESULTS / "combined.json").read_text())["rows"]
    assert got["left_out"] == []

    # by hand: answer loss, rank, exact, k = |R_a| / total; precision averaged over the planted abilities of a
    # build, then a 95% t interval over the three builds
    per_build = []
    for folder in BUILDS:
        build = json.loads((folder / "validation.json").read_text())
        k = build["k_exact"]
        rows = [
            r
            for r in build["rows"]
            if (r["loss_on"], r["score"], r["selection"], r["k"]) == ("answer", "rank", "exact", k)
        ]
        assert sorted(r["ability"] for r in rows) == ["Invented_Facts", "Invented_Language", "Invented_Units"]
        per_build.append(np.mean([r["precision"] for r in rows]))
    mean = float(np.mean(per_build))
    half = float(stats.t.ppf(0.975, 2) * np.std(per_build, ddof=1) / np.sqrt(3))
    row = next(
        r for r in got["rows"] if (r["loss_on"], r["score"], r["selection"], r["k"]) == ("answer", "rank", "exact", k)
    )
    assert row["precision"]["builds"] == pytest.approx(per_build)
    assert row["precision"]["mean"] == pytest.approx(mean)
    assert row["precision"]["ci"] == pytest.approx([mean - half, mean + half])
    assert half > 0.01  # three builds that differ: an interval, not a point


def test_combine_refuses_another_metric_and_leaves_out_rows_not_in_every_build(tmp_path: Path) -> None:
    def other_metric(result: dict[str, Any]) -> None:
        result["metric"] = "acc_norm"

    refused = copy_build(BUILDS[1], tmp_path / "acc_norm", other_metric)
    done = combine([BUILDS[0], refused], tmp_path / "out-refused")
    assert done.returncode != 0
    assert str(refused) in done.stderr and "metric or benchmarks differ" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out-refused").exists()  # nothing half-written

    def without_entropy(result: dict[str, Any]) -> None:
        result["rows"] = [r for r in result["rows"] if r["score"] != "entropy"]

    fewer = copy_build(BUILDS[2], tmp_path / "no-entropy", without_entropy)
    done = combine([BUILDS[0], BUILDS[1], fewer], tmp_path / "out")
    assert done.returncode == 0, done.stderr
    got = json.loads((tmp_path / "out" / "combined.json").read_text())
    assert {r["score"] for r in got["rows"]} == {"magnitude", "importance", "contrast_mean", "ratio", "rank"}
    assert len(got["left_out"]) == 2 * 3 and {tuple(k)[1] for k in got["left_out"]} == {"entropy"}  # 2 losses x 3 k
    assert "6 (loss, score, selection, k) rows left out" in (tmp_path / "out" / "combined.md").read_text()
