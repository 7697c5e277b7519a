"""A profile's per-document scores in one compact file, and ais.csv re-derived from it alone.

`documents.tar.xz` in the profile folder holds, byte for byte, every result JSON and samples file the profile
read (the original's and every variant's, each benchmark's), under their paths in the model's outputs folder:
the samples files are benchprof's own reduced form (document id, filter, each metric, the options'
log-likelihoods and lengths, the cluster), so the archive is what aggregate needs and nothing else. A committed
profile folder (docs/results/profile-*) keeps it beside ais.csv, so that anyone can resample it: lab/rederive.py
unpacks it into an empty outputs tree and runs aggregate's own computation on it, with no model, mask or dataset.
"""

from __future__ import annotations

import lzma
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING

from benchprof import BenchprofError
from benchprof.core.layout import Layout, Variant
from benchprof.core.storage import atomic_path

if TYPE_CHECKING:
    from benchprof.profile.rows import Profile

DOCUMENTS = "documents.tar.xz"


def profile_evaluations(layout: Layout, profile: Profile) -> list[Path]:
    """Every result JSON and samples file of the profile's evaluations that exists: per benchmark, the original's,
    then each variant's (ability, k, region)."""
    variants = [Variant()] + [
        Variant(a, k, r) for a in profile.abilities for k in profile.k_values for r in profile.regions
    ]
    files = []
    for benchmark in profile.benchmarks:  # one benchmark's files side by side: xz finds what they repeat
        for variant in variants:
            for path in (layout.eval_file(variant, benchmark), layout.samples_file(variant, benchmark)):
                if path.is_file():
                    files.append(path)
    return files


def write_documents(layout: Layout, profile: Profile) -> Path:
    """The profile folder's documents.tar.xz (written under a temporary name, then renamed): its evaluations'
    files, named by their path under the model's outputs folder, with fixed times and owners so that the same
    evaluations give the same bytes. xz, not gzip: every variant's samples file of a benchmark repeats its
    documents' ids and hashes, which gzip's 32 KB window cannot see and xz's 8 MB one can (5.4× smaller on the
    Qwen claims run's 57 basic_arithmetic files: 1.9 MB against 10.3 MB)."""
    path = layout.profile_dir / DOCUMENTS

    def normalised(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.mtime, info.uid, info.gid, info.uname, info.gname, info.mode = 0, 0, 0, "", "", 0o644
        return info

    with atomic_path(path) as temp:
        with temp.open("wb") as raw:
            import lzma

            with (
                lzma.LZMAFile(raw, mode="wb", preset=6) as packed,
                tarfile.open(fileobj=packed, mode="w", format=tarfile.PAX_FORMAT) as archive,
            ):
                for file in profile_evaluations(layout, profile):
                    archive.add(file, arcname=file.relative_to(layout.model_dir).as_posix(), filter=normalised)
    return path


def unpack_documents(archive: Path, model_dir: Path) -> int:
    """The archive's files under `model_dir` (which must be empty or absent); refused in one line when the
    archive is unreadable or names a path outside it. Returns the number of files."""
    try:
        with tarfile.open(archive, "r:xz") as handle:
            members = handle.getmembers()
            if any(not m.isfile() for m in members):
                raise BenchprofError(f"{archive}: holds something other than plain files")
            handle.extractall(model_dir, filter="data")  # "data" refuses absolute paths and ../ escapes
    except (OSError, tarfile.TarError, EOFError, lzma.LZMAError) as err:  # a truncated or flipped .xz: EOF, LZMA
        raise BenchprofError(f"{archive}: not a readable documents archive ({err or type(err).__name__})") from err
    return len(members)
