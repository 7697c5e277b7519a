"""Work already done is never redone because a folder moved or a file's time changed: models and
projects are identified by content, not by paths or mtimes (issue 22)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
import yaml
from test_reliability import ABILITY, write_config

from benchprof.cli import main
from benchprof.core.loader import load_config
from benchprof.core.modeling import fingerprint, load_model, model_identity
from benchprof.stages.run import run
from benchprof.stages.status import plan_status


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


def test_the_checkpoint_fingerprint_is_kept_by_content_and_recomputed_when_a_weight_changes(tmp_path, tiny_model_dir):
    from safetensors.torch import load_file, save_file

    from benchprof.core.modeling import checkpoint_fingerprint

    model_dir, cache = tmp_path / "model", tmp_path / "cache"
    shutil.copytree(tiny_model_dir, model_dir)
    cache.mkdir()
    loads = []

    def load():
        loads.append(1)
        return load_model(str(model_dir), dtype="float32")[0]

    want = fingerprint(load_model(str(model_dir), dtype="float32")[0])
    assert checkpoint_fingerprint(str(model_dir), cache, load) == want and len(loads) == 1
    assert checkpoint_fingerprint(str(model_dir), cache, load) == want and len(loads) == 1  # known: not loaded
    assert checkpoint_fingerprint(str(model_dir), cache, load, update_cache=False) == want and len(loads) == 1
    tensors = load_file(model_dir / "model.safetensors")
    name = next(n for n in tensors if n.endswith("mlp.down_proj.weight"))
    tensors[name] = tensors[name].clone()
    tensors[name].view(-1)[7] += 1.0
    save_file(tensors, model_dir / "model.safetensors", metadata={"format": "pt"})
    changed = checkpoint_fingerprint(str(model_dir), cache, load)
    assert len(loads) == 2 and changed != want and changed == fingerprint(load_model(str(model_dir))[0])
    # a model loaded by the caller is stored only with its load time, and not if a file changed after it
    other = tmp_path / "other"
    other.mkdir()
    loaded_at = time.time()
    model = load_model(str(model_dir), dtype="float32")[0]
    assert checkpoint_fingerprint(str(model_dir), other, model) == changed
    assert not (other / "fingerprints.json").exists()
    (model_dir / "config.json").write_text((model_dir / "config.json").read_text())  # rewritten after the load
    assert checkpoint_fingerprint(str(model_dir), other, model, loaded_at=loaded_at) == changed
    assert not (other / "fingerprints.json").exists()
    checkpoint_fingerprint(str(model_dir), other, model, loaded_at=time.time())
    assert len(json.loads((other / "fingerprints.json").read_text())) == 1


def edit_keeping_size_and_mtime(weights: Path) -> None:
    """Flip one bit near the end of a file and put its mtime back: the same name, size and mtime, other bytes."""
    st = weights.stat()
    with open(weights, "r+b") as f:
        f.seek(st.st_size - 3)
        last = f.read(1)
        f.seek(st.st_size - 3)
        f.write(bytes([last[0] ^ 0x40]))
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))


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


def test_a_checkpoint_fetched_twice_is_one_model(tmp_path, tiny_model_dir):
    """scripts/fetch_real.py's receipt (FETCHED.json) records its files' stat keys, so two fetches of one checkpoint
    write it with other bytes: it is no part of the model's identity (Qwen2.5-Coder-0.5B had three identities over
    three fetches, and each redid every evaluation). A file the model loads still counts."""
    from benchprof.core.modeling import FETCH_RECEIPT, same_model_folder
    from benchprof.lab.fetch import is_done, publish

    folders = []
    for name in ("first", "second"):
        staged = tmp_path / f"{name}.tmp"
        shutil.copytree(tiny_model_dir, staged, copy_function=shutil.copy)
        publish(staged, tmp_path / name, {"source_sha256": "s"})
        assert is_done(tmp_path / name, "s")
        folders.append(tmp_path / name)
    first, second = folders
    assert (first / FETCH_RECEIPT).read_bytes() != (second / FETCH_RECEIPT).read_bytes()
    outputs = tmp_path / "outputs"
    (outputs / "first").mkdir(parents=True)
    assert model_identity(str(first), outputs / "first") == model_identity(str(second))
    assert FETCH_RECEIPT not in model_identity(str(first))["files"]
    assert same_model_folder(str(second), outputs) == "first"  # its results are found under the first fetch's name
    (second / "config.json").write_text((second / "config.json").read_text().replace("}", ',"x": 1}', 1))
    assert model_identity(str(second)) != model_identity(str(first))


def test_model_identity_sees_a_same_size_edit_with_the_mtime_put_back(tmp_path, tiny_model_dir):
    """The cache was keyed by name, size and mtime: such an edit kept the old identity, so the unablated
    evaluation of the old weights was reused beside importance and masks from the new ones."""
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    cache = tmp_path / "cache"
    cache.mkdir()
    before = model_identity(str(model), cache)
    edit_keeping_size_and_mtime(model / "model.safetensors")
    after = model_identity(str(model), cache)
    assert after["files"]["model.safetensors"] != before["files"]["model.safetensors"]
    assert after["files"]["config.json"] == before["files"]["config.json"]


def test_a_settled_checkpoint_is_hashed_once_per_process_until_it_changes(tmp_path, tiny_model_dir, monkeypatch):
    """status writes no model_files.json, so it hashed the whole checkpoint at each model_identity (once per
    ability with a neuron score: 9 x 540 MB for SmolLM2); a settled file is now hashed once in a process, and
    again after a same-size edit with its mtime put back (the edit moves its ctime)."""
    import benchprof.core.storage

    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    real_time_ns, real_file_hash = time.time_ns, benchprof.core.storage.file_hash
    monkeypatch.setattr(time, "time_ns", lambda: real_time_ns() + 3_000_000_000)  # every file settled
    hashed: list[str] = []
    monkeypatch.setattr(
        benchprof.core.storage, "file_hash", lambda path: hashed.append(Path(path).name) or real_file_hash(path)
    )
    before = model_identity(str(model))
    assert model_identity(str(model)) == before and hashed.count("model.safetensors") == 1
    edit_keeping_size_and_mtime(model / "model.safetensors")
    after = model_identity(str(model))
    assert hashed.count("model.safetensors") == 2
    assert after["files"]["model.safetensors"] != before["files"]["model.safetensors"]
    assert after["files"]["config.json"] == before["files"]["config.json"]


def test_a_device_this_machine_lacks_is_one_line():
    """evals.device: cuda on a CPU machine was a 65-line traceback at model load in evaluate and damage."""
    import torch

    from benchprof import BenchprofError
    from benchprof.core.modeling import pick_device

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(BenchprofError, match=r"^evals.device: 'cuda:1', but CUDA is not available on this machine"):
        pick_device("cuda:1")
    with pytest.raises(BenchprofError, match=r"^evals.device: 'gpu' is not a device \(auto, cpu, cuda, cuda:0, ...\)$"):
        pick_device("gpu")
    assert pick_device("auto") == pick_device("cpu") == "cpu"


def untagged(folder: Path, model: str) -> Path:
    """The config of `folder` with `models[0].name` written as `model` and no `tag:` (the folder's name is the tag)."""
    config = retarget(folder, model)
    raw = yaml.safe_load(config.read_text())
    del raw["models"][0]["tag"]
    config.write_text(yaml.safe_dump(raw))
    return config


@pytest.mark.parametrize("how", ["symlink", "rename", "copy"])
def test_a_model_under_another_name_finds_its_folder(finished, tmp_path, how):
    """Without a tag, the tag is the model folder's name: a symlink or a renamed folder started a new,
    empty outputs folder and redid everything. The checkpoint's files say which folder is its."""
    target = tmp_path / "project"
    shutil.copytree(finished, target, symlinks=True)
    model = target / "model"
    elsewhere = tmp_path / "models" / "renamed-model"
    elsewhere.parent.mkdir()
    if how == "symlink":
        elsewhere.symlink_to(model)
    elif how == "rename":
        model.rename(elsewhere)
    else:
        shutil.copytree(model, elsewhere)
    config = untagged(target, str(elsewhere))
    cfg = load_config(config)
    assert cfg.models[0].tag == "tiny"
    assert stale_or_pending(config) == []
    main(["run", str(config)])
    assert not (target / "outputs" / "renamed-model").exists()


def test_a_model_with_other_files_gets_its_own_folder(finished, tmp_path):
    """A different checkpoint under a new name is a new model: a new folder, nothing of the old one used."""
    target = tmp_path / "project"
    shutil.copytree(finished, target)
    other = tmp_path / "other-model"
    shutil.copytree(target / "model", other)
    (other / "config.json").write_text((other / "config.json").read_text().replace("}", ',"x": 1}', 1))
    config = untagged(target, str(other))
    assert load_config(config).models[0].tag == "other-model"


def test_a_manifest_that_recorded_the_tag_is_not_stale(finished, tmp_path):
    """Importance manifests of earlier versions listed the tag among their inputs; the tag is no input now,
    and such a manifest stays current (an 8 B model's importance pass is hours)."""
    from benchprof.core.storage import read_json, write_json

    target = tmp_path / "project"
    shutil.copytree(finished, target)
    config = retarget(target, str(target / "model"))
    manifest = target / "outputs" / "tiny" / ABILITY / "importance" / "manifest.json"
    record = read_json(manifest)
    assert "model" not in record["inputs"]
    record["inputs"]["model"] = "tiny"
    write_json(manifest, record)
    assert stale_or_pending(config) == []


def test_model_files_of_the_older_form_are_read(tmp_path, tiny_model_dir):
    """model_files.json was {"<name>|<stat_key>": hash}: those hashes are trusted, not taken again."""
    from benchprof.core.modeling import read_model_files
    from benchprof.core.storage import file_hash, stat_key, write_json

    cache = tmp_path / "cache"
    cache.mkdir()
    old = {f"{p.name}|{stat_key(p)}": "0" * 16 for p in tiny_model_dir.iterdir() if p.is_file()}
    write_json(cache / "model_files.json", old)
    assert set(read_model_files(cache / "model_files.json")) == {
        p.name for p in tiny_model_dir.iterdir() if p.is_file()
    }
    # files under an unchanged key: the recorded (here deliberately wrong) hash is what is used
    identity = model_identity(str(tiny_model_dir), cache)
    settled = [n for n, h in identity["files"].items() if h == "0" * 16]
    assert settled and all(file_hash(tiny_model_dir / n) != "0" * 16 for n in settled)


def test_a_changed_tag_links_the_results_of_the_same_model_and_redoes_nothing(finished, tmp_path, capsys):
    """A tag only names the folder: `tag: tiny` changed to `tag: renamed` started an empty folder and redid the
    importance pass, the masks and every evaluation. The new folder now gets the old one's results, linked."""
    target = tmp_path / "project"
    shutil.copytree(finished, target)
    config = retarget(target, str(target / "model"))
    raw = yaml.safe_load(config.read_text())
    raw["models"][0]["tag"] = "renamed"
    config.write_text(yaml.safe_dump(raw))
    capsys.readouterr()
    main(["run", "--dry_run", str(config)])  # says what it would link, writes nothing
    out = capsys.readouterr().out
    assert "a run would link its results first" in out
    assert f"status: renamed: same checkpoint as {target / 'outputs' / 'tiny'}; a run links its results first" in out
    assert not (target / "outputs" / "renamed").exists()
    main(["run", str(config)])
    out = capsys.readouterr().out
    assert f"renamed: same checkpoint as {target / 'outputs' / 'tiny'}" in out
    assert "finetune: wrote importance for 0 ability run(s)" in out
    assert "extract: wrote 0 (ability, k) region set(s)" in out and "evaluate: 0 jobs run" in out
    old, new = target / "outputs" / "tiny", target / "outputs" / "renamed"
    importance = Path(ABILITY) / "importance" / "importance.safetensors"
    assert (new / importance).samefile(old / importance) or (new / importance).read_bytes() == (
        old / importance
    ).read_bytes()
    assert (new / "profile" / "ais.csv").is_file() and stale_or_pending(config) == []
