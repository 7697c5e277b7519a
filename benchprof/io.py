"""Atomic writes and manifests: no stage ever leaves or reads a half-written file.

A file is written to a temporary name in its own folder and renamed into place; a stage writes its
manifest last, so a folder whose manifest matches the current inputs is complete.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Optional

from . import BenchprofError

MANIFEST_VERSION = 1
# errors that mean "this file cannot be written here" (disk full, quota, read-only, permissions)
WRITE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG, errno.EIO}


def write_error(path: Path, err: Exception) -> BenchprofError:
    """One line naming the file that could not be written, and why."""
    text = str(err).strip()
    why = getattr(err, "strerror", None) or (text.splitlines()[0] if text else type(err).__name__)
    return BenchprofError(f"{path}: cannot write ({why}); no partial file left; rerun to resume")


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it onto `path` only if the block succeeds.

    On any failure (disk full included) the temporary file is removed and `path` keeps its old
    content, or stays absent; a write error becomes one BenchprofError line naming `path`.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
    except OSError as err:
        if err.errno in WRITE_ERRORS:
            raise write_error(path, err) from err
        raise
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except OSError as err:
        if err.errno in WRITE_ERRORS:
            raise write_error(path, err) from err
        raise
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json(path: Path, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def read_json(path: Path) -> Any:
    """Read a JSON file; a corrupt one raises ValueError naming the file."""
    try:
        return json.loads(Path(path).read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None


def save_tensors(path: Path, tensors: Mapping[str, Any], metadata: Optional[dict[str, str]] = None) -> None:
    """safetensors.torch.save_file, atomically, with a canonical header (same tensors, same bytes)."""
    from safetensors.torch import save_file

    with atomic_path(path) as tmp:
        try:
            save_file(dict(tensors), str(tmp), metadata=metadata)
        except (OSError, BenchprofError):
            raise
        except Exception as err:  # safetensors reports an I/O failure (disk full) as its own error type
            raise write_error(path, err) from err
        sort_header(tmp)


def sort_header(path: Path) -> None:
    """Rewrite a safetensors header with sorted keys, in place.

    safetensors writes the metadata in hash-map order, which changes from process to process; the
    files' hashes identify them downstream (evaluate records each mask's hash), so a rerun must
    write the same bytes. Sorting keeps the header's length, so only the header is rewritten.
    """
    with open(path, "r+b") as f:
        size = int.from_bytes(f.read(8), "little")
        header = f.read(size)
        text = json.dumps(json.loads(header), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        if len(text) <= size:
            f.seek(8)
            f.write(text + b" " * (size - len(text)))  # safetensors pads its header with spaces too


def file_hash(path: Path, chunk: int = 1 << 20) -> str:
    """sha256 of a file's bytes (first 16 hex digits are plenty to tell inputs apart)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()[:16]


def value_hash(obj: Any) -> str:
    """A stable hash of a JSON-serialisable value."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def versions() -> dict[str, str]:
    """Versions of the packages whose behaviour the outputs depend on."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("benchprof", "torch", "transformers", "lm_eval", "safetensors"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def write_manifest(directory: Path, inputs: dict[str, Any], extra: Optional[dict[str, Any]] = None,
                   started: Optional[float] = None) -> dict[str, Any]:
    """Record what produced `directory`: its inputs (whose hash decides staleness), versions, time."""
    from .layout import manifest_path

    manifest = {
        "manifest_version": MANIFEST_VERSION,
        "inputs": inputs,
        "inputs_hash": value_hash(inputs),
        "versions": versions(),
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if started is not None:
        manifest["wall_seconds"] = round(time.time() - started, 3)
    if extra:
        manifest.update(extra)
    write_json(manifest_path(directory), manifest)
    return manifest


def remove_temps(directory: Path, name: str = "") -> None:
    """Remove the temporary files a killed run left in `directory` (only those for file `name` if given).

    Call it only where no other process writes at the same time (a stage's own folder, or one job's files).
    """
    import glob

    for tmp in Path(directory).glob(f".{glob.escape(name) if name else '*'}.*.tmp"):
        tmp.unlink(missing_ok=True)


def clear_manifest(directory: Path) -> None:
    """Remove a folder's manifest before its files are rewritten: a run killed halfway then leaves
    no manifest that could vouch for a mix of old and new files (even if the config is reverted).
    Temporary files an earlier killed run left there go too."""
    from .layout import manifest_path

    manifest_path(directory).unlink(missing_ok=True)
    remove_temps(directory)


def read_manifest(directory: Path) -> Optional[dict[str, Any]]:
    from .layout import manifest_path

    path = manifest_path(directory)
    if not path.is_file():
        return None
    try:
        return read_json(path)
    except ValueError:
        return None  # a corrupt manifest means the work is redone


def is_current(directory: Path, inputs: dict[str, Any], files: Iterable[Path] = ()) -> bool:
    """True when `directory` holds a manifest written from exactly these inputs (and `files` exist)."""
    manifest = read_manifest(directory)
    return (manifest is not None and manifest.get("inputs_hash") == value_hash(inputs)
            and all(Path(f).is_file() for f in files))
