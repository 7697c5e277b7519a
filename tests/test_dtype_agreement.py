"""lab/dtype_agreement.py on the demo model: a float32 and a bfloat16 frontier of one plan compared item by item,
held to a count by hand from the two records files; plans that differ in more than the dtype refused in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchprof.cli import main
from benchprof.core.storage import read_csv, read_records

ROOT = Path(__file__).resolve().parents[1]
ABILITIES = ["Commonsense_Causal", "Long_Term_Knowledge"]
FLAGS = ["--options", "act_grad_contrast", "--sizes", "8", "--draws", "3", "--train_items", "12", "--test_items", "30"]
pytestmark = pytest.mark.slow


def test_flips_and_cells_equal_a_count_by_hand_and_other_plans_are_refused(tmp_path, demo_frontier_config):
    config = demo_frontier_config
    main(["frontier", str(config), *FLAGS, "--folder", "f32"])
    main(["frontier", str(config), *FLAGS, "--folder", "bf16", "--dtype", "bfloat16"])
    main(["frontier", str(config), *FLAGS, "--folder", "other", "--dtype", "bfloat16", "--test_items", "20"])
    out = tmp_path / "out" / "demo"
    script = [sys.executable, str(ROOT / "scripts" / "dtype_agreement.py")]
    done = subprocess.run([*script, str(out / "f32"), str(out / "bf16")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    a, b = (read_records(out / f / "evaluations.jsonl") for f in ("f32", "bf16"))
    by_region = {(r["option"], r["region"]): r["acc_norm"] for r in b}
    by_hand = sum(
        x != y
        for r in a
        for split, xs in r["acc_norm"].items()
        for x, y in zip(xs, by_region[(r["option"], r["region"])][split])
    )
    text = (out / "bf16" / "dtype_agreement.md").read_text()
    assert f"Items scored differently: {by_hand} of {len(a) * 2 * 30} " in text
    rows = read_csv(out / "bf16" / "dtype_agreement.csv")
    f32 = {r["ability"]: r for r in read_csv(out / "f32" / "frontier.csv")}
    for row in rows:
        if row["ability"] in f32 and row["option"] == "act_grad_contrast":
            assert float(row["own_float32"]) == pytest.approx(float(f32[row["ability"]]["own_ais"]))
    refused = subprocess.run([*script, str(out / "f32"), str(out / "other")], capture_output=True, text=True)
    assert refused.returncode == 1 and refused.stderr.strip().endswith("they differ in test_items)")
    assert len(refused.stderr.strip().splitlines()) == 1
