"""A profile's per-document scores in one compact file, and ais.csv re-derived from it alone.

`documents.tar.gz` in the profile folder holds, byte for byte, every result JSON and samples file the profile
read (the original's and every variant's, each benchmark's), under their paths in the model's outputs folder:
the samples files are benchprof's own reduced form (document id, filter, each metric, the options'
log-likelihoods and lengths, the cluster), so the archive is what aggregate needs and nothing else. A committed
profile folder (docs/results/profile-*) keeps it beside ais.csv, so that anyone can resample it: `rederive`
unpacks it into an empty outputs tree and runs aggregate's own computation on it (profile_scores.load_scores),
with no model, mask or dataset.
"""

from __future__ import annotations

import tarfile
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from benchprof import BenchprofError
from benchprof.core.layout import Layout, Variant
from benchprof.core.storage import atomic_path

if TYPE_CHECKING:
    from benchprof.core.config import Config
    from benchprof.profile.rows import Profile

DOCUMENTS = "documents.tar.gz"


def profile_evaluations(layout: Layout, profile: Profile) -> list[Path]:
    """Every result JSON and samples file of the profile's evaluations that exists: the original's, then each
    variant's (ability, k, region), each benchmark's."""
    variants = [Variant()] + [
        Variant(a, k, r) for a in profile.abilities for k in profile.k_values for r in profile.regions
    ]
    files = []
    for variant in variants:
        for benchmark in profile.benchmarks:
            for path in (layout.eval_file(variant, benchmark), layout.samples_file(variant, benchmark)):
                if path.is_file():
                    files.append(path)
    return files


def write_documents(layout: Layout, profile: Profile) -> Path:
    """The profile folder's documents.tar.gz (written under a temporary name, then renamed): its evaluations'
    files, named by their path under the model's outputs folder, with fixed times and owners so that the same
    evaluations give the same bytes."""
    path = layout.profile_dir / DOCUMENTS

    def normalised(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.mtime, info.uid, info.gid, info.uname, info.gname, info.mode = 0, 0, 0, "", "", 0o644
        return info

    with atomic_path(path) as temp:
        with temp.open("wb") as raw:
            import gzip

            with (
                gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as zipped,
                tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as archive,
            ):
                for file in profile_evaluations(layout, profile):
                    archive.add(file, arcname=file.relative_to(layout.model_dir).as_posix(), filter=normalised)
    return path


def unpack_documents(archive: Path, model_dir: Path) -> int:
    """The archive's files under `model_dir` (which must be empty or absent); refused in one line when the
    archive is unreadable or names a path outside it. Returns the number of files."""
    try:
        with tarfile.open(archive, "r:gz") as handle:
            members = handle.getmembers()
            if any(not m.isfile() for m in members):
                raise BenchprofError(f"{archive}: holds something other than plain files")
            handle.extractall(model_dir, filter="data")  # "data" refuses absolute paths and ../ escapes
    except (OSError, tarfile.TarError) as err:
        raise BenchprofError(f"{archive}: not a readable documents archive ({err})") from err
    return len(members)


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
    """The profile computed again from `folder`'s documents.tar.gz and config.yml alone, in a temporary outputs
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
    """Re-derive each profile folder's ais.csv from its documents.tar.gz and config.yml alone, and say whether it
    equals the ais.csv the folder keeps (exit 1 when one does not: the rows that differ are named).

    Arguments:
        folders: profile folders (outputs/<model>/profile, docs/results/profile-*) holding documents.tar.gz,
            config.yml and ais.csv.
    """
    if not folders:
        raise BenchprofError("name at least one profile folder holding documents.tar.gz and config.yml")
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
