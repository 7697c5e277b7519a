"""The reader of evaluation results: a result JSON (lm-eval's `results` plus what benchprof records) and
its per-sample JSONL (one line per document and filter), and the choice of a benchmark's primary metric.

A metric key is lm-eval's "metric,filter" (`acc_norm,none`, `exact_match,strict-match`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

METRIC_PREFERENCE = ("acc_norm", "acc", "exact_match", "pass@1")
FILTER_PREFERENCE = ("none", "strict-match")

DocId = tuple[str, int | str]  # (task, doc_id): one document
DocKey = tuple[str, int | str, str]  # (task, doc_id, filter) of one per-sample line
PerDoc = dict[DocKey, float]  # one evaluation's per-document metric values


def evaluation_hashes(model_dir: Path) -> dict[str, str]:
    """{result JSON path under the model folder: the inputs hash it records}: which evaluations a
    profile was computed from, without regard to where the project lies or the files' times."""
    hashes = {}
    for path in sorted(Path(model_dir).rglob("eval/**/*.json")):
        try:
            payload = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            payload = None
        recorded = payload.get("inputs_hash") if isinstance(payload, dict) else None
        hashes[str(path.relative_to(model_dir))] = str(recorded)
    return hashes


class Unusable(Exception):
    """An evaluation file that exists but cannot be used; the message is the reason."""


def split_key(key: str) -> tuple[str, str]:
    """'metric,filter' -> (metric, filter); a key without a filter has filter "none"."""
    metric, _, filter_name = key.partition(",")
    return metric, filter_name or "none"


def primary_metric(results: dict[str, Any], override: str | None = None) -> str | None:
    """The lm-eval key ("metric,filter") that represents a benchmark, or None if there is none.

    `override` (aggregate.metrics in the config) is a metric name ("acc") or a full key
    ("exact_match,flexible-extract"). Otherwise the first of acc_norm, acc, exact_match, pass@1 that
    the results hold, else their first metric that is not a standard error. Among a metric's filters,
    "none" is preferred, then "strict-match", then the first listed.
    """
    keys = [
        key
        for key, value in results.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not key.split(",")[0].endswith("_stderr")
    ]

    def with_filter(metric: str) -> str | None:
        candidates = [key for key in keys if key.split(",")[0] == metric]
        for preferred in FILTER_PREFERENCE:
            for key in candidates:
                if split_key(key)[1] == preferred:
                    return key
        return candidates[0] if candidates else None

    if override:
        return override if "," in override and override in keys else with_filter(override)
    for metric in METRIC_PREFERENCE:
        key = with_filter(metric)
        if key:
            return key
    return keys[0] if keys else None


def read_results(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the result JSON, the results of its primary task); Unusable when it cannot be read."""
    try:
        payload = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise Unusable(f"unreadable ({type(err).__name__}: {err})") from None
    results = payload.get("results") if isinstance(payload, dict) else None
    if not isinstance(results, dict) or not results:
        raise Unusable("unreadable (no 'results')")
    task = payload.get("primary_task") or payload.get("benchmark")
    if task not in results:
        if len(results) != 1:
            raise Unusable(f"unreadable (primary_task {task!r} not in results)")
        task = next(iter(results))
    if not isinstance(results[task], dict):
        raise Unusable(f"unreadable (results[{task!r}] is not a mapping)")
    return payload, results[task]


class BadLine(ValueError):
    """A line of a samples JSONL that is not a JSON object; `line` is its number (from 1)."""

    def __init__(self, line: int, why: str) -> None:
        super().__init__(f"line {line}: {why}")
        self.line = line


def doc_id(sample: dict[str, Any]) -> DocId:
    """(task, doc_id) of a per-sample row: which document it scored."""
    doc = sample.get("doc_id")
    return str(sample.get("task")), doc if isinstance(doc, (int, str)) else str(doc)


def iter_samples(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, row) of every non-blank line of a samples JSONL, in order: the one parser of the format.
    OSError and UnicodeDecodeError reach the caller, and BadLine for a line that is not a JSON object; the
    caller says what a bad file means for it."""
    with open(path) as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise BadLine(number, err.msg) from None
            if not isinstance(row, dict):
                raise BadLine(number, "not a JSON object")
            yield number, row


@dataclass
class Score:
    """One evaluation of one benchmark on its primary metric. `value` is the mean over `per_doc` where the
    samples file has per-document values (so a cell's AIS and its interval share one population), else the
    result JSON's aggregate."""

    value: float
    per_doc: PerDoc | None  # None without a usable samples file
    limit: object = None
    n_samples: object = None
    lower_is_better: bool = False  # the result JSON's higher_is_better says False for the metric
    reported: float = math.nan  # the result JSON's own aggregate (lm-eval's), beside `value`


