"""A command line's narrowing of the config's lists (`--ability`, `--k`, `--benchmark`, ...): `select` keeps the
values given, `listed` splits a comma-separated option. A value that the config does not list fails naming the flag.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from benchprof import BenchprofError
from benchprof.core.layout import shown
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
