"""Values benchprof keeps between runs in the user's cache folder (XDG_CACHE_HOME or ~/.cache, benchprof/), each
under a file named by the hash of everything it was computed from: a model's facts for the preflight, lm-eval's task
index. Another key is another file, so a kept value is never stale; an unreadable one is computed again."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from benchprof import BenchprofError
from benchprof.core.storage import value_hash, write_json


def user_cache_file(name: str, key: Any) -> Path:
    """Where benchprof keeps a value computed from `key` alone: `<name>-<hash of key>.json` in the user's cache
    folder (XDG_CACHE_HOME or ~/.cache, benchprof/). Another key is another file, never a stale value."""
    folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "benchprof"
    return folder / f"{name}-{value_hash(key)}.json"


def read_cached(name: str, key: Any) -> Any:
    """The value keep_cached kept for (name, key); None when there is none or it cannot be read."""
    with contextlib.suppress(OSError, ValueError):
        return json.loads(user_cache_file(name, key).read_text())
    return None


def keep_cached(name: str, key: Any, value: Any) -> None:
    """Keep `value` for read_cached; a cache folder that cannot be written is skipped (computed again next time)."""
    path = user_cache_file(name, key)
    with contextlib.suppress(OSError, BenchprofError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, value)
