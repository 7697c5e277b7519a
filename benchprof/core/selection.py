"""A command line's narrowing of the config's lists (`--ability`, `--k`, `--benchmark`, ...): `select` keeps the
values given, `listed` splits a comma-separated option. A value that the config does not list fails naming the flag,
except a new k: `with_new_k` adds it to the run's k values, so that `extract --k 0.01024` works at that k.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from benchprof import BenchprofError
from benchprof.core.config import Config
from benchprof.core.layout import shown, shown_path
from benchprof.core.options import did_you_mean

# a command-line narrowing such as --ability or --k: one value, a list, or "a,b"; None for all
Selection = str | int | float | Sequence[str | int | float] | None
T = TypeVar("T")


def listed(value: object) -> list[str]:
    """A comma-separated command-line option as a list of its non-empty items (fire reads 1,2,3 as a tuple)."""
    items = value if isinstance(value, (tuple, list)) else str(value).split(",")
    return [str(x).strip() for x in items if str(x).strip()]


def select(given: Selection, known: Sequence[T], flag: str, cast: Callable[[Any], T] = str) -> list[T]:  # type: ignore[assignment]
    """Narrow `known` to the values given on the command line (one value, a list or 'a,b').

    Raises BenchprofError naming the flag for a value that is not in `known` or is given twice, or for a command line's
    empty selection (`--k=`, `--ability ,`), which would otherwise do nothing and succeed. An empty list
    from Python selects none on purpose (`evaluate(cfg, k=[])`: the original model only).
    """
    if given is None:
        return list(known)
    values: list[str | int | float]
    if isinstance(given, str):
        values = [v.strip() for v in given.split(",") if v.strip()]
    elif isinstance(given, (list, tuple)):
        values = list(given)
        if not values:
            return []
    else:
        values = [given]  # type: ignore[list-item]  # one number
    if not values:
        raise BenchprofError(f"{flag}: an empty selection; leave {flag} out for all ({', '.join(map(str, known))})")
    out: list[T] = []
    for raw in values:
        try:
            value = cast(raw)
        except ValueError:
            raise BenchprofError(f"{flag}: {shown(raw)} is not valid") from None
        if value not in known:
            raise BenchprofError(
                f"{flag}: {shown(value)} is not one of {', '.join(map(str, known))}{did_you_mean(value, known)}"
            )
        if value in out:  # each value names work to do once: a repeat would run it twice, or count it twice
            raise BenchprofError(f"{flag}: {shown(value)} is given twice")
        out.append(value)
    return out


def with_new_k(cfg: Config, given: Selection) -> tuple[Config, list[float]]:
    """(`cfg` with each --k value that settings.k_values does not list appended to it, those values).

    extract, damage and evaluate then work at a new k (`benchprof extract config.yml --k 0.01024`) as if the config
    listed it; a region's files do not depend on the other k values, so they stay current once the config lists it.
    `status` and `aggregate` read the config's own list. A value that is not a number in (0, 1) fails naming --k.
    """
    new: list[float] = []
    for raw in listed(given) if given is not None else []:
        try:
            value = float(raw)
        except ValueError:
            raise BenchprofError(f"--k: {shown(raw)} is not a number") from None
        if not 0.0 < value < 1.0:
            raise BenchprofError(f"--k: {shown(value)} must lie in (0, 1), a fraction of all parameters")
        if value not in cfg.settings.k_values and value not in new:
            new.append(value)
    if not new:
        return cfg, []
    settings = dataclasses.replace(cfg.settings, k_values=[*cfg.settings.k_values, *new])
    return dataclasses.replace(cfg, settings=settings), new


def new_k_note(stage: str, cfg: Config, new: list[float]) -> str:
    """The line a stage prints after working at k values its config does not list."""
    values = ", ".join(f"{k:g}" for k in new)
    return f"{stage}: k {values} is not in settings.k_values of {shown_path(cfg.path)}: add it there to aggregate it"
