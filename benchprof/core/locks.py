"""Locks: one command at a time in a model's outputs folder, one process at a time on one job.

A lock is a file held with flock(2): the kernel (or the NFS server, by lease) releases it when its
process dies however it dies, so no killed run's lock is ever judged stale by guesswork (a pid
given to a later process, a host that never comes back). The file also records its holder (pid,
host, command, start), for the message a second command gets and for the processes a command
starts, which share its locks.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchprof import BenchprofError
from benchprof.core.layout import lock_path
from benchprof.core.storage import link_error, make_folder, shared_mode, write_error

LOCK_HOLDER = "BENCHPROF_LOCK_HOLDER"  # the pid whose locks a child process (worker, rank) may share
_held: dict[Path, int] = {}  # lock file -> the descriptor this process holds it through


@contextlib.contextmanager
def folder_lock(folder: Path, command: str) -> Iterator[None]:
    """One benchprof command at a time in a model's outputs folder (`.lock`, naming its holder's pid).

    A second command fails at once with one line naming the holder, so the work is done once; a killed
    command's lock is free the moment it dies. Re-entrant for this process and for the processes it starts
    (they inherit BENCHPROF_LOCK_HOLDER), so `run` can call every stage. A folder or lock that cannot be
    written is one BenchprofError line.
    """
    folder = Path(folder)
    lock = lock_path(folder)
    created = [p for p in [folder, *folder.parents] if not p.exists()]  # removed again if left empty
    make_folder(folder)
    try:
        holder = _take_lock(lock, command)
        if holder is not None and not _ours(holder):
            raise BenchprofError(
                f"{folder}: in use by pid {holder.get('pid')} on {holder.get('host')} ({holder.get('command')}, "
                f"since {holder.get('started')}); wait for it to finish or stop it, then rerun"
            )
    except BaseException:
        _remove_empty(created)
        raise
    if holder is not None:  # ours already (an outer command of this run holds it)
        yield
        return
    previous = os.environ.get(LOCK_HOLDER)
    os.environ[LOCK_HOLDER] = str(os.getpid())
    try:
        yield
    finally:
        _release(lock)
        _remove_empty(created)
        if previous is None:
            os.environ.pop(LOCK_HOLDER, None)
        else:
            os.environ[LOCK_HOLDER] = previous


def holds_folder_lock(folder: Path) -> bool:
    """Whether this process (or the command that started it) holds `folder`'s lock (folder_lock)."""
    holder = _holder(lock_path(Path(folder)))
    return holder is not None and _ours(holder) and _locked(lock_path(Path(folder)))


@contextlib.contextmanager
def job_lock(lock: Path, command: str) -> Iterator[bool]:
    """One process at a time on one job (an evaluation): True while this process holds `lock`, False when
    another live process does (the caller leaves the job to it)."""
    lock = Path(lock)
    make_folder(lock.parent)
    if _take_lock(lock, command) is not None:
        yield False
        return
    try:
        yield True
    finally:
        _release(lock)


def _take_lock(lock: Path, command: str) -> dict[str, Any] | None:
    """Hold `lock` for this process and return None, or return the record of the live process holding it."""
    while True:
        try:  # never through a link: it would put the lock record into a file outside the outputs tree
            fd = os.open(lock, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, shared_mode())
        except OSError as err:  # a read-only or full disk, a file in the folder's place
            raise (link_error(lock) if err.errno == errno.ELOOP else write_error(lock, err)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return _wait_for_record(lock)
        except OSError as err:  # a file system without locks
            os.close(fd)
            raise write_error(lock, err) from None
        try:
            same = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # its last holder removed the file between our open and our flock: lock the new one
            os.close(fd)
            continue
        record = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": command,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        try:
            os.ftruncate(fd, 0)
            with os.fdopen(os.dup(fd), "w") as f:  # the lock stays with fd; this copy only writes
                json.dump(record, f)
        except OSError as err:
            _held[lock] = fd
            _release(lock)
            raise write_error(lock, err) from None
        _held[lock] = fd
        return None


def _release(lock: Path) -> None:
    """Remove the lock file while still holding it, then let go (a waiter that opened the old file sees it
    is gone and locks a new one)."""
    fd = _held.pop(lock, None)
    if fd is None:
        return
    with contextlib.suppress(OSError):
        os.unlink(lock)
    os.close(fd)


def _holder(lock: Path) -> dict[str, Any] | None:
    try:
        record = json.loads(lock.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("pid") else None


def _wait_for_record(lock: Path) -> dict[str, Any]:
    """The record of a lock someone holds; a holder that has just taken it may not have written it yet."""
    for _ in range(20):
        record = _holder(lock)
        if record is not None:
            return record
        time.sleep(0.05)
    return {"pid": "?", "host": "?", "command": "?", "started": "?"}


def _locked(lock: Path) -> bool:
    """Whether some process holds `lock` now (a lock file left by a killed process is not held)."""
    if lock in _held:
        return True
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def _ours(holder: dict[str, Any]) -> bool:
    mine = {str(os.getpid()), os.environ.get(LOCK_HOLDER, "")} - {""}
    return str(holder.get("pid")) in mine and holder.get("host") == socket.gethostname()


def _remove_empty(created: list[Path]) -> None:
    """Remove the folders a command created, where it left them empty (a command that failed before writing
    anything leaves no folders)."""
    for path in created:
        with contextlib.suppress(OSError):
            path.rmdir()
