"""A frontier scored again by the current scorer, held to the committed one it replaces
(docs/research/frontier.md#one-scorer): the same regions (by their neurons), and the old metric recomputed from the
new records' option log-likelihoods equal to the old records item by item, so that what moved is the metric and
nothing else (not the model, the items or the selection)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchprof import BenchprofError


def v1_acc_norm(logliks: list[list[float]], records: list[dict[str, Any]]) -> list[float]:
    """Scorer v1's acc_norm from each item's option log-likelihoods: divided by the characters of ' option'."""
    from benchprof.stages.choices import mc_metrics, option_chars

    with_space = [[n + 1 for n in item] for item in option_chars(records)]
    return [float(x) for x in mc_metrics(logliks, with_space, [int(r["label"]) for r in records])[1]]


def split_file(data_dir: Path, split: str) -> Path:
    """The items file of a frontier split: <ability>/test.jsonl, or <ability>/transfer.jsonl for its transfer split
    (abilities.split_of); refused in one line where the data folder lacks it."""
    from benchprof.abilities import split_of
    from benchprof.core.layout import data_file

    ability, kind = split_of(split) or (split, "test")
    path = data_file(data_dir / ability, kind)
    if not path.is_file():
        raise BenchprofError(f"{data_dir}: no items of split {split} ({path} not found)")
    return path


def rescore_check(new: str | Path, old: str | Path, data_dir: str | Path) -> dict[str, Any]:
    """Compare a frontier folder scored by the current scorer (`new`) with a scorer-v1 folder of the same plan
    (`old`), reading the test items from `data_dir` (<dir>/<split>/test.jsonl). Returns regions (of new), matched
    (same neurons in old), items, v1_differs (v1 recomputed from new's log-likelihoods against old's scores: 0
    when only the metric moved), v1_differs_by_split (the splits where it is not 0, so that a split whose items
    changed is told apart from a model that did), moved (new's acc_norm against old's) and moved_where_v1_agrees
    (the same over the splits where v1_differs is 0: what the metric alone moved).

    Arguments:
        new: the frontier folder scored again.
        old: the committed folder it replaces.
        data_dir: the abilities' data folder of the plan.
    """
    from collections import Counter

    from benchprof.stages.data import read_jsonl

    (fresh, dropped_new), (committed, dropped_old) = (_region_records(Path(f)) for f in (new, old))
    dropped = {str(new): dropped_new, str(old): dropped_old}
    if not fresh or any("loglik" not in r for r in fresh):
        raise BenchprofError(f"{new}: no records with their option log-likelihoods (scored before scorer v2?)")
    by_neurons = {tuple(sorted(r["neurons"])): r for r in committed}
    items: dict[str, list[dict[str, Any]]] = {}
    matched, scored, differs, moved = 0, 0, Counter[str](), Counter[str]()
    for record in fresh:
        before = by_neurons.get(tuple(sorted(record["neurons"])))
        if before is None:
            continue
        matched += 1
        for split, logliks in record["loglik"].items():
            if split not in items:
                items[split] = read_jsonl(split_file(Path(data_dir), split))[: len(logliks)]
            old_scores = before["acc_norm"][split]
            scored += min(len(old_scores), len(logliks))  # a plan of fewer items: the first of them
            differs[split] += sum(a != b for a, b in zip(v1_acc_norm(logliks, items[split]), old_scores))
            moved[split] += sum(a != b for a, b in zip(record["acc_norm"][split], old_scores))
    return {
        "regions": len(fresh),
        "matched": matched,
        "items": scored,
        "v1_differs": differs.total(),
        "v1_differs_by_split": {split: n for split, n in sorted(differs.items()) if n},
        "moved": moved.total(),
        "moved_where_v1_agrees": sum(n for split, n in moved.items() if not differs[split]),
        "dropped": {folder: n for folder, n in dropped.items() if n},
    }


def _region_records(folder: Path) -> tuple[list[dict[str, Any]], int]:
    """A frontier folder's records (storage.read_records) and how many lines of its file that drops (partial, edited
    or foreign); refused in one line where the folder holds none or holds one region twice (the records of two runs
    with other inputs, e.g. two dtypes, in one file)."""
    from benchprof.core.layout import FrontierLayout
    from benchprof.core.storage import read_records

    path = FrontierLayout(folder).records_file
    if not path.is_file():
        raise BenchprofError(f"{path}: not found (not a frontier folder)")
    records = read_records(path)
    seen: dict[tuple[Any, ...], str] = {}
    for record in records:
        key = (record.get("option"), record.get("region"), record.get("size"), tuple(sorted(record.get("neurons", []))))
        if key in seen and seen[key] != record.get("inputs"):
            raise BenchprofError(
                f"{path}: holds region {key[0]}/{key[1]} ({key[2]} neurons) twice, scored with other inputs (another "
                "dtype or model?); rescore the records of one run"
            )
        seen[key] = str(record.get("inputs"))
    lines = sum(1 for line in path.read_bytes().splitlines() if line.strip())
    return records, lines - len(records)


def rescore_line(counts: dict[str, Any]) -> str:
    """rescore_check's counts in one line."""
    where = ", ".join(f"{split} {n}" for split, n in counts["v1_differs_by_split"].items())
    return (
        f"rescore: {counts['matched']} of {counts['regions']} regions have the committed neurons; over their "
        f"{counts['items']} item scores, v1 recomputed from the new log-likelihoods differs from the committed on "
        f"{counts['v1_differs']}{f' ({where})' if where else ''}, the current scorer on {counts['moved']}"
        + (f" ({counts['moved_where_v1_agrees']} on the splits where v1 agrees)" if where else "")
        + "".join(f"; {n} unreadable line(s) of {folder} dropped" for folder, n in counts.get("dropped", {}).items())
    )
