"""Atomic writes and manifests: no stage ever leaves or reads a half-written file.

A file is written to a temporary name in its own folder and renamed into place; a stage writes its
manifest last, so a folder whose manifest matches the current inputs is complete.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import hashlib
import io
import json
import math
import os
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchprof import BenchprofError
from benchprof.core.layout import Output, format_k, manifest_path

if TYPE_CHECKING:
    import torch
    from safetensors import safe_open as SafeOpen  # noqa: N812

MANIFEST_VERSION = 1
# errors that mean "this file cannot be written here" (disk full, quota, read-only, permissions)
WRITE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG, errno.EIO}


def _why(path: Path, err: Exception) -> str:
    """Why `path` could not be written, in a few words (a file where a folder should be: which)."""
    text = str(err).strip()
    why = getattr(err, "strerror", None) or (text.splitlines()[0] if text else type(err).__name__)
    if isinstance(err, OSError) and err.errno in (errno.ENOTDIR, errno.EEXIST):
        blocker = next((p for p in [Path(path), *Path(path).parents] if p.exists() and not p.is_dir()), None)
        why = f"{blocker} is a file, not a folder" if blocker is not None else why
    if isinstance(err, OSError) and err.errno == errno.EISDIR:
        why = f"{path} is a folder, not a file"
    return str(why)


def write_error(path: Path, err: Exception) -> BenchprofError:
    """One line naming the file that could not be written, and why."""
    return BenchprofError(f"{path}: cannot write ({_why(path, err)}); no partial file left; rerun to resume")


def link_error(path: Path) -> BenchprofError:
    """One line refusing to write through a link: a link in the outputs tree could send a lock, a log or a record
    to a file outside it."""
    return BenchprofError(
        f"{path}: a link; benchprof writes no file through a link in its outputs tree (remove it, or put a plain "
        "file in its place)"
    )


def open_for_append(path: Path, readable: bool = False) -> int:
    """A file descriptor appending to `path` (created following the umask), never through a link (link_error);
    any other failure is one write_error line."""
    flags = os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | (os.O_RDWR if readable else os.O_WRONLY)
    try:
        return os.open(path, flags, shared_mode())
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise link_error(path) from None
        raise write_error(path, err) from None


def writable_folder(folder: Path) -> None:
    """Refuse, in one write_error line, a folder that cannot be made or written: the nearest part of it that exists
    is a file, or a folder this process may not write. Checked before work whose files are written only at its end
    (a stage's log, when its model folder does not exist yet)."""
    existing = next(p for p in [Path(folder), *Path(folder).parents] if p.exists())
    if not existing.is_dir():
        raise write_error(folder, NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR)))
    if not os.access(existing, os.W_OK | os.X_OK):
        raise write_error(folder, PermissionError(errno.EACCES, os.strerror(errno.EACCES)))


def make_folder(folder: Path) -> None:
    """`mkdir -p folder`; a failure (a file in the way, a read-only or full disk) is one BenchprofError line."""
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise write_error(folder, err) from None


def shared_mode(directory: bool = False) -> int:
    """The mode a new file (or folder) gets under the process's umask: 0644 (0755) under umask 022."""
    umask = os.umask(0)
    os.umask(umask)
    return (0o777 if directory else 0o666) & ~umask


TEMP_SUFFIX = ".benchprof.tmp"  # every temporary name benchprof writes ends so; remove_temps removes no other


def temp_affixes(path: Path) -> tuple[str, str]:
    """(prefix, suffix) of mkstemp's or mkdtemp's temporary of `path`, made beside it: ".<name>.<random>" +
    TEMP_SUFFIX, a name no user file has by chance (a user's ".X.Y.tmp" is not one)."""
    return f".{Path(path).name}.", TEMP_SUFFIX


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it onto `path` only if the block succeeds.

    On any failure (disk full included) the temporary file is removed and `path` keeps its old
    content, or stays absent; a write error becomes one BenchprofError line naming `path`.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        prefix, suffix = temp_affixes(path)
        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=path.parent)
        os.close(fd)
    except OSError as err:  # nothing but the folder is touched here: any failure is one of writing
        raise write_error(path, err) from err
    try:
        yield Path(tmp)
        os.chmod(tmp, shared_mode())  # mkstemp makes 0600; outputs are for the whole group to read
        os.replace(tmp, path)
    except OSError as err:
        if err.errno in WRITE_ERRORS or (err.errno == errno.EISDIR and Path(path).is_dir()):  # a folder in its place
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


