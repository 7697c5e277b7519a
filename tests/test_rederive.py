"""lab/rederive.py on damaged inputs: a truncated or byte-flipped documents.tar.xz, a profile folder's config.yml
that is random bytes or a YAML list: each one line (BenchprofError), never an EOFError, LZMAError, UnicodeDecodeError
or AttributeError traceback."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchprof import BenchprofError
from benchprof.lab.rederive import rederive

COMMITTED = Path(__file__).resolve().parents[1] / "docs" / "results" / "profile-smollm2-authors-easy"


@pytest.fixture
def folder(tmp_path):
    out = tmp_path / "profile"
    out.mkdir()
    for name in ("config.yml", "documents.tar.xz", "ais.csv"):
        shutil.copy(COMMITTED / name, out / name)
    return out


@pytest.mark.parametrize("damage", ["truncated", "flipped"])
def test_a_damaged_archive_is_one_line(folder, damage):
    archive = folder / "documents.tar.xz"
    data = bytearray(archive.read_bytes())
    if damage == "truncated":
        data = data[: len(data) // 2]
    else:
        for i in range(len(data) // 3, len(data) // 3 + 64):
            data[i] ^= 0xFF
    archive.write_bytes(bytes(data))
    with pytest.raises(BenchprofError, match=rf"^{archive}: not a readable documents archive \(.+\)$"):
        rederive(folder)


@pytest.mark.parametrize(
    ("content", "message"),
    [(bytes(range(256)) * 4, "not a UTF-8 text file"), (b"- a\n- b\n", "not a config")],
)
def test_a_config_that_is_not_one_is_one_line(folder, content, message):
    (folder / "config.yml").write_bytes(content)
    with pytest.raises(BenchprofError, match=rf"^{folder / 'config.yml'}: {message}"):
        rederive(folder)
