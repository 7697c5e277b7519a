"""The reader of evaluation results: a result JSON (lm-eval's `results` plus what benchprof records) and
its per-sample JSONL (one line per document and filter), and the choice of a benchmark's primary metric.

A metric key is lm-eval's "metric,filter" (`acc_norm,none`, `exact_match,strict-match`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

METRIC_PREFERENCE = ("acc_norm", "acc", "exact_match", "pass@1")
FILTER_PREFERENCE = ("none", "strict-match")

DocKey = tuple[Any, Any, str]  # (task, doc_id, filter) of one per-sample line


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


def option_counts(path: Path) -> list[int]:
    """How many options each multiple-choice document of a samples file had (its loglikelihoods), once
    per document; empty for a generation task or a file that cannot be read."""
    counts: dict[tuple[Any, Any], int] = {}
    try:
        with open(path) as lines:
            for line in lines:
                if line.strip():
                    sample = json.loads(line)
                    if isinstance(sample.get("loglikelihoods"), list):
                        counts[(sample.get("task"), sample.get("doc_id"))] = len(sample["loglikelihoods"])
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return []
    return list(counts.values())


def read_samples(path: Path, metric_key: str) -> tuple[dict[DocKey, float] | None, str | None]:
    """Per-document values of `metric_key` from a samples JSONL: (values, None) or (None, why not)."""
    if not path.is_file():
        return None, "no per-sample file"
    metric, filter_name = split_key(metric_key)
    per_doc: dict[DocKey, float] = {}
    number = lacking = 0
    try:
        with open(path) as lines:
            for line in lines:
                number += 1  # for the message below
                if not line.strip():
                    continue
                sample = json.loads(line)
                if sample.get("filter", "none") != filter_name:
                    continue
                if metric not in sample:
                    lacking += 1
                    continue
                per_doc[(sample.get("task"), sample.get("doc_id"), filter_name)] = float(sample[metric])
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, TypeError, ValueError) as err:
        return None, f"per-sample file unreadable ({type(err).__name__} at line {number})"
    if not per_doc:
        return None, f"per-sample file has no {metric_key!r} values"
    if lacking:  # never an interval over some of the documents only
        return None, f"per-sample file: {lacking} of {lacking + len(per_doc)} rows lack {metric_key!r}"
    return per_doc, None


def read_p_correct(path: Path, metric_key: str) -> tuple[dict[DocKey, float] | None, str | None]:
    """Per-document p_correct from a samples JSONL: the softmax of the options' log-likelihoods at the
    target (ais.p_correct), length-normalised when the metric is acc_norm (each option's `option_lengths`,
    lm-eval's len(choice)). (values, None) or (None, why not): a generation task, a file without
    log-likelihoods, a target that is not an option index, or acc_norm without option lengths."""
    from .ais import p_correct

    if not path.is_file():
        return None, "no per-sample file"
    metric, filter_name = split_key(metric_key)
    normalise = metric == "acc_norm"
    keys: list[DocKey] = []
    loglikelihoods: list[list[float]] = []
    labels: list[int] = []
    lengths: list[list[int]] = []
    try:
        with open(path) as lines:
            for line in lines:
                if not line.strip():
                    continue
                sample = json.loads(line)
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
                keys.append((sample.get("task"), sample.get("doc_id"), filter_name))
                loglikelihoods.append(ll)
                labels.append(target)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, TypeError, ValueError) as err:
        return None, f"per-sample file unreadable ({type(err).__name__})"
    if not keys:
        return None, f"no {filter_name!r} rows"
    try:
        values = p_correct(loglikelihoods, labels, lengths if normalise else None)
    except ValueError as err:
        return None, str(err)
    return dict(zip(keys, (float(v) for v in values))), None


def read_clusters(path: Path) -> dict[tuple[Any, Any], str]:
    """(task, doc_id) -> the document's `cluster` (generated ability items: template and fact), for the
    documents of a samples JSONL that carry one; empty when none does or the file cannot be read."""
    clusters: dict[tuple[Any, Any], str] = {}
    try:
        with open(path) as lines:
            for line in lines:
                if line.strip():
                    sample = json.loads(line)
                    if isinstance(sample.get("cluster"), (str, int)):
                        clusters[(sample.get("task"), sample.get("doc_id"))] = str(sample["cluster"])
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return clusters