def csv_cell(value: object, digits: int | None = None) -> str:
    """One CSV cell: empty for None and NaN, true/false, floats by repr (exact) or to `digits` significant digits."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return repr(value) if digits is None else f"{value:.{digits}g}"
    return str(value)


def write_csv(path: Path, columns: Sequence[str], rows: Iterable[Mapping[str, Any]], digits: int | None = None) -> None:
    """A CSV file of `columns`, one line per row (atomic write, following the umask); cells by `csv_cell`,
    a column named k as a plain decimal (format_k)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([format_k(row[c]) if c == "k" else csv_cell(row[c], digits) for c in columns])
    write_text(path, buffer.getvalue())


RECORD_CHECK = "_check"  # in each line of an append-only record: the hash of the line's other keys


def append_record(path: Path, record: Mapping[str, Any]) -> None:
    """Append one self-verifying line to a JSON-lines record (the record and RECORD_CHECK, the hash of its content),
    flushed and synced: a kill loses at most the line being written. A line a failed append cut short is ended
    first, so that it is dropped on read (read_records) and never glued to this one. Never through a link."""
    line = json.dumps({**record, RECORD_CHECK: value_hash(dict(record))}) + "\n"
    fd = open_for_append(path, readable=True)
    try:
        size = os.fstat(fd).st_size
        ended = size == 0 or os.pread(fd, 1, size - 1) == b"\n"
        data = memoryview((b"" if ended else b"\n") + line.encode())
        while data:  # a write may stop short (a size limit reached): the rest then raises why
            data = data[os.write(fd, data) :]
        os.fsync(fd)
    except OSError as err:
        raise BenchprofError(
            f"{path}: cannot append ({_why(path, err)}); a line cut short is dropped when read; rerun to resume"
        ) from None
    finally:
        os.close(fd)


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines file append_record wrote, in order, each line verified against its own hash:
    a partial, edited or foreign line is dropped (its work is redone), never read as a record."""
    if not Path(path).is_file():
        return []
    records = []
    for line in Path(path).read_bytes().decode("utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and record.pop(RECORD_CHECK, None) == value_hash(record):
            records.append(record)
    return records


def read_csv(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV file write_csv wrote, each a dict of column -> cell text."""
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_json(path: Path) -> Any:
    """Read a JSON file; a corrupt one raises ValueError naming the file."""
    try:
        return json.loads(Path(path).read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None


def save_tensors(path: Path, tensors: Mapping[str, torch.Tensor], metadata: dict[str, str] | None = None) -> None:
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


def open_tensors(path: Path, kind: str = "file", missing_hint: str = "") -> SafeOpen:
    """A safetensors file opened for reading on the CPU (use as a context manager to close it).

    A missing or unreadable file raises one BenchprofError line naming it and its `kind` ("mask");
    `missing_hint` says how to make a missing one (e.g. "run `benchprof extract` first").
    """
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        noun = "file" if kind == "file" else f"{kind} file"
        raise BenchprofError(f"{path}: {noun} not found" + (f" ({missing_hint})" if missing_hint else ""))
    try:
        return safe_open(str(path), framework="pt", device="cpu")
    except Exception as err:  # safetensors raises its own error types for a bad header
        raise BenchprofError(f"{path}: not a readable safetensors {kind} ({str(err).splitlines()[0]})") from None


def read_tensors(
    path: Path, kind: str = "file", missing_hint: str = ""
) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Every tensor of a safetensors file, and its metadata."""
    with open_tensors(path, kind, missing_hint) as handle:
        try:
            tensors = {name: handle.get_tensor(name) for name in handle.keys()}
        except Exception as err:  # a truncated file fails here, not at open
            raise BenchprofError(f"{path}: not a readable safetensors {kind} ({str(err).splitlines()[0]})") from None
        return tensors, dict(handle.metadata() or {})


def tensors_metadata(path: Path, kind: str = "file", missing_hint: str = "") -> dict[str, str]:
    """A safetensors file's metadata only (the tensors are not read)."""
    with open_tensors(path, kind, missing_hint) as handle:
        return dict(handle.metadata() or {})


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


def stat_key(path: Path) -> str:
    """What the file system says about a file's current bytes: inode, size, mtime and ctime in ns.

    Any write, truncation, rename or `os.utime` sets ctime to now, and no user call can set it back,
    so while this key is unchanged the bytes a hash was taken of are still the bytes on disk. A copy
    or a move gets a new key (and is hashed again, not redone). The one gap is the kernel's clock
    tick (a few ms): an edit in the same tick as the hash would keep the key.
    """
    st = Path(path).stat()
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def content_record(path: Path) -> dict[str, Any]:
    """{size, hash, stat} of a file as a manifest records it: a sha256 of every byte, and the stat_key
    it was taken under, so that `matches_record` can trust the hash without reading the file again."""
    before = stat_key(path)
    digest = file_hash(path)
    record: dict[str, Any] = {"size": Path(path).stat().st_size, "hash": digest}
    if stat_key(path) == before:  # not written to while it was read
        record["stat"] = before
    return record


def matches_record(path: Path, recorded: Any) -> bool:
    """Whether the file on disk is the one `recorded` (a content_record) describes: same size and either
    the same stat_key (untouched since it was hashed) or, when the key moved (copied, moved, touched,
    edited), the same full hash. A same-size edit with the mtime put back changes ctime, so it is hashed
    and seen."""
    if not isinstance(recorded, dict) or not Path(path).is_file():
        return False
    if Path(path).stat().st_size != recorded.get("size"):
        return False
    if recorded.get("stat") is not None and recorded["stat"] == stat_key(path):
        return True
    if "sampled_hash" in recorded:  # an older manifest's record of a file over 64 MiB: checked as it was then
        return sampled_hash(path) == recorded["sampled_hash"]
    return "hash" in recorded and file_hash(path) == recorded["hash"]


def sampled_hash(path: Path) -> str:
    """The hash older manifests recorded for files over 64 MiB: 64 blocks of 64 KiB spread over the file.
    Read only to judge those records (a same-size edit between the blocks passes it; new records hash
    every byte)."""
    size = Path(path).stat().st_size
    h = hashlib.sha256()
    block = 64 << 10
    with open(path, "rb") as f:
        for i in range(64):
            f.seek((size - block) * i // 63)
            h.update(f.read(block))
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


def folder_files(directory: Path) -> list[Path]:
    """The output files of a stage folder: every visible file but its manifest (temporaries start with '.')."""
    manifest = manifest_path(directory)
    return sorted(p for p in Path(directory).iterdir() if p.is_file() and not p.name.startswith(".") and p != manifest)


def write_manifest(
    directory: Path,
    inputs: dict[str, Any],
    extra: dict[str, Any] | None = None,
    started: float | None = None,
    files: list[Path] | None = None,
) -> dict[str, Any]:
    """Record what produced `directory`: its inputs (whose hash decides staleness), the size and content hash of
    every file in it, or of `files` only (what the command wrote there; ownership.py), checked before the work is
    trusted again, versions, time."""
    listed = folder_files(directory) if files is None else sorted(files)
    manifest = {
        "manifest_version": MANIFEST_VERSION,
        "inputs": inputs,
        "inputs_hash": value_hash(inputs),
        "files": {p.name: content_record(p) for p in listed},
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
    """Remove the temporary files (and checkpoint folders) a killed run left in `directory`, only those for `name`
    if given: names benchprof wrote (temp_affixes), never another file that starts with a dot. Call it only where
    no other process writes at the same time (a stage's own folder, or one job's files)."""
    import glob
    import shutil

    for tmp in Path(directory).glob(f".{glob.escape(name) if name else '*'}.*{TEMP_SUFFIX}"):
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)


def clear_manifest(directory: Path) -> None:
    """Remove a folder's manifest before its files are rewritten: a run killed halfway then leaves
    no manifest that could vouch for a mix of old and new files (even if the config is reverted).
    Temporary files an earlier killed run left there go too."""
    manifest_path(directory).unlink(missing_ok=True)
    remove_temps(directory)


def read_manifest(directory: Path) -> dict[str, Any] | None:
    """A stage folder's manifest.json, or None when absent or corrupt (the work is then redone)."""
    return _read_record(manifest_path(directory))


def _read_record(path: Path) -> dict[str, Any] | None:
    if not Path(path).is_file():
        return None
    try:
        record = read_json(path)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def recorded_inputs(output: Output) -> dict[str, Any] | None:
    """The inputs an output's manifest (or result JSON) says it was computed from; None if it has none."""
    record = _read_record(output.manifest)
    inputs = record.get("inputs") if record else None
    return inputs if isinstance(inputs, dict) else None


def damaged_files(output: Output, record: dict[str, Any]) -> list[str]:
    """The files `record` (an output's manifest) vouches for that are now missing, truncated or rewritten.

    Every recorded file is checked, beside the manifest, whether or not the Output names it: a
    checkpoint's weights are known only from its manifest. Files a manifest did not record (older
    manifests) are not checked."""
    recorded = record.get("files")
    if not isinstance(recorded, dict):
        return []
    folder = output.manifest.parent
    return sorted(name for name, entry in recorded.items() if not matches_record(folder / name, entry))


def is_current(output: Output, inputs: dict[str, Any]) -> bool:
    """The skip check of every stage: `judge` finds the output done (its manifest was written from exactly
    these inputs, all its files exist and they are the files it recorded), so `benchprof status` and the
    stages never disagree on what is done."""
    if judge(output, inputs)[0] != "done":
        return False
    refresh_stat_keys(output)
    return True


def refresh_stat_keys(output: Output) -> None:
    """Record the current stat_key of each file of a done output whose key moved (touched, copied, moved,
    chmod) while its bytes did not, and the full hash of a file an older manifest recorded by sampled blocks:
    `judge` has just found them the recorded ones, and without this a touched 16 GB checkpoint was hashed again
    on every run. Settled files only (see modeling's racy-clean rule); the stages call it through is_current,
    `benchprof status` never (it writes nothing)."""
    record = _read_record(output.manifest)
    files = record.get("files") if record else None
    if not isinstance(record, dict) or not isinstance(files, dict):
        return
    folder, changed = output.manifest.parent, False
    for name, entry in files.items():
        path = folder / name
        if isinstance(entry, dict) and "sampled_hash" in entry and "hash" not in entry and path.is_file():
            # an older manifest's sampled record, just found matching: from now on the whole file is recorded,
            # so an edit between the sampled blocks made after this check is seen (one before it cannot be)
            files[name], changed = content_record(path), True
            continue
        if not isinstance(entry, dict) or "hash" not in entry or not path.is_file():
            continue
        key = stat_key(path)
        if entry.get("stat") != key and time.time_ns() - path.stat().st_ctime_ns > 2_000_000_000:
            entry["stat"], changed = key, True
    if changed:
        with contextlib.suppress(BenchprofError):  # a read-only outputs folder: hashed again next time
            write_json(output.manifest, record)


# Keys older versions recorded among a stage's inputs that are no longer inputs of it: a manifest that
# has one is not stale for that (importance recorded the model's tag, which names a folder only).
RETIRED_INPUTS = ("model",)


def changed_keys(recorded: dict[str, Any] | None, expected: dict[str, Any], ignore: tuple[str, ...] = ()) -> list[str]:
    """The input keys whose recorded value differs from the one the config gives now."""
    if not isinstance(recorded, dict):
        return ["manifest"]
    expected = json.loads(json.dumps(expected, default=str))  # as recorded: tuples are lists, keys strings
    keys = sorted(set(recorded) | set(expected))
    retired = [k for k in RETIRED_INPUTS if k not in expected]
    return [k for k in keys if k not in ignore and k not in retired and recorded.get(k) != expected.get(k)]


def judge(
    output: Output, expected: dict[str, Any] | None, upstream: str = "", ignore: tuple[str, ...] = ()
) -> tuple[str, str]:
    """(state, why) of one output for `benchprof status`: done, stale (and why) or pending.

    `expected` are the inputs the config gives now (None: they cannot be computed), `upstream` the
    reason an earlier stage's output is not done, `ignore` input keys status cannot know without
    loading the model.
    """
    recorded = recorded_inputs(output)
    if recorded is None:
        partial = [f for f in output.files if f.is_file()]
        return "pending", ("files without a manifest (an interrupted run)" if partial else "")
    if upstream:
        return "stale", upstream
    if expected is None:
        return "stale", "its inputs cannot be computed"
    changed = changed_keys(recorded, expected, ignore)
    if changed:
        return "stale", "changed: " + ", ".join(changed)
    record = _read_record(output.manifest) or {}
    listed = record.get("files")
    folder = output.manifest.parent
    missing = [f.name for f in output.files if not f.is_file()]
    if isinstance(listed, dict):  # a checkpoint's weights are known only from its manifest
        missing += [name for name in sorted(listed) if name not in missing and not (folder / name).is_file()]
    if missing:
        return "stale", "missing " + ", ".join(missing)
    damaged = damaged_files(output, record)
    if damaged:
        return "stale", "damaged " + ", ".join(damaged) + " (not the file its manifest recorded)"
    return "done", ""
