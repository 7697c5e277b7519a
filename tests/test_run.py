"""`benchprof run`: every stage in order, the importance pass on every configured device (issue 22)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_reliability import ABILITY, write_config

from benchprof.core.layout import Layout
from benchprof.core.loader import load_config
from benchprof.stages.run import run


def importance(folder):
    from safetensors.torch import load_file

    layout = Layout(folder / "outputs", "tiny")
    manifest = json.loads((layout.importance_dir(ABILITY) / "manifest.json").read_text())
    return load_file(str(layout.importance_file(ABILITY))), manifest


def assert_two_ranks_equal_one(one, two) -> None:
    """The two-rank run's importance equals the one-process run's, and its pipeline finished and unlocked."""
    got, manifest = importance(two)
    want, reference = importance(one)
    assert manifest["world_size"] == 2 and reference["world_size"] == 1
    assert got.keys() == want.keys()
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=1e-5, atol=1e-5 * float(want[name].abs().max()))
    assert (Layout(two / "outputs", "tiny").profile_dir / "ais.csv").is_file()
    assert not (two / "outputs" / "tiny" / ".lock").exists()


def test_run_starts_the_importance_processes_itself(tiny_model_dir, tmp_path):
    """finetune.processes 2 on the CPU: run launches two gloo ranks itself (no torchrun by hand), and
    the importance file equals a one-process run's; the rest of the pipeline follows."""
    one, two = tmp_path / "one", tmp_path / "two"
    run(load_config(write_config(one, tiny_model_dir)))
    config = write_config(two, tiny_model_dir, finetune={"processes": 2})
    proc = subprocess.run([sys.executable, "-m", "benchprof", "run", str(config)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_two_ranks_equal_one(one, two)


def test_a_config_changed_in_python_reaches_the_ranks(tiny_model_dir, tmp_path):
    """The ranks run re-read the config from cfg.path, so a Config changed in Python lost its change there:
    they now load the effective config benchprof writes (loader.effective_config)."""
    from benchprof.core.loader import effective_config

    one, two = tmp_path / "one", tmp_path / "two"
    run(load_config(write_config(one, tiny_model_dir, finetune={"max_samples": 5})))
    cfg = load_config(write_config(two, tiny_model_dir, finetune={"processes": 2}))
    changed = cfg.with_overrides(finetune={"max_samples": 5}, aggregate={"bootstrap": 50})
    written = effective_config(changed)
    again = load_config(written)
    assert again.finetune == changed.finetune and again.aggregate.bootstrap == 50
    assert again.output_root == cfg.output_root
    assert again.model_source(again.models[0]) == cfg.model_source(cfg.models[0])
    assert effective_config(again) == written  # a fixed point: every path in it is already absolute
    run(changed)
    assert_two_ranks_equal_one(one, two)


def test_run_shows_the_preflights_warnings_once(tiny_model_dir, tmp_path, capfd, monkeypatch):
    """run's own output goes to logs/run.log (console.quiet); the preflight's warnings are for the user, on the
    terminal (they reached the log only, or nothing where the run then stopped on bad input)."""
    import benchprof.stages.data
    import benchprof.stages.preflight
    from benchprof import BenchprofError
    from benchprof.cli import main

    def stop(*args, **kwargs):
        raise BenchprofError("stopped after the preflight")

    monkeypatch.setattr(benchprof.stages.preflight, "preflight", lambda cfg, eval_only=False: ["a warning to act on"])
    monkeypatch.setattr(benchprof.stages.data, "write_data", stop)
    config = write_config(tmp_path, tiny_model_dir)
    with pytest.raises(SystemExit):
        main(["run", str(config)])
    err = capfd.readouterr().err.splitlines()
    assert err.count("benchprof: warning: a warning to act on") == 1, err
    assert err[-1] == "benchprof: error: stopped after the preflight"


def dry_run(config: Path, cache: Path) -> list[str]:
    """`benchprof run --dry_run config` in a fresh process with `cache` as the user's cache: its output lines, the
    last one naming which of torch, transformers and lm-eval's task machinery it imported."""
    import os

    script = (
        "import sys\n"
        "from benchprof.cli import main\n"
        "main(['run', '--dry_run', sys.argv[1]])\n"
        "print('imported:', *sorted(m for m in ('torch', 'transformers', 'lm_eval.tasks') if m in sys.modules))\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    proc = subprocess.run([sys.executable, "-c", script, str(config)], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.splitlines()


def test_a_dry_run_of_a_checked_cpu_config_imports_no_torch(tiny_model_dir, tmp_path):
    """A CPU config asks torch nothing, the model's facts are kept from its first check (preflight.model_facts) and
    a config without lm-eval tasks needs none of lm-eval: a second dry run imports neither torch, transformers
    nor lm-eval's task machinery (3-4 s of a 4.5 s dry run on 2 cores, issue 65)."""
    config = write_config(tmp_path, tiny_model_dir)
    dry_run(config, tmp_path / "cache")  # the first reads the model through transformers and keeps its facts
    lines = dry_run(config, tmp_path / "cache")
    assert lines[-1] == "imported:"
    assert any(line.startswith("status: ") for line in lines)


def test_a_new_users_first_dry_run_of_the_demo_imports_no_torch(tmp_path):
    """The demo model's facts ship with the package (lab/shipped_facts.py), so the README's first dry run, with an
    empty user cache, imports neither torch nor transformers (0.29-0.34 s at idle against 3.9-4.5 s before)."""
    from benchprof.stages.preflight import SHIPPED_FACTS, model_facts_key

    model = str(SHIPPED_FACTS.parent / "demo-model")
    if json.loads(SHIPPED_FACTS.read_text())[0]["key"][1] != model_facts_key(model, model)[1]:
        pytest.skip("the shipped facts are for other library versions (tests/test_reliability.py)")
    demo = Path(__file__).resolve().parents[1] / "configs" / "demo.yml"
    assert dry_run(demo, tmp_path / "cache")[-1] == "imported:"
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").rglob("model_facts-*"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc are Linux's")
def test_a_killed_run_takes_torchrun_and_its_ranks_with_it(tiny_model_dir, tmp_path):
    """kill -9 of `benchprof run` with finetune.processes 2 left torchrun and both ranks running under init;
    the rerun then took the free lock and ran a second importance pass beside them."""
    import os
    import signal
    import time

    config = write_config(tmp_path, tiny_model_dir, finetune={"processes": 2})

    def launched() -> list[int]:
        """torchrun and its ranks: the processes whose command line names this test's effective config."""
        pids = []
        for entry in os.listdir("/proc"):
            try:
                cmdline = open(f"/proc/{entry}/cmdline", "rb").read().decode(errors="replace")
            except OSError:
                continue
            if entry.isdigit() and str(tmp_path / "outputs" / ".configs") in cmdline:
                pids.append(int(entry))
        return pids

    run_process = subprocess.Popen(
        [sys.executable, "-m", "benchprof", "run", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.time() + 180
        while len(launched()) < 3 and time.time() < deadline and run_process.poll() is None:
            time.sleep(0.05)
        assert len(launched()) >= 3, "torchrun and two ranks never ran"
        run_process.kill()
        run_process.wait()
        deadline = time.time() + 60
        while launched() and time.time() < deadline:
            time.sleep(0.2)
        assert launched() == []
    finally:
        run_process.kill()
        for pid in launched():
            os.kill(pid, signal.SIGKILL)


def test_a_dry_run_names_a_weights_file_cut_short(tiny_model_dir, tmp_path):
    """A finished model folder whose model.safetensors was cut short passed the dry run, and only the real run
    failed (issue 65): the dry run reads each weights file's header and refuses it in one line naming the file."""
    import shutil

    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    weights = next(model.glob("*.safetensors"))
    config = write_config(tmp_path, model)
    ok = subprocess.run([sys.executable, "-m", "benchprof", "run", "--dry_run", str(config)], capture_output=True)
    assert ok.returncode == 0, ok.stderr[-2000:]
    weights.write_bytes(weights.read_bytes()[:-100])
    cut = subprocess.run(
        [sys.executable, "-m", "benchprof", "run", "--dry_run", str(config)], capture_output=True, text=True
    )
    assert cut.returncode != 0
    assert f"models[0].name: {weights}: cut short or damaged" in cut.stderr
    assert "Traceback" not in cut.stderr
