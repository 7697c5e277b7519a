"""A command's own folder (aggregate's profile, compare's --out): which command owns it, the files its manifest
listed, and the removal of its own earlier outputs that a new run no longer writes. A command records itself as
`command` in the manifest's extra keys (storage.write_manifest) and writes only into a folder that is empty or its own.
"""

from __future__ import annotations

from pathlib import Path

from benchprof.core.storage import read_manifest


def owned_by(directory: Path) -> str | None:
    """The command whose outputs a folder holds, from its manifest's `command` (None: no manifest, or one that names
    no command)."""
    record = read_manifest(directory)
    command = record.get("command") if record else None
    return command if isinstance(command, str) else None


def recorded_files(directory: Path) -> list[str]:
    """The names of the files a folder's manifest lists (read before clear_manifest, for remove_unwritten)."""
    record = read_manifest(directory)
    files = record.get("files") if record else None
    return sorted(files) if isinstance(files, dict) else []


def remove_unwritten(directory: Path, previous: list[str], written: list[Path]) -> list[str]:
    """Remove the files a folder's earlier manifest listed (`previous`) that this run did not write: a command's own
    outputs that it no longer produces (a plot turned off, an ability removed) never stay beside the new ones.
    Returns their names."""
    kept = {p.name for p in written}
    gone = [name for name in previous if name not in kept and "/" not in name and name != "manifest.json"]
    for name in gone:
        (Path(directory) / name).unlink(missing_ok=True)
    return gone
