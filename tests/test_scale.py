"""Sharded importance (benchprof.stages.finetune strategies fsdp and deepspeed) equals the one-process result.

Each sharded run goes through the real command line in a subprocess (its own process group), on the
CPU with gloo. The config has 10 items in batches of 3 or 4, so several micro-batches are summed:
a strategy that kept only the last micro-batch's gradient (ZeRO-1/2 without a step) would fail here.
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from test_finetune import ABILITY, assert_matches, read_importance, records, reference_importance, write_config

from benchprof import BenchprofError
from benchprof.core.layout import Layout
from benchprof.core.loader import load_config
from benchprof.core.modeling import load_model
from benchprof.stages.finetune import finetune
from benchprof.stages.sharding import check_launcher, rank_batches

ROOT = Path(__file__).resolve().parents[1]
# DeepSpeed's CPU backend JIT-compiles a shared-memory all-reduce kernel on start (about a minute on
# 2 cores). Only its inference_all_reduce uses it; ZeRO-3 talks through torch.distributed (gloo).
NO_SHM_KERNEL = "import sys, deepspeed.comm.torch; sys.modules['deepspeed.comm.torch'].build_shm_op = lambda: None; "


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_cli(args: list[str], nproc: int = 1, prelude: str = "", timeout: int = 150) -> subprocess.CompletedProcess:
    """`benchprof <args>` in fresh processes: torchrun with nproc > 1, plain python otherwise."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", "DS_ACCELERATOR": "cpu"}
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    code = prelude + f"from benchprof.cli import main; main({args!r})"
    if nproc == 1:
        cmd = [sys.executable, "-c", code]
    else:
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as script:
            script.write(code)
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            str(nproc),
            "--master_addr",
            "127.0.0.1",
            "--master_port",
            str(free_port()),
            script.name,
        ]
    try:
        return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    finally:
        if nproc > 1:
            os.unlink(script.name)


def importance_of(config: Path) -> tuple[dict, dict]:
    layout = Layout(load_config(config).output_root, "tiny")
    importance, _ = read_importance(layout.importance_file(ABILITY))
    manifest = json.loads((layout.importance_dir(ABILITY) / "manifest.json").read_text())
    return importance, manifest


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory, tiny_model_dir):
    """The plain one-process pass (strategy ddp), itself checked against fp64 autograd in test_finetune."""
    tmp = tmp_path_factory.mktemp("ddp")
    config = write_config(tmp, tiny_model_dir)
    finetune(load_config(config))
    return importance_of(config)[0]


def test_deepspeed_zero3_one_process_equals_reference(ddp_run, tiny_model_dir, tmp_path):
    pytest.importorskip("deepspeed")
    config = write_config(tmp_path, tiny_model_dir, out="zero3")
    done = run_cli(["finetune", str(config), "--strategy", "deepspeed"], prelude=NO_SHM_KERNEL)
    assert done.returncode == 0, done.stderr[-3000:]
    importance, manifest = importance_of(config)
    assert manifest["strategy"] == "deepspeed" and manifest["world_size"] == 1
    assert_matches(importance, ddp_run, rtol=1e-5)
    model, tok = load_model(str(tiny_model_dir), dtype="float32")
    assert_matches(importance, reference_importance(model, tok, records()[:10], "all"), rtol=1e-4)


def test_fsdp_two_processes_equal_one_process_ddp(ddp_run, tiny_model_dir, tmp_path):
    # batch 4 over 10 items: 3 batches, so rank 1 runs one zero-weighted padding batch
    config = write_config(tmp_path, tiny_model_dir, out="fsdp")
    done = run_cli(["finetune", str(config), "--strategy", "fsdp", "--batch_size", "4"], nproc=2)
    assert done.returncode == 0, done.stderr[-3000:]
    importance, manifest = importance_of(config)
    assert manifest["strategy"] == "fsdp" and manifest["world_size"] == 2
    assert_matches(importance, ddp_run, rtol=1e-5)
    params = dict(load_model(str(tiny_model_dir), dtype="float32")[0].named_parameters())
    assert all(v.dtype == torch.float32 and v.shape == params[n].shape for n, v in importance.items())


def test_rank_batches_pad_with_zero_weight():
    batches = [{"i": i} for i in range(5)]
    ranks = [rank_batches(batches, r, 3) for r in range(3)]
    assert [len(r) for r in ranks] == [2, 2, 2]
    real = sorted(b["i"] for r in ranks for b, w in r if w == 1.0)
    assert real == [0, 1, 2, 3, 4] and sum(w == 0.0 for r in ranks for _, w in r) == 1


def test_strategy_errors_are_one_line(monkeypatch, tiny_model_dir, tmp_path):
    with pytest.raises(BenchprofError, match="not one of ddp, fsdp, deepspeed"):
        check_launcher("zero2", 1)
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    with pytest.raises(BenchprofError, match="pass --strategy deepspeed"):
        check_launcher("ddp", 2)
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "2")
    with pytest.raises(BenchprofError, match="zero_stage 2 cannot read gradients"):
        check_launcher("deepspeed", 2)
    monkeypatch.delenv("ACCELERATE_USE_DEEPSPEED")
    monkeypatch.delenv("ACCELERATE_DEEPSPEED_ZERO_STAGE")
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "deepspeed" else real_find_spec(name, *a)
    )
    with pytest.raises(BenchprofError, match="deepspeed is not installed"):
        check_launcher("deepspeed", 1)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    with pytest.raises(BenchprofError, match="torchrun --nproc_per_node 8"):
        check_launcher("fsdp", 1)
    # through the command line: exit status 2 and one line on stderr
    config = write_config(tmp_path, tiny_model_dir, out="bad")
    done = run_cli(["finetune", str(config), "--strategy", "zero2"])
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0
    assert "--strategy: 'zero2' is not one of" in done.stderr
