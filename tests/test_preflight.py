"""The preflight's hub check (core/modeling.hub_unreachable): a hub id that is neither cached nor reachable fails in
one line within seconds (transformers retried it for half a minute); a cached one passes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from benchprof.core import modeling

ROOT = Path(__file__).resolve().parents[1]


def unreachable_hub(monkeypatch, tmp_path: Path) -> Path:
    """The hub at a loopback port nothing listens on (refused at once), an empty cache in tmp_path, online."""
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    cache = tmp_path / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


def test_an_unreachable_uncached_hub_id_is_one_line(monkeypatch, tmp_path):
    unreachable_hub(monkeypatch, tmp_path)
    started = time.time()
    why = modeling.hub_unreachable("some-org/some-model")
    assert time.time() - started < modeling.HUB_PROBE_SECONDS + 1
    assert why is not None and why.startswith(
        "'some-org/some-model' is not a local folder nor in the Hugging Face cache"
    )
    assert "http://127.0.0.1:9 cannot be reached" in why and "\n" not in why


def test_a_cached_hub_id_passes_online_and_offline(monkeypatch, tmp_path):
    cache = unreachable_hub(monkeypatch, tmp_path)
    snapshot = cache / "models--some-org--some-model" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (cache / "models--some-org--some-model" / "refs").mkdir()
    (cache / "models--some-org--some-model" / "refs" / "main").write_text("abc123")
    assert modeling.hub_unreachable("some-org/some-model") is None  # in the cache: transformers loads it
    assert modeling.hub_unreachable("other-org/other-model") is not None
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # offline: nothing to probe, the cache alone decides
    assert modeling.hub_unreachable("some-org/some-model") is None
    assert (
        modeling.hub_unreachable("other-org/other-model")
        == "'other-org/other-model' not found locally and HF_HUB_OFFLINE=1"
    )


def test_run_on_an_unreachable_model_fails_in_one_line_and_writes_nothing(tmp_path):
    """The README's paper config on a node without the hub: one line naming models[0].name, within seconds."""
    config = yaml.safe_load((ROOT / "config.yml").read_text())
    config["settings"]["output_dir"] = str(tmp_path / "outputs")
    config["data"] = {**config.get("data", {}), "dir": str(tmp_path / "data")}
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump(config))
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env |= {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path / "hf")}
    started = time.time()
    proc = subprocess.run(
        [sys.executable, "-m", "benchprof", "run", str(path), "--eval_only"], capture_output=True, text=True, env=env
    )
    assert time.time() - started < 30  # the import of transformers included; it was 33 s of retries alone
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(
        "benchprof: error: models[0].name: 'meta-llama/Llama-3.1-8B-Instruct' is not a local folder nor in the"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yml"]


def test_an_unwritable_datasets_cache_fails_evaluate_and_run_before_any_model_loads(tmp_path):
    """HF_DATASETS_CACHE under a file (a cache that cannot be written, as a read-only one): `evaluate` and `run`
    each fail in one line naming HF_DATASETS_CACHE and the fix, within seconds, and write nothing."""
    config = yaml.safe_load((ROOT / "configs" / "demo.yml").read_text())
    config["settings"]["output_dir"] = str(tmp_path / "outputs")
    config["data"] = {**config.get("data", {}), "dir": str(ROOT / "data")}
    config["models"] = [{**m, "name": str(ROOT / "benchprof" / "assets" / "demo-model")} for m in config["models"]]
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump(config))
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    env = os.environ | {"HF_DATASETS_CACHE": str(blocker / "datasets")}
    for argv in (["evaluate", str(path)], ["run", str(path), "--eval_only"]):
        started = time.time()
        proc = subprocess.run([sys.executable, "-m", "benchprof", *argv], capture_output=True, text=True, env=env)
        assert time.time() - started < 20 and proc.returncode == 2, proc.stderr
        [line] = proc.stderr.strip().splitlines()
        assert line == (
            f"benchprof: error: HF_DATASETS_CACHE: {blocker} is not a folder (lm-eval prepares each benchmark there: "
            "set HF_DATASETS_CACHE to a writable folder)"
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "config.yml"]


def test_a_model_folder_without_weights_and_an_output_dir_that_is_a_file_are_one_line_each(tmp_path):
    """A model folder holding its config and tokenizer but no weights fails `run --dry_run` in one line naming
    models[0].name (it was reported ready); `status` with settings.output_dir a file says so (it counted jobs)."""
    import shutil

    model = tmp_path / "model"
    shutil.copytree(ROOT / "benchprof" / "assets" / "demo-model", model)
    for weights in model.glob("*.safetensors"):
        weights.unlink()
    config = yaml.safe_load((ROOT / "configs" / "demo.yml").read_text())
    config["settings"]["output_dir"] = str(tmp_path / "outputs")
    config["data"] = {**config.get("data", {}), "dir": str(ROOT / "data")}
    config["models"] = [{**config["models"][0], "name": str(model)}]
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.run(
        [sys.executable, "-m", "benchprof", "run", str(path), "--dry_run"], capture_output=True, text=True
    )
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"benchprof: error: models[0].name: {model}: no weights (*.safetensors or *.bin) in the model folder"
    ], proc.stderr
    (tmp_path / "a_file").write_text("")
    config["settings"]["output_dir"] = str(tmp_path / "a_file")
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.run([sys.executable, "-m", "benchprof", "status", str(path)], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"benchprof: error: settings.output_dir: {tmp_path / 'a_file'} is not a folder"
    ], proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "config.yml", "model"]
