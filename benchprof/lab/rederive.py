"""A profile folder's ais.csv re-derived from its per-document scores alone (profile/documents.py's
documents.tar.xz) and its config.yml: unpacked into an empty outputs tree, scored by aggregate's own computation
(profile_scores.load_scores), written by its own writer, and compared with the ais.csv the folder keeps.

.venv/bin/python scripts/rederive_profile.py docs/results/profile-*   (a folder of outputs/<model>/profile once
its config.yml is copied in beside ais.csv, as a committed profile folder keeps it)
.venv/bin/python scripts/rederive_profile.py --compare OUT FOLDER FOLDER...   (`benchprof compare` over the folders)
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchprof import BenchprofError
from benchprof.core.layout import Layout
from benchprof.profile.documents import DOCUMENTS, unpack_documents

if TYPE_CHECKING:
    from benchprof.core.config import Config
    from benchprof.profile.rows import Profile


def _folder_raw(folder: Path, output_dir: Path) -> dict[str, Any]:
    """A profile folder's config.yml as a mapping, its outputs under `output_dir` (absolute) and what only
    evaluation reads (evals.include_path, evals.dataset_paths: paths on the machine that ran it) left out."""
    from benchprof.core.loader import read_yaml

    path = folder / "config.yml"
    if not path.is_file():
        raise BenchprofError(f"{path}: no config to re-derive the profile under")
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise BenchprofError(f"{path}: not a config (a YAML mapping of settings, models, datasets, ...)")
    evals = dict(raw.get("evals") or {})
    for key in ("include_path", "dataset_paths"):
        evals.pop(key, None)
    raw["evals"] = evals
    raw["settings"] = {**(raw.get("settings") or {}), "output_dir": str(output_dir.resolve())}
    return dict(raw)


def folder_config(folder: Path, output_dir: Path) -> Config:
    """A profile folder's config.yml as aggregate needs it, its outputs under `output_dir` (_folder_raw)."""
    from benchprof.core.loader import parse_config

    return parse_config(_folder_raw(folder, output_dir), output_dir / "config.yml")


def compare_folders(folders: list[Path], out: Path, plots: bool = True) -> None:
    """`benchprof compare` over profile folders instead of configs: each folder's documents.tar.xz unpacked under its
    config.yml into a temporary outputs tree (removed after), then stages.compare.compare_profiles over those trees
    (the archive is the record: there is no model to judge it by), with its paired tests where two models scored the
    same documents, writing `out`."""
    import yaml

    from benchprof.core.layout import CompareLayout
    from benchprof.core.loader import load_config
    from benchprof.stages.compare import compare_profiles, compared_configs

    if len(folders) < 2:
        raise BenchprofError("name at least two profile folders holding documents.tar.xz and config.yml")
    with tempfile.TemporaryDirectory(prefix="benchprof-compare-") as root:
        paths = []
        for i, folder in enumerate(folders):
            archive, tree = folder / DOCUMENTS, Path(root) / str(i)
            if not archive.is_file():
                raise BenchprofError(f"{archive}: no per-document scores to compare the profile from")
            raw = _folder_raw(folder, tree)
            tree.mkdir()
            (tree / "config.yml").write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
            paths.append(tree / "config.yml")
            unpack_documents(archive, tree / load_config(paths[-1]).models[0].tag)
        configs = compared_configs(load_config(paths[0]), ",".join(map(str, paths[1:])))
        compare_profiles(configs, CompareLayout(out.parent, out.name), None, plots, judged=False)


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


def main(*folders: str, compare: str = "", plots: bool = True, claims: bool = False) -> None:
    """Re-derive each profile folder's ais.csv from its documents.tar.xz and config.yml alone, and say whether it
    equals the ais.csv the folder keeps (exit 1 when one does not: the rows that differ are named). With --compare
    OUT: compare the folders' models instead, as `benchprof compare` compares configs (compare_folders), into OUT.
    With --claims: print the Claims of each folder's profile as this benchprof computes it (a re-analysis of a
    profile kept under an earlier rule), and compare nothing.

    Arguments:
        folders: profile folders holding documents.tar.xz, config.yml and ais.csv (docs/results/profile-*; an
            outputs/<model>/profile folder once its config is copied in as config.yml).
        compare: a folder to write the comparison of the folders' models into (profiles.csv, claims.csv,
            differences.csv, correlation.csv, compare.md, profiles.png).
        plots: with --compare, also draw profiles.png.
        claims: print each re-derived profile's Claims lines instead of comparing its ais.csv.
    """
    if compare:
        compare_folders([Path(f) for f in folders], Path(compare), plots=plots)
        return
    if not folders:
        raise BenchprofError("name at least one profile folder holding documents.tar.xz and config.yml")
    if claims:
        from benchprof.profile.claims import claim_lines

        for name in folders:
            profile, _ = rederive(Path(name))
            print("\n".join([f"{name}:"] + [f"- {line}" for line in claim_lines(profile)]))
        return
    for name in folders:  # every folder checked before the first is computed
        if not Path(name).is_dir():
            raise BenchprofError(f"{name}: no such folder")
        if not (Path(name) / "ais.csv").is_file():
            raise BenchprofError(f"{Path(name) / 'ais.csv'}: not found, nothing to compare the re-derived profile with")
    differ = []
    for name in folders:
        folder = Path(name)
        kept = (folder / "ais.csv").read_text(encoding="utf-8")
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
