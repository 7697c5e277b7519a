"""Committed results travel: no file under docs/results/ or benchprof/assets/ records an absolute path of the
machine that made it (a reader's clone has other paths; results name their inputs relative to the config or the
output_dir)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# a path from the file system's root into a folder a machine's files live in, or a Windows drive
MACHINE_PATH = re.compile(r"(?<![\w.:/~-])/(?:work|tmp|root|home|Users|mnt|opt|var|private|scratch|data)/|[A-Z]:\\\\")
TEXT = {".json", ".jsonl", ".md", ".csv", ".txt", ".yml", ".yaml", ".log", ".jinja"}


def test_no_committed_result_holds_a_machine_path():
    found = []
    for folder in (ROOT / "docs" / "results", ROOT / "benchprof" / "assets"):
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.suffix in TEXT:
                for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                    if MACHINE_PATH.search(line):
                        found.append(f"{path.relative_to(ROOT)}:{number}: {MACHINE_PATH.search(line)[0]}")
    assert found == []


def test_the_pattern_finds_what_it_should():
    assert MACHINE_PATH.search('"model": "/work/main/real/SmolLM2"')
    assert MACHINE_PATH.search("apply --out /tmp/planted_s1")
    assert not MACHINE_PATH.search("../real/SmolLM2-135M-Instruct and outputs/smollm2/frontier")
    assert not MACHINE_PATH.search("https://huggingface.co/datasets/allenai/tmp/x")