def load_score(
    path: Path,
    samples: Path,
    metric_key: str,
    label: str,
    notes: list[str],
    current_mask: Callable[[], str | None] | None = None,
) -> Score:
    """The Score of result JSON `path` (and its samples file) on `metric_key`; Unusable with the reason when it
    cannot serve: missing, unreadable, the metric absent, its samples file changed since it was written, or
    (with `current_mask`, the hash of the mask file now on disk) evaluated on a mask extract has since replaced.
    A samples file without usable values adds a line to `notes` (`label` names the evaluation there)."""
    from .storage import matches_record

    if not path.is_file():
        raise Unusable("missing")
    payload, results = read_results(path)
    inputs = payload.get("inputs")
    recorded = inputs.get("mask") if isinstance(inputs, dict) else None
    current = current_mask() if current_mask is not None and recorded else None
    if current and recorded != current:  # e.g. extract.score switched after this evaluation
        raise Unusable("evaluated on a mask that extract has since replaced (rerun `benchprof evaluate`)")
    value = results.get(metric_key)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
        raise Unusable(f"metric {metric_key!r} not in results")
    recorded_files = payload.get("files")
    recorded_files = recorded_files if isinstance(recorded_files, dict) else {}
    if samples.name in recorded_files and not matches_record(samples, recorded_files[samples.name]):
        raise Unusable("per-sample file damaged since it was written (rerun `benchprof evaluate`)")
    per_doc, why = read_samples(samples, metric_key)
    if why and why != "no per-sample file":
        notes.append(f"{label}: {why}; no interval")
    reported = float(value)
    if per_doc is not None:  # one population: the point estimate is the mean the interval resamples
        value = math.fsum(per_doc.values()) / len(per_doc)
    better = payload.get("higher_is_better")
    task = payload.get("primary_task") or payload.get("benchmark")
    task_better = better.get(task) if isinstance(better, dict) else None
    lower = isinstance(task_better, dict) and task_better.get(split_key(metric_key)[0]) is False
    return Score(float(value), per_doc, payload.get("limit"), payload.get("n_samples"), lower, reported)


def option_counts(path: Path) -> list[int]:
    """How many options each multiple-choice document of a samples file had (its loglikelihoods), once
    per document; empty for a generation task or a file that cannot be read."""
    counts: dict[DocId, int] = {}
    try:
        for _, sample in iter_samples(path):
            if isinstance(sample.get("loglikelihoods"), list):
                counts[doc_id(sample)] = len(sample["loglikelihoods"])
    except (OSError, UnicodeDecodeError, BadLine):
        return []
    return list(counts.values())


def read_samples(path: Path, metric_key: str) -> tuple[PerDoc | None, str | None]:
    """Per-document values of `metric_key` from a samples JSONL: (values, None) or (None, why not)."""
    if not path.is_file():
        return None, "no per-sample file"
    metric, filter_name = split_key(metric_key)
    per_doc: PerDoc = {}
    number = lacking = 0
    try:
        for line, sample in iter_samples(path):
            number = line  # for the message below
            if sample.get("filter", "none") != filter_name:
                continue
            if metric not in sample:
                lacking += 1
                continue
            per_doc[(*doc_id(sample), filter_name)] = float(sample[metric])
    except (OSError, UnicodeDecodeError, TypeError, ValueError) as err:
        if isinstance(err, BadLine):
            return None, f"per-sample file unreadable ({err})"
        return None, f"per-sample file unreadable ({type(err).__name__} at line {number})"
    if not per_doc:
        return None, f"per-sample file has no {metric_key!r} values"
    if lacking:  # never an interval over some of the documents only
        return None, f"per-sample file: {lacking} of {lacking + len(per_doc)} rows lack {metric_key!r}"
    return per_doc, None


def read_p_correct(path: Path, metric_key: str) -> tuple[PerDoc | None, str | None]:
    """Per-document p_correct from a samples JSONL: the softmax of the options' log-likelihoods at the
    target (stats.impact.p_correct), length-normalised when the metric is acc_norm (each option's `option_lengths`,
    lm-eval's len(choice)). (values, None) or (None, why not): a generation task, a file without
    log-likelihoods, a target that is not an option index, or acc_norm without option lengths."""
    from .stats.impact import p_correct

    if not path.is_file():
        return None, "no per-sample file"
    metric, filter_name = split_key(metric_key)
    normalise = metric == "acc_norm"
    keys: list[DocKey] = []
    loglikelihoods: list[list[float]] = []
    labels: list[int] = []
    lengths: list[list[int]] = []
    try:
        for _, sample in iter_samples(path):
            if sample.get("filter", "none") != filter_name:
                continue
            ll, target = sample.get("loglikelihoods"), sample.get("target")
            if not isinstance(ll, list) or not ll:
                return None, "no option log-likelihoods (not multiple choice)"
            if not isinstance(target, int) or isinstance(target, bool) or not 0 <= target < len(ll):
                return None, f"target {target!r} of document {sample.get('doc_id')} is not an option index"
            if normalise:
                option_lengths = sample.get("option_lengths")
                if not isinstance(option_lengths, list) or len(option_lengths) != len(ll):
                    return None, "acc_norm without the options' lengths (evaluated before benchprof 0.2)"
                lengths.append(option_lengths)
            keys.append((*doc_id(sample), filter_name))
            loglikelihoods.append(ll)
            labels.append(target)
    except (OSError, UnicodeDecodeError, TypeError, ValueError) as err:
        return None, f"per-sample file unreadable ({err if isinstance(err, BadLine) else type(err).__name__})"
    if not keys:
        return None, f"no {filter_name!r} rows"
    try:
        values = p_correct(loglikelihoods, labels, lengths if normalise else None)
    except ValueError as err:
        return None, str(err)
    return dict(zip(keys, (float(v) for v in values))), None


def read_clusters(path: Path) -> dict[DocId, str]:
    """(task, doc_id) -> the document's `cluster` (generated ability items: template and fact), for the
    documents of a samples JSONL that carry one; empty when none does or the file cannot be read."""
    clusters: dict[DocId, str] = {}
    try:
        for _, sample in iter_samples(path):
            if isinstance(sample.get("cluster"), (str, int)):
                clusters[doc_id(sample)] = str(sample["cluster"])
    except (OSError, UnicodeDecodeError, BadLine):
        return {}
    return clusters
