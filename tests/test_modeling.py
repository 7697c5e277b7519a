"""Work already done is never redone because a folder moved or a file's time changed: models and
projects are identified by content, not by paths or mtimes (issue 22)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml
from test_reliability import ABILITY, write_config

from benchprof.configfile import load_config
from benchprof.modeling import fingerprint, load_model, model_identity
from benchprof.run import run
from benchprof.status import plan_status


@pytest.fixture(scope="module")
def finished(tiny_model_dir, tmp_path_factory):
    """A finished project with its own copy of the model, named by an absolute path."""
    folder = tmp_path_factory.mktemp("identity")
    shutil.copytree(tiny_model_dir, folder / "model")
    config = write_config(folder, folder / "model")
    run(load_config(config))
    return folder


def stale_or_pending(config: Path) -> list[str]:
    return [f"{i.stage} {i.what}: {i.state} ({i.why})" for i in plan_status(load_config(config)) if i.state != "done"]


def retarget(folder: Path, model: str) -> Path:
    """The same config with `models[0].name` written as `model` (a relative or absolute path)."""
    config = folder / "config.yml"
    raw = yaml.safe_load(config.read_text())
    raw["models"][0]["name"] = model
    config.write_text(yaml.safe_dump(raw))
    return config


def touch_everything(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            os.utime(path, (1_900_000_000, 1_900_000_000))


@pytest.mark.parametrize("copy", ["cp -a", "cp -r"])
def test_a_copied_project_redoes_nothing(finished, tmp_path, copy):
    target = tmp_path / "elsewhere"
    shutil.copytree(finished, target, copy_function=shutil.copy2 if copy == "cp -a" else shutil.copy)
    if copy == "cp -r":
        touch_everything(target)  # new times everywhere, the model's files included
    config = retarget(target, str(target / "model"))
    assert stale_or_pending(config) == []
    assert not (target / "outputs" / "tiny" / "profile" / "manifest.json").samefile(
        finished / "outputs" / "tiny" / "profile" / "manifest.json"
    )


def test_the_same_model_written_as_a_relative_path_redoes_nothing(finished, tmp_path):
    target = tmp_path / "project"
    shutil.copytree(finished, target)
    config = retarget(target, "model")  # relative to the config's folder, was absolute
    assert stale_or_pending(config) == []


def test_a_changed_model_file_makes_everything_after_it_stale(finished, tmp_path):
    target = tmp_path / "project"
    shutil.copytree(finished, target)
    config = retarget(target, str(target / "model"))
    model, tokenizer = load_model(str(target / "model"))
    with __import__("torch").no_grad():
        next(p for n, p in model.named_parameters() if "layers.1.mlp.up_proj" in n).view(-1)[7] += 0.25
    model.save_pretrained(target / "model")
    states = {(i.stage, i.what): i.state for i in plan_status(load_config(config))}
    assert states[("eval", f"original {ABILITY}")] == "stale"  # the checkpoint's content changed


def test_fingerprint_sees_one_changed_weight_and_ignores_the_dtype(tiny_model_dir):
    import torch

    model, _ = load_model(str(tiny_model_dir), dtype="float32")
    before = fingerprint(model)
    assert fingerprint(load_model(str(tiny_model_dir), dtype="bfloat16")[0]) == before
    with torch.no_grad():
        weight = dict(model.named_parameters())["model.layers.2.mlp.down_proj.weight"]
        weight.view(-1)[weight.numel() // 2 + 1] += 0.5  # one weight no sample of 64 would see
    assert fingerprint(model) != before


def test_model_identity_is_content_cached_by_time(tmp_path, tiny_model_dir):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(tiny_model_dir, a)
    shutil.copytree(tiny_model_dir, b, copy_function=shutil.copy)
    cache = tmp_path / "cache"
    cache.mkdir()
    assert model_identity(str(a), cache) == model_identity(str(b)) == model_identity(str(a))
    assert "files" in model_identity(str(a)) and "config.json" in model_identity(str(a))["files"]
    (b / "config.json").write_text((b / "config.json").read_text().replace("}", ',"x": 1}', 1))
    assert (
        model_identity(str(b), cache)["files"]["config.json"] != model_identity(str(a), cache)["files"]["config.json"]
    )


def test_model_identity_sees_a_same_size_edit_with_the_mtime_put_back(tmp_path, tiny_model_dir):
    """The cache was keyed by name, size and mtime: such an edit kept the old identity, so the unablated
    evaluation of the old weights was reused beside importance and masks from the new ones."""
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    cache = tmp_path / "cache"
    cache.mkdir()
    before = model_identity(str(model), cache)
    weights = model / "model.safetensors"
    st = weights.stat()
    with open(weights, "r+b") as f:
        f.seek(st.st_size - 3)
        last = f.read(1)
        f.seek(st.st_size - 3)
        f.write(bytes([last[0] ^ 0x40]))
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = model_identity(str(model), cache)
    assert after["files"]["model.safetensors"] != before["files"]["model.safetensors"]
    assert after["files"]["config.json"] == before["files"]["config.json"]


def test_a_device_this_machine_lacks_is_one_line():
    """evals.device: cuda on a CPU machine was a 65-line traceback at model load in evaluate and damage."""
    import torch

    from benchprof import BenchprofError
    from benchprof.modeling import pick_device

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(BenchprofError, match=r"^evals.device: 'cuda:1', but CUDA is not available on this machine"):
        pick_device("cuda:1")
    with pytest.raises(BenchprofError, match=r"^evals.device: 'gpu' is not a device \(auto, cpu, cuda, cuda:0, ...\)$"):
        pick_device("gpu")
    assert pick_device("auto") == pick_device("cpu") == "cpu"
