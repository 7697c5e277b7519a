"""Stage `data`: not implemented yet (issue 3)."""

from __future__ import annotations

from typing import Any, Optional

from . import BenchprofError


def data(config: str = "config.yml", ability: Optional[str] = None, out: Optional[str] = None,
         train_size: Optional[int] = None, test_size: Optional[int] = None, seed: Optional[int] = None,
         force: bool = False) -> None:
    """Generate the ability datasets: <dir>/<Ability>/{train,test}.jsonl.

    Arguments:
        config: path of config.yml.
        ability: only this ability (or a comma-separated list); default all in `datasets:`.
        out: output folder; default `data.dir` from the config.
        train_size: items in each train split; default `data.train_size`.
        test_size: items in each test split; default `data.test_size`.
        seed: generator seed; default `data.seed`. Same seed, byte-identical files.
        force: regenerate even when the files match the requested sizes and seed.
    """
    raise BenchprofError("benchprof data: not implemented yet (issue 3)")
