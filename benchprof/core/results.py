"""Evaluation results on disk: a result JSON (lm-eval's `results` plus what benchprof records) and its
per-sample JSONL (one line per document and filter), written by `write_result` (for evaluate) and read
here by `load_score`; and the choice of a benchmark's primary metric.

A metric key is lm-eval's "metric,filter" (`acc_norm,none`, `exact_match,strict-match`).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from benchprof.core.layout import Layout, Variant

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


def plain(value: Any) -> Any:
    """lm-eval output made JSON-safe: numpy scalars to numbers, tuples to lists, NaN to null."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy or torch scalar
        try:
            value = value.item()
        except (ValueError, RuntimeError):
            return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def option_lengths(arguments: Any, delimiter: str, mutual_info: bool = False) -> list[int] | None:
    """Each option's length in characters, the divisor of lm-eval's acc_norm (len(choice)).

    A multiple-choice request is (context, target_delimiter + choice) per option (lm-eval 0.4's
    ConfigurableTask.construct_requests); with acc_mutual_info the options' unconditional requests
    follow as a second half. None where the options are not the continuations (a multiple-input task
    such as winogrande puts them in the contexts) or a continuation lacks the delimiter.
    """
    if not isinstance(arguments, (list, tuple)) or not arguments:
        return None
    if not all(isinstance(a, (list, tuple)) and len(a) >= 2 and isinstance(a[1], str) for a in arguments):
        return None
    if mutual_info:
        arguments = arguments[: len(arguments) // 2]
    if len({str(a[0]) for a in arguments}) > 1 or not all(a[1].startswith(delimiter) for a in arguments):
        return None
    return [len(a[1]) - len(delimiter) for a in arguments]


def sample_rows(
    samples: dict[str, list[dict[str, Any]]], configs: dict[str, dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """One row per scored document and filter: its task, doc_id, filter and metric values.

    Multiple-choice rows also keep the per-option loglikelihoods and `option_lengths` (each option's
    length in characters, as acc_norm normalises; the task's target_delimiter comes from lm-eval's
    `configs`), generation rows the response. `cluster` is the document's cluster field (generated
    ability items: template and fact). Keys absent when unknown.
    """
    configs = configs or {}
    rows = []
    for task, docs in samples.items():
        delimiter = (configs.get(task) or {}).get("target_delimiter", " ")
        for s in docs:
            row = {"task": task, "doc_id": int(s["doc_id"]), "filter": s.get("filter", "none")}
            row.update({m: plain(s[m]) for m in s.get("metrics", []) if m in s})
            resps = s.get("filtered_resps")
            if isinstance(resps, list) and resps and all(isinstance(r, tuple) and len(r) == 2 for r in resps):
                row["loglikelihoods"] = [float(r[0]) for r in resps]
            elif isinstance(resps, list) and len(resps) == 1 and isinstance(resps[0], str):
                row["response"] = resps[0]
            if isinstance(s.get("target"), (int, str)):
                row["target"] = s["target"]
            if "doc_hash" in s:
                row["doc_hash"] = s["doc_hash"]
            if "loglikelihoods" in row and isinstance(delimiter, str):
                mutual_info = "acc_mutual_info" in s.get("metrics", [])
                lengths = option_lengths(s.get("arguments"), delimiter, mutual_info)
                if lengths is not None:
                    row["option_lengths"] = lengths
            cluster = s["doc"].get("cluster") if isinstance(s.get("doc"), dict) else None
            if isinstance(cluster, (str, int)) and not isinstance(cluster, bool):
                row["cluster"] = cluster
            rows.append(row)
    return sorted(rows, key=lambda r: (r["task"], r["doc_id"], r["filter"]))


def write_result(
    layout: Layout,
    v: Variant,
    benchmark: str,
    tag: str,
    task: str,
    output: dict[str, Any],
    inputs: dict[str, Any],
    model_fingerprint: str | None,
    wall_seconds: float,
) -> None:
    """An evaluation's files from lm-eval's `output`: samples first, then the JSON (its presence marks the
    job done); both atomic."""
    from benchprof.core.storage import content_record, remove_temps, value_hash, versions, write_json, write_text

    rows = sample_rows(output.get("samples") or {}, output.get("configs"))
    # the JSON marks the job done: remove an old one first, so a run killed between the two writes
    # never leaves an old JSON beside new samples
    layout.eval_file(v, benchmark).unlink(missing_ok=True)
    for path in (layout.eval_file(v, benchmark), layout.samples_file(v, benchmark)):
        remove_temps(path.parent, path.name)  # left by a killed run; each job has one writer
    samples = layout.samples_file(v, benchmark)
    write_text(samples, "".join(json.dumps(r, allow_nan=False) + "\n" for r in rows))
    results = plain({**output.get("groups", {}), **output["results"]})
    if task not in results and len(results) == 1:
        task = next(iter(results))  # e.g. a tag that expands to one task
    write_json(
        layout.eval_file(v, benchmark),
        {
            "benchmark": benchmark,
            "primary_task": task,
            "results": results,
            "higher_is_better": plain(output.get("higher_is_better", {})),
            "group_subtasks": plain(output.get("group_subtasks", {})),
            "n_samples": sum(int(n.get("effective", 0)) for n in output.get("n-samples", {}).values()),
            "num_fewshot": inputs["num_fewshot"],
            "limit": inputs["limit"],
            "variant": {"ability": v.ability, "k": v.k, "region": v.region},
            "model": tag,
            "model_fingerprint": model_fingerprint,
            "backend": inputs["backend"],
            "wall_seconds": round(wall_seconds, 3),
            "inputs": inputs,
            "inputs_hash": value_hash(inputs),
            # the samples file as written: a truncated or edited one is caught before it is trusted
            "files": {samples.name: content_record(samples)},
            "versions": versions(),
            "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        },
    )


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


# the inputs an ablated evaluation must share with the original's to be paired with it: the same model (content
# fingerprint), task files, documents and scoring; only the variant and its mask differ
PAIRED_INPUTS = ("model", "dtype", "task_hash", "num_fewshot", "limit", "backend", "scorer", "seed")


def unpaired_inputs(inputs: Any, original: Any) -> list[str]:
    """The PAIRED_INPUTS an evaluation's recorded inputs do not share with the original's. A key either records
    must be in both, equal; a key neither records (result files written by hand or by another tool) says
    nothing to compare."""
    mine = inputs if isinstance(inputs, dict) else {}
    theirs = original if isinstance(original, dict) else {}
    return [key for key in PAIRED_INPUTS if (key in mine or key in theirs) and mine.get(key) != theirs.get(key)]


def load_score(
    path: Path,
    samples: Path,
    metric_key: str,
    label: str,
    notes: list[str],
    current_mask: Callable[[], str | None] | None = None,
    original_inputs: dict[str, Any] | None = None,
) -> Score:
    """The Score of result JSON `path` (and its samples file) on `metric_key`; Unusable with the reason when it
    cannot serve: missing, unreadable, the metric absent, its samples file changed since it was written, (with
    `current_mask`, the hash of the mask file now on disk) evaluated on a mask extract has since replaced, or
    (with `original_inputs`, the original evaluation's recorded inputs) made from another model, task or
    scoring than the original it would be compared with. A samples file without usable values adds a line to
    `notes` (`label` names the evaluation there)."""
    from benchprof.core.storage import matches_record

    if not path.is_file():
        raise Unusable("missing")
    payload, results = read_results(path)
    inputs = payload.get("inputs")
    if original_inputs is not None and (differ := unpaired_inputs(inputs, original_inputs)):
        raise Unusable(
            f"not paired with the original's evaluation: its {', '.join(differ)} differ (the model, task or "
            "scoring changed between them; rerun `benchprof evaluate`)"
        )
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


def _first_max(values: list[float]) -> int:
    return max(range(len(values)), key=lambda i: (values[i], -i))  # np.argmax's choice: the first of the largest


def gold_candidates(sample: dict[str, Any]) -> set[int]:
    """The options a multiple-choice row's gold answer can be: its `target` where that is an option index, else
    those consistent with the row's recorded 0/1 `acc` and `acc_norm` (lm-eval scores 1 exactly where the gold is
    the first option of largest log-likelihood, per character for acc_norm). A target written as text (COPA's
    sentence, CommonsenseQA's letter) names no index, but two options and one recorded score always leave one."""
    ll, target = sample["loglikelihoods"], sample.get("target")
    if isinstance(target, int) and not isinstance(target, bool):
        return {target} if 0 <= target < len(ll) else set()
    options = set(range(len(ll)))
    lengths = sample.get("option_lengths")
    choices = [("acc", [float(v) for v in ll])]
    if isinstance(lengths, list) and len(lengths) == len(ll) and all(isinstance(n, int) and n > 0 for n in lengths):
        choices.append(("acc_norm", [float(v) / n for v, n in zip(ll, lengths)]))
    for metric, scores in choices:
        if sample.get(metric) in (0, 1, 0.0, 1.0):
            best = _first_max(scores)
            options &= {best} if sample[metric] == 1 else options - {best}
    return options


def gold_indices(samples: list[dict[str, Any]]) -> list[int] | str:
    """Each multiple-choice row's gold option index (gold_candidates), or why one cannot be known. A row its own
    scores leave open (wrong, with more than two options) takes the index that every row with the same target
    text and a known index has (a target that is a label, as CommonsenseQA's "A" to "E"), and letter labels whose
    known indices are all their alphabetical places take theirs (a letter no row got right included); nothing
    else is guessed."""
    candidates = [gold_candidates(sample) for sample in samples]
    by_target: dict[str, set[int]] = {}
    for sample, known in zip(samples, candidates):
        if isinstance(sample.get("target"), str) and len(known) == 1:
            by_target.setdefault(sample["target"], set()).update(known)
    targets = {sample.get("target") for sample in samples}
    letters = all(isinstance(t, str) and len(t) == 1 and "A" <= t <= "Z" for t in targets)
    if letters and by_target and all(known == {ord(t) - ord("A")} for t, known in by_target.items()):
        # letter labels, every one whose index is known in alphabetical place: so are the others
        by_target = {str(t): {ord(str(t)) - ord("A")} for t in targets}
    out = []
    for sample, known in zip(samples, candidates):
        target = sample.get("target")
        learned = by_target.get(target) if isinstance(target, str) else None
        if len(known) != 1 and learned is not None and len(learned) == 1 and learned <= known:
            known = learned
        if len(known) != 1:
            return f"target {sample.get('target')!r} of document {sample.get('doc_id')} names no one option"
        out.append(next(iter(known)))
    return out


def read_p_correct(path: Path, metric_key: str) -> tuple[PerDoc | None, str | None]:
    """Per-document p_correct from a samples JSONL: the softmax of the options' log-likelihoods at the
    target (stats.impact.p_correct), length-normalised when the metric is acc_norm (each option's `option_lengths`,
    lm-eval's len(choice)). (values, None) or (None, why not): a generation task, a file without
    log-likelihoods, a target that names no one option (gold_indices), or acc_norm without option lengths."""
    from benchprof.stats.impact import p_correct

    if not path.is_file():
        return None, "no per-sample file"
    metric, filter_name = split_key(metric_key)
    normalise = metric == "acc_norm"
    keys: list[DocKey] = []
    loglikelihoods: list[list[float]] = []
    rows: list[dict[str, Any]] = []
    lengths: list[list[int]] = []
    try:
        for _, sample in iter_samples(path):
            if sample.get("filter", "none") != filter_name:
                continue
            ll = sample.get("loglikelihoods")
            if not isinstance(ll, list) or not ll:
                return None, "no option log-likelihoods (not multiple choice)"
            if normalise:
                option_lengths = sample.get("option_lengths")
                if not isinstance(option_lengths, list) or len(option_lengths) != len(ll):
                    return None, "acc_norm without the options' lengths (evaluated before benchprof 0.2)"
                lengths.append(option_lengths)
            keys.append((*doc_id(sample), filter_name))
            loglikelihoods.append(ll)
            rows.append(sample)
        labels = gold_indices(rows)
    except (OSError, UnicodeDecodeError, TypeError, ValueError) as err:
        return None, f"per-sample file unreadable ({err if isinstance(err, BadLine) else type(err).__name__})"
    if isinstance(labels, str):
        return None, labels
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
