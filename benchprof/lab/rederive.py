"""A profile folder's ais.csv re-derived from its per-document scores alone (profile/documents.py's
documents.tar.xz) and its config.yml: unpacked into an empty outputs tree, scored by aggregate's own computation
(profile_scores.load_scores), written by its own writer, and compared with the ais.csv the folder keeps.

.venv/bin/python scripts/rederive_profile.py docs/results/profile-*   (a folder of outputs/<model>/profile once
its config.yml is copied in beside ais.csv, as a committed profile folder keeps it)
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from benchprof import BenchprofError
from benchprof.core.layout import Layout
from benchprof.profile.documents import DOCUMENTS, unpack_documents

if TYPE_CHECKING:
    from benchprof.core.config import Config
    from benchprof.profile.rows import Profile


def folder_config(folder: Path, output_dir: Path) -> Config:
    """A profile folder's config.yml as aggregate needs it, its outputs under `output_dir`: what only evaluation
    reads (evals.include_path, evals.dataset_paths: paths on the machine that ran it) left out."""
    import yaml

    from benchprof.core.loader import parse_config

    path = folder / "config.yml"
    if not path.is_file():
        raise BenchprofError(f"{path}: no config to re-derive the profile under")
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    evals = dict(raw.get("evals") or {})
    for key in ("include_path", "dataset_paths"):
        evals.pop(key, None)
    raw["evals"] = evals
    raw["settings"] = {**(raw.get("settings") or {}), "output_dir": str(output_dir)}
    return parse_config(raw, output_dir / "config.yml")


def rederive(folder: Path) -> tuple[Profile, str]:
    """The profile computed again from `folder`'s documents.tar.xz and config.yml alone, in a temporary outputs
    tree removed after, and the ais.csv text it writes."""
    from benchprof.profile.report import write_tables
    from benchprof.stages.profile_scores import load_scores

    archive = folder / DOCUMENTS
    if not archive.is_file():
        raise BenchprofError(f"{archive}: no per-document scores to re-derive the profile from")
    with tempfile.TemporaryDirectory(prefix="benchprof-rederive-") as root:
        cfg = folder_config(folder, Path(root))
        spec = cfg.models[0]
        unpack_documents(archive, Path(root) / spec.tag)
        profile = load_scores(cfg, spec.tag, progress=False)
        layout = Layout(Path(root), spec.tag)
        write_tables(profile, layout)
        return profile, (layout.profile_dir / "ais.csv").read_text(encoding="utf-8")


def main(*folders: str) -> None:
    """Re-derive each profile folder's ais.csv from its documents.tar.xz and config.yml alone, and say whether it
    equals the ais.csv the folder keeps (exit 1 when one does not: the rows that differ are named).

    Arguments:
        folders: profile folders holding documents.tar.xz, config.yml and ais.csv (docs/results/profile-*; an
            outputs/<model>/profile folder once its config is copied in as config.yml).
    """
    if not folders:
        raise BenchprofError("name at least one profile folder holding documents.tar.xz and config.yml")
    differ = []
    for name in folders:
        folder = Path(name)
        kept = (folder / "ais.csv").read_text(encoding="utf-8") if (folder / "ais.csv").is_file() else ""
        _, text = rederive(folder)
        if text == kept:
            print(f"{folder}: ais.csv re-derived from {DOCUMENTS} alone: identical ({text.count(chr(10)) - 1} rows)")
            continue
        old, new = kept.splitlines(), text.splitlines()
        changed = sum(a != b for a, b in zip(old, new)) + abs(len(old) - len(new))
        print(f"{folder}: ais.csv re-derived from {DOCUMENTS} differs from the kept one in {changed} line(s)")
        differ.append(str(folder))
    if differ:
        raise BenchprofError(f"ais.csv not re-derived identically: {', '.join(differ)}")
