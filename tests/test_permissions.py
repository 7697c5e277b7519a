"""Outputs follow the umask (colleagues sharing a project folder can read them), a killed `damage --save`
leaves nothing that the next run keeps, and model or checkpoint I/O failures are one line."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from test_reliability import ABILITY, K, copy_project, disk_full, write_config

from benchprof import BenchprofError
from benchprof.core.layout import Layout
from benchprof.core.loader import load_config
from benchprof.core.storage import shared_mode, write_text
from benchprof.stages.damage import damage
from benchprof.stages.run import run


def modes(folder: Path) -> tuple[set[int], set[int]]:
    files = {stat.S_IMODE(p.stat().st_mode) for p in folder.rglob("*") if p.is_file()}
    dirs = {stat.S_IMODE(p.stat().st_mode) for p in folder.rglob("*") if p.is_dir()}
    return files, dirs


@pytest.fixture(scope="module")
def project(tiny_model_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("permissions")
    old = os.umask(0o022)
    try:
        run(load_config(write_config(folder, tiny_model_dir)))
    finally:
        os.umask(old)
    return folder


def test_shared_mode_follows_the_umask():
    old = os.umask(0o027)
    try:
        assert (shared_mode(), shared_mode(directory=True)) == (0o640, 0o750)
    finally:
        os.umask(old)


def test_every_output_and_data_file_is_0644_under_umask_022(project):
    for top in ("outputs", "data"):
        files, dirs = modes(project / top)
        assert files == {0o644}, (top, sorted(map(oct, files)))
        assert dirs == {0o755}, (top, sorted(map(oct, dirs)))


def test_atomic_write_under_a_tight_umask(tmp_path):
    old = os.umask(0o077)
    try:
        write_text(tmp_path / "a.txt", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o600


def test_saved_checkpoint_is_shared_and_a_killed_runs_folder_is_removed(project, tiny_model_dir, tmp_path):
    config = copy_project(project, tmp_path, tiny_model_dir)
    layout = Layout(tmp_path / "outputs", "tiny")
    target = layout.damaged_dir(ABILITY, K, "top")
    leftover = target.parent / f".{target.name}.abc123.benchprof.tmp"  # what a kill -9 during --save leaves
    (leftover / "sub").mkdir(parents=True)
    (leftover / "sub" / "model.safetensors").write_bytes(b"\0" * 1024)
    old = os.umask(0o022)
    try:
        damage(load_config(config), region="top", save=True)
    finally:
        os.umask(old)
    assert not leftover.exists()
    files, dirs = modes(target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o755 and files == {0o644} and dirs <= {0o755}


def test_checkpoint_on_a_full_disk_is_one_line_and_leaves_nothing(project, tiny_model_dir, tmp_path, monkeypatch):
    import transformers.modeling_utils

    config = copy_project(project, tmp_path, tiny_model_dir)
    target = Layout(tmp_path / "outputs", "tiny").damaged_dir(ABILITY, K, "top")
    monkeypatch.setattr(transformers.modeling_utils, "safe_save_file", disk_full)
    with pytest.raises(BenchprofError, match=rf"^{target}: cannot write \(No space left on device\)") as err:
        damage(load_config(config), region="top", save=True)
    assert "\n" not in str(err.value)
    assert not target.exists() and not list(target.parent.glob(".*.tmp"))


def test_truncated_model_file_is_one_line(project, tiny_model_dir, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    config = copy_project(project, tmp_path, model)  # masks exist: damage gets as far as loading the model
    proc = subprocess.run(
        [sys.executable, "-m", "benchprof", "damage", str(config)], capture_output=True, text=True, cwd=tmp_path
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-2000:]
    assert lines[0].startswith("benchprof: error: models.name: cannot load") and str(model) in lines[0]
