"""Stage `extract`: not implemented yet (issue 4)."""

from __future__ import annotations

from typing import Any, Optional

from . import BenchprofError


def extract(config: str = "config.yml", k: Any = None, ability: Optional[str] = None,
            model: Optional[str] = None, selection: Optional[str] = None, force: bool = False) -> None:
    """Regions per ability and k: top (n largest importance), bottom (n smallest), random (n uniform draws).

    n = floor(k * total parameters), chosen among eligible weights only.

    Arguments:
        config: path of config.yml.
        k: only these k values (one number or a comma-separated list); default settings.k_values.
        ability: only this ability (or a comma-separated list).
        model: only this model (name or tag).
        selection: exact (default: global ranking) or chunked (the authors' per-chunk approximation).
        force: recompute even when the manifest matches.
    """
    raise BenchprofError("benchprof extract: not implemented yet (issue 4)")
