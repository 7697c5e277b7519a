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


def test_a_folder_without_its_ais_csv_or_no_folder_at_all_is_one_line(folder, tmp_path):
    """The script compares a re-derived ais.csv with the folder's: without one it said the two differ in 229 lines;
    a folder that is not there was named as a missing archive."""
    from benchprof.lab.rederive import main

    (folder / "ais.csv").unlink()
    with pytest.raises(BenchprofError) as err:
        main(str(folder))
    assert str(err.value) == f"{folder / 'ais.csv'}: not found, nothing to compare the re-derived profile with"
    with pytest.raises(BenchprofError) as err:
        main(str(tmp_path / "nothere"))
    assert str(err.value) == f"{tmp_path / 'nothere'}: no such folder"
