"""lab/fullsize.py, the full-size path's script, on the CPU at a small limit (what a GPU node runs in full): every
stage timed, the documents and variants it scored counted from the samples files, and the backend comparison
saying why it did not run where vllm does not import."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_full_size_script_runs_the_demo_at_a_small_limit(tmp_path):
    from benchprof.core.loader import load_config
    from benchprof.lab.fullsize import full_size

    figures = full_size(str(ROOT / "configs" / "demo.yml"), str(tmp_path / "out"), limit=4, device="cpu",
                        parity="Quantitative_Reasoning")  # fmt: skip
    cfg = load_config(ROOT / "configs" / "demo.yml")
    variants = 1 + len(cfg.abilities()) * len(cfg.settings.k_values) * len(cfg.extract.region_names())
    assert figures["variants"] == variants
    assert figures["documents"] == variants * 4 * len(cfg.evals.benchmarks)  # 4 of every benchmark, every variant
    assert set(figures["stage_seconds"]) == {"data", "finetune", "extract", "evaluate", "aggregate"}
    assert figures["seconds_per_variant"] == pytest.approx(figures["stage_seconds"]["evaluate"] / variants)
    assert json.loads((tmp_path / "out" / "fullsize.json").read_text()) == figures
    try:
        import vllm  # noqa: F401
    except Exception:
        assert figures["parity"]["vllm"].startswith("not usable here")
    else:
        assert figures["parity"]["acc_equal"] == figures["parity"]["documents"]
