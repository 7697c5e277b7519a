"""Stage `aggregate`: Ability Impact Scores, paired bootstrap intervals, tables and plots.

For a model, benchmark b, ability a, fraction k and region r (top, bottom or random):

    AIS = (s_b(original) - s_b(original without region r of a at k)) / s_b(original)

on b's primary metric. The control-adjusted score is AIS(top) - AIS(random) for the same a, k, b.
Intervals are 95% percentile intervals of a paired bootstrap over documents: each resample draws
document indices with replacement and scores the original model and every region on the same
documents, so the interval reflects the paired difference, not two independent noises.

Region specificity (benchprof/specificity.py): rows of benchmark "specificity" give, per ability,
k and region, AIS on the ability's own split minus the mean AIS on the other abilities' splits,
with an interval from the same bootstrap resamples; the overlap of the abilities' regions is
written beside the AIS tables.

Outputs under <model>/profile/ (see `aggregate` for the formats): ais.csv, ais.json, ais.md,
heatmap.png, ribbons.png, profile_<benchmark>.png, ksweep_<benchmark>.png, overlap.csv,
overlap_k<k>.png, layers.csv, layers_k<k>.png and manifest.json.
`load_scores` returns the same numbers as Python objects for notebooks and the demo.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import time
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import BenchprofError
from .config import Config, ModelSpec, load_config
from .layout import Layout, Variant, format_k
from .storage import atomic_path, clear_manifest, write_json, write_manifest, write_text

METRIC_PREFERENCE = ("acc_norm", "acc", "exact_match", "pass@1")
FILTER_PREFERENCE = ("none", "strict-match")
ADJUSTED = "top-random"  # region name of the control-adjusted rows in ais.csv / ais.json
CSV_COLUMNS = (
    "model",
    "ability",
    "benchmark",
    "k",
    "region",
    "metric",
    "score_original",
    "score_ablated",
    "ais",
    "ci_low",
    "ci_high",
    "significant",
    "n_docs",
)
MISSING_CELL = "–"  # no evaluation to compute from
UNDEFINED_CELL = "n/a"  # computed, but undefined (original score 0)
NO_ORIGINAL = "no usable original score"


def impact_score(s_original: Any, s_ablated: Any) -> Any:
    """AIS^a_b(k) = (s_b(θ) - s_b(θ without top_k^a)) / s_b(θ), the paper's Ability Impact Score.

    Works on floats and numpy arrays (broadcast); NaN where s_b(θ) = 0, without a warning.
    """
    import numpy as np

    s_original = np.asarray(s_original, dtype=float)
    s_ablated = np.asarray(s_ablated, dtype=float)
    ais = np.full(np.broadcast_shapes(s_original.shape, s_ablated.shape), np.nan)
    np.divide(s_original - s_ablated, s_original, out=ais, where=np.broadcast_to(s_original != 0, ais.shape))
    return float(ais) if ais.ndim == 0 else ais


def bootstrap_ais(original: Any, ablated: Any, resamples: int, rng: Any, max_elements: int = 2_000_000) -> Any:
    """AIS on `resamples` paired bootstrap resamples of the documents.

    original: per-document metric of the original model, shape (n,); ablated: shape (R, n), one row
    per region, the same documents in the same order. Each resample draws n document indices with
    replacement (`rng.integers(0, n, size=(chunk, n))`, chunks of at most `max_elements` indices)
    and applies `impact_score` to the resampled means. Returns shape (R, resamples); NaN where a
    resample's original mean is 0.
    """
    import numpy as np

    original = np.asarray(original, dtype=float)
    ablated = np.atleast_2d(np.asarray(ablated, dtype=float))
    n = original.shape[0]
    if ablated.shape[1] != n:
        raise ValueError(f"bootstrap_ais: {ablated.shape[1]} ablated documents for {n} original ones")
    values = np.vstack([original[None, :], ablated])  # (1 + R, n)
    out = np.empty((ablated.shape[0], resamples))
    chunk = max(1, max_elements // max(1, n * values.shape[0]))
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))
        means = values[:, idx].mean(axis=2)  # (1 + R, chunk)
        out[:, start:stop] = impact_score(means[0], means[1:])
    return out


def percentile_ci(samples: Any, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of bootstrap samples, ignoring NaN ones; (nan, nan) when none is finite."""
    import numpy as np

    samples = np.asarray(samples, dtype=float)
    finite = samples[np.isfinite(samples)]
    if finite.size == 0:
        return math.nan, math.nan
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


def cell_rng(seed: int, ability: str, k: float, benchmark: str) -> Any:
    """The bootstrap generator of one (ability, k, benchmark) cell: reproducible whatever else exists.

    All regions of the cell (and the original) share its resamples, which pairs the control-adjusted
    interval.
    """
    import numpy as np

    key = zlib.crc32(f"{ability}|{format_k(k)}|{benchmark}".encode())
    return np.random.default_rng([int(seed), key])


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
                if _split_key(key)[1] == preferred:
                    return key
        return candidates[0] if candidates else None

    if override:
        return override if "," in override and override in keys else with_filter(override)
    for metric in METRIC_PREFERENCE:
        key = with_filter(metric)
        if key:
            return key
    return keys[0] if keys else None


def _split_key(key: str) -> tuple[str, str]:
    metric, _, filter_name = key.partition(",")
    return metric, filter_name or "none"


@dataclass
class AisRow:
    """One line of ais.csv. `region` is top, bottom, random or "top-random" (control-adjusted:
    ais = AIS(top) - AIS(random), score_ablated is None). NaN: undefined (original score 0) or no
    interval (no per-sample file, or bootstrap 0); `significant` is None when there is no interval."""

    model: str
    ability: str
    benchmark: str
    k: float
    region: str
    metric: str
    score_original: float
    score_ablated: float | None
    ais: float
    ci_low: float = math.nan
    ci_high: float = math.nan
    significant: bool | None = None
    n_docs: int = 0  # documents in the paired bootstrap


@dataclass
class MissingEval:
    """An evaluation that was expected but could not be used."""

    benchmark: str
    variant: str  # "original" or "<ability>/k<k>/<region>"
    path: str
    reason: str


@dataclass
class Profile:
    """Everything `aggregate` writes for one model, as Python objects."""

    model: str  # tag
    name: str
    abilities: list[str]
    benchmarks: list[str]
    k_values: list[float]
    regions: list[str]
    report_k: float
    threshold: float
    bootstrap: int
    metrics: dict[str, str] = field(default_factory=dict)  # benchmark -> "metric,filter"
    original_scores: dict[str, float] = field(default_factory=dict)
    rows: list[AisRow] = field(default_factory=list)
    missing: list[MissingEval] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    score: str = "importance"  # extract.score of the evaluated top/bottom masks (from their headers)
    loss_on: str = ""  # finetune.loss_on of the importance files ("" when unknown)
    overlap: list[str] = field(default_factory=list)  # summary lines of overlap.csv, for ais.md

    def row(self, ability: str, benchmark: str, k: float | None = None, region: str = "top") -> AisRow | None:
        """The row for one cell, or None when it could not be computed."""
        k = self.report_k if k is None else k
        index = getattr(self, "_index", None)
        if index is None or len(index) != len(self.rows):
            index = {(r.ability, r.benchmark, format_k(r.k), r.region): r for r in self.rows}
            self._index = index  # not a dataclass field: asdict() leaves it out
        return index.get((ability, benchmark, format_k(k), region))

    def matrix(self, k: float | None = None, region: str = "top") -> dict[str, dict[str, float]]:
        """ability -> benchmark -> AIS at k (default the report k); cells without a result are absent."""
        k = self.report_k if k is None else k
        out: dict[str, dict[str, float]] = {a: {} for a in self.abilities}
        for row in self.rows:
            if row.region == region and math.isclose(row.k, k) and row.benchmark in self.benchmarks:
                out.setdefault(row.ability, {})[row.benchmark] = row.ais
        return out


class _Unusable(Exception):
    """An evaluation file that exists but cannot be used; the message is the reason."""


@dataclass
class _Score:
    value: float
    per_doc: dict[tuple, float] | None  # (task, doc_id, filter) -> metric; None without samples
    limit: Any = None
    n_samples: Any = None


def _read_results(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the eval JSON, the results of its primary task)."""
    try:
        payload = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise _Unusable(f"unreadable ({type(err).__name__}: {err})") from None
    results = payload.get("results") if isinstance(payload, dict) else None
    if not isinstance(results, dict) or not results:
        raise _Unusable("unreadable (no 'results')")
    task = payload.get("primary_task") or payload.get("benchmark")
    if task not in results:
        if len(results) != 1:
            raise _Unusable(f"unreadable (primary_task {task!r} not in results)")
        task = next(iter(results))
    if not isinstance(results[task], dict):
        raise _Unusable(f"unreadable (results[{task!r}] is not a mapping)")
    return payload, results[task]


def _read_samples(path: Path, metric_key: str) -> tuple[dict[tuple, float] | None, str | None]:
    """Per-document values of `metric_key` from a samples JSONL: (values, None) or (None, why not)."""
    if not path.is_file():
        return None, "no per-sample file"
    metric, filter_name = _split_key(metric_key)
    per_doc: dict[tuple, float] = {}
    number = 0
    try:
        with open(path) as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                sample = json.loads(line)
                if sample.get("filter", "none") != filter_name or metric not in sample:
                    continue
                per_doc[(sample.get("task"), sample.get("doc_id"), filter_name)] = float(sample[metric])
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, TypeError, ValueError) as err:
        return None, f"per-sample file unreadable ({type(err).__name__} at line {number})"
    if not per_doc:
        return None, f"per-sample file has no {metric_key!r} values"
    return per_doc, None


def _load_score(
    layout: Layout, variant: Variant, benchmark: str, metric_key: str, notes: list[str], mask_hash: Any | None = None
) -> _Score:
    path = layout.eval_file(variant, benchmark)
    if not path.is_file():
        raise _Unusable("missing")
    payload, results = _read_results(path)
    inputs = payload.get("inputs")
    recorded = inputs.get("mask") if isinstance(inputs, dict) else None
    current = mask_hash(variant) if mask_hash is not None and recorded else None
    if current and recorded != current:  # e.g. extract.score switched after this evaluation
        raise _Unusable("evaluated on a mask that extract has since replaced (rerun `benchprof evaluate`)")
    value = results.get(metric_key)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
        raise _Unusable(f"metric {metric_key!r} not in results")
    per_doc, why = _read_samples(layout.samples_file(variant, benchmark), metric_key)
    if why and why != "no per-sample file":
        notes.append(f"{benchmark} {variant.label()}: {why}; no interval")
    return _Score(float(value), per_doc, payload.get("limit"), payload.get("n_samples"))


def _as_config(config: str | Path | Config) -> Config:
    return config if isinstance(config, Config) else load_config(config)


def default_report_k(cfg: Config, report_k: Any = None) -> float:
    """The k of the headline tables: `report_k`, else aggregate.report_k, else the largest k."""
    if report_k is None:
        report_k = cfg.aggregate.report_k
    if report_k is None:
        return max(cfg.settings.k_values)
    try:
        wanted = float(report_k)
    except (TypeError, ValueError):
        raise BenchprofError(f"--report_k: {report_k!r} is not a number") from None
    for k in cfg.settings.k_values:
        if math.isclose(k, wanted, rel_tol=1e-9):
            return k
    raise BenchprofError(
        f"--report_k: {report_k} is not one of settings.k_values "
        f"({', '.join(format_k(k) for k in cfg.settings.k_values)})"
    )


def load_scores(
    config: str | Path | Config = "config.yml",
    model: str | None = None,
    report_k: Any = None,
    bootstrap: int | None = None,
    progress: bool = True,
) -> Profile:
    """Read one model's evaluations and compute every AIS with its interval (no files written).

    Arguments:
        config: path of config.yml, or a loaded Config.
        model: model name or tag; default the first model.
        report_k: k of the headline tables; default aggregate.report_k or the largest k.
        bootstrap: resamples; default aggregate.bootstrap (0: no intervals).
        progress: show a progress bar on a terminal.
    """
    import numpy as np
    from tqdm import tqdm

    from .specificity import ability_benchmarks, mean_specificity_rows, region_provenance, specificity_rows
    from .storage import file_hash

    cfg = _as_config(config)
    spec: ModelSpec = cfg.model(model)
    layout = Layout(cfg.output_root, spec.tag)
    settings = cfg.aggregate
    resamples = settings.bootstrap if bootstrap is None else int(bootstrap)
    profile = Profile(
        model=spec.tag,
        name=spec.name,
        abilities=cfg.abilities(),
        benchmarks=list(cfg.evals.benchmarks),
        k_values=list(cfg.settings.k_values),
        regions=list(cfg.extract.regions),
        report_k=default_report_k(cfg, report_k),
        threshold=settings.threshold,
        bootstrap=resamples,
    )
    variants = [Variant(a, k, r) for a in profile.abilities for k in profile.k_values for r in profile.regions]
    profile.score, profile.loss_on = region_provenance(layout, profile.abilities, profile.k_values, profile.notes)
    mask_hashes: dict[Variant, str | None] = {}
    samples: dict[tuple, Any] = {}  # (ability, k, benchmark, region) -> bootstrap AIS samples
    per_doc: dict[tuple, Any] = {}  # ability splits' per-document values, for the mean specificity
    splits = ability_benchmarks(profile.benchmarks)

    def mask_hash(variant: Variant) -> str | None:
        if variant not in mask_hashes:
            path = layout.mask_file(variant.ability, variant.k, variant.region)
            mask_hashes[variant] = file_hash(path) if path.is_file() else None
        return mask_hashes[variant]

    def missing(benchmark: str, variant: Variant, reason: str) -> None:
        path = layout.eval_file(variant, benchmark)
        profile.missing.append(MissingEval(benchmark, variant.label(), str(path), reason))

    bar = tqdm(
        total=len(profile.benchmarks) * len(profile.abilities) * len(profile.k_values),
        desc=f"aggregate {spec.tag}",
        unit="cell",
        disable=None if progress else True,
    )
    for benchmark in profile.benchmarks:
        original_path = layout.eval_file(Variant(), benchmark)
        metric_key = None
        try:
            if not original_path.is_file():
                raise _Unusable("missing")
            _, results = _read_results(original_path)
            metric_key = primary_metric(results, settings.metrics.get(benchmark))
            if metric_key is None:
                wanted = settings.metrics.get(benchmark) or "any metric"
                raise _Unusable(f"{wanted!r} not in results (has: {', '.join(results)})")
            original = _load_score(layout, Variant(), benchmark, metric_key, profile.notes)
        except _Unusable as err:
            missing(benchmark, Variant(), str(err))
            for variant in variants:  # their rows cannot be computed: list them, never drop them
                missing(benchmark, variant, NO_ORIGINAL)
            bar.update(len(profile.abilities) * len(profile.k_values))
            continue
        profile.metrics[benchmark] = metric_key
        profile.original_scores[benchmark] = original.value
        if benchmark in splits and original.per_doc is not None:
            per_doc[(benchmark,)] = original.per_doc
        if original.per_doc is not None:
            doc_mean = float(np.mean(list(original.per_doc.values())))
            if not math.isclose(doc_mean, original.value, abs_tol=1e-6):
                profile.notes.append(
                    f"{benchmark}: the reported {metric_key} ({original.value:.4f}) is not the mean over "
                    f"documents ({doc_mean:.4f}); intervals are for the document mean"
                )

        for ability in profile.abilities:
            for k in profile.k_values:
                ablated: dict[str, _Score] = {}
                for region in profile.regions:
                    variant = Variant(ability, k, region)
                    try:
                        ablated[region] = _load_score(layout, variant, benchmark, metric_key, profile.notes, mask_hash)
                    except _Unusable as err:
                        missing(benchmark, variant, str(err))
                        continue
                    score = ablated[region]
                    if (score.limit, score.n_samples) != (original.limit, original.n_samples):
                        profile.notes.append(
                            f"{benchmark} {variant.label()}: limit/n_samples {score.limit}/{score.n_samples} "
                            f"differ from the original's {original.limit}/{original.n_samples}"
                        )
                profile.rows.extend(
                    _cell_rows(
                        profile, ability, k, benchmark, metric_key, original, ablated, resamples, settings.seed, samples
                    )
                )
                if benchmark in splits:
                    per_doc.update(
                        {
                            (benchmark, ability, k, region): score.per_doc
                            for region, score in ablated.items()
                            if score.per_doc is not None
                        }
                    )
                bar.update(1)
    bar.close()
    profile.rows.extend(specificity_rows(profile, samples))
    profile.rows.extend(mean_specificity_rows(profile, per_doc, resamples, settings.seed))
    return profile


def _cell_rows(
    profile: Profile,
    ability: str,
    k: float,
    benchmark: str,
    metric_key: str,
    original: _Score,
    ablated: dict[str, _Score],
    resamples: int,
    seed: int,
    samples_out: dict[tuple, Any] | None = None,
) -> list[AisRow]:
    """The rows of one (ability, k, benchmark) cell: one per region present, plus top-random.

    `samples_out[(ability, k, benchmark, region)]` receives each region's bootstrap AIS samples."""
    import numpy as np

    def new_row(region: str, score_ablated: float | None, ais: float) -> AisRow:
        return AisRow(profile.model, ability, benchmark, k, region, metric_key, original.value, score_ablated, ais)

    rows = {
        region: new_row(region, score.value, impact_score(original.value, score.value))
        for region, score in ablated.items()
    }
    if "top" in rows and "random" in rows:
        rows[ADJUSTED] = new_row(ADJUSTED, None, rows["top"].ais - rows["random"].ais)

    # paired bootstrap over the documents every available per-sample file shares
    paired = [region for region, score in ablated.items() if score.per_doc is not None]
    if resamples > 0 and original.per_doc is not None and paired:
        shared = set(original.per_doc)
        for region in paired:
            shared &= set(ablated[region].per_doc)
        docs = [d for d in original.per_doc if d in shared]  # the original file's order
        if len(docs) < len(original.per_doc):
            profile.notes.append(
                f"{benchmark} {ability}/k{format_k(k)}: intervals over the {len(docs)} of "
                f"{len(original.per_doc)} documents that every per-sample file holds"
            )
        if docs:
            base = np.array([original.per_doc[d] for d in docs])
            matrix = np.array([[ablated[r].per_doc[d] for d in docs] for r in paired])
            samples = dict(zip(paired, bootstrap_ais(base, matrix, resamples, cell_rng(seed, ability, k, benchmark))))
            if ADJUSTED in rows and "top" in samples and "random" in samples:
                samples[ADJUSTED] = samples["top"] - samples["random"]
            for region, values in samples.items():
                if samples_out is not None:
                    samples_out[(ability, k, benchmark, region)] = values
                row = rows[region]
                row.ci_low, row.ci_high = percentile_ci(values)
                row.n_docs = len(docs)
                if not math.isnan(row.ci_low):
                    row.significant = bool(row.ci_low > 0 or row.ci_high < 0)
    return list(rows.values())


# ---- files


def _csv_value(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _json_value(value: Any) -> Any:
    return None if isinstance(value, float) and math.isnan(value) else value


def write_csv(path: Path, rows: list[AisRow]) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        values = asdict(row)
        values["k"] = format_k(row.k)
        writer.writerow([_csv_value(values[c]) for c in CSV_COLUMNS])
    write_text(path, buffer.getvalue())


def profile_json(profile: Profile) -> dict[str, Any]:
    """ais.json: the Profile with NaN written as null."""
    out = asdict(profile)
    out["rows"] = [{key: _json_value(value) for key, value in row.items()} for row in out["rows"]]
    out["report_k"] = profile.report_k
    return out


def _fmt_ais(row: AisRow | None) -> str:
    if row is None:
        return MISSING_CELL
    if math.isnan(row.ais):
        return UNDEFINED_CELL
    return f"{row.ais:+.3f}" + ("*" if row.significant else "")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * len(header)) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines)


def ais_table(profile: Profile, k: float | None = None, region: str = "top") -> str:
    """Markdown table abilities x benchmarks of AIS at k ('*': 95% interval excludes 0)."""
    k = profile.report_k if k is None else k
    return _md_table(
        ["ability"] + profile.benchmarks,
        [[a] + [_fmt_ais(profile.row(a, b, k, region)) for b in profile.benchmarks] for a in profile.abilities],
    )


def render_markdown(profile: Profile) -> str:
    """ais.md: headline tables at the report k, the k sweep per benchmark, region specificity, and
    what is missing."""
    from .specificity import specificity_markdown

    k = format_k(profile.report_k)
    regions = profile.regions + ([ADJUSTED] if {"top", "random"} <= set(profile.regions) else [])
    parts = [
        f"# Benchmark profile: {profile.name} (`{profile.model}`)",
        "",
        "AIS = (s_original - s_ablated) / s_original on each benchmark's primary metric, when the "
        "ability's region (a fraction k of all parameters) is zeroed. Positive: removing the region "
        f"hurt the benchmark. `*`: the 95% paired bootstrap interval ({profile.bootstrap} resamples "
        f"over documents) excludes 0. `{UNDEFINED_CELL}`: the original score is 0. "
        f"`{MISSING_CELL}`: no evaluation (see Missing evaluations). Regions ranked by extract.score = "
        f"`{profile.score}`"
        + (f" on importance with finetune.loss_on = `{profile.loss_on}`" if profile.loss_on else "")
        + " (docs/specificity.md).",
        "",
        "## Primary metrics",
        "",
        _md_table(
            ["benchmark", "metric", "original score"],
            [
                [
                    b,
                    profile.metrics.get(b, MISSING_CELL),
                    f"{profile.original_scores[b]:.4f}" if b in profile.original_scores else MISSING_CELL,
                ]
                for b in profile.benchmarks
            ],
        ),
        "",
        f"## AIS at k = {k} (top region)",
        "",
        ais_table(profile, region="top"),
    ]
    if ADJUSTED in regions:
        parts += ["", f"## Control-adjusted AIS at k = {k} (top - random)", "", ais_table(profile, region=ADJUSTED)]
    for region in ("bottom", "random"):
        if region in profile.regions:
            parts += ["", f"## Control: AIS at k = {k} ({region} region)", "", ais_table(profile, region=region)]
    parts += ["", "## k sweep per benchmark"]
    for benchmark in profile.benchmarks:
        header = ["ability", "region"] + [f"k = {format_k(k_)}" for k_ in profile.k_values]
        rows = [
            [a, r] + [_fmt_ais(profile.row(a, benchmark, k_, r)) for k_ in profile.k_values]
            for a in profile.abilities
            for r in regions
        ]
        parts += [
            "",
            f"### {benchmark} ({profile.metrics.get(benchmark, 'no original score')})",
            "",
            _md_table(header, rows),
        ]
    parts += specificity_markdown(profile)
    parts += ["", "## Missing evaluations", ""]
    if profile.missing:
        grouped: dict[tuple[str, str, str], list[str]] = {}
        for m in profile.missing:
            ability, _, rest = m.variant.partition("/")
            grouped.setdefault((m.benchmark, ability, m.reason), []).append(rest)
        parts.append(
            f"{_count(len(profile.missing), 'evaluation')} could not be used "
            "(every one is listed in ais.json under `missing`)."
        )
        parts.append("")
        parts.append(
            _md_table(
                ["benchmark", "model variant", "k / region", "reason"],
                [[b, a, ", ".join(rest) if any(rest) else "", reason] for (b, a, reason), rest in grouped.items()],
            )
        )
    else:
        parts.append("None.")
    if profile.notes:
        shown = 30
        parts += ["", "## Notes", ""] + [f"- {note}" for note in profile.notes[:shown]]
        if len(profile.notes) > shown:
            parts.append(f"- ... and {len(profile.notes) - shown} more (ais.json, `notes`)")
    return "\n".join(parts) + "\n"


# ---- plots (matplotlib's object API: no pyplot state, no display needed)


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=110, layout="constrained")


def _save(fig: Any, path: Path) -> Path:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    return path


def _file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def _short(metric_key: str) -> str:
    metric, filter_name = _split_key(metric_key)
    return metric if filter_name == "none" else f"{metric} ({filter_name})"


def _metric_title(profile: Profile) -> str:
    metrics = {profile.metrics[b] for b in profile.benchmarks if b in profile.metrics}
    return f"metric {_short(metrics.pop())}" if len(metrics) == 1 else "metric per benchmark (axis labels)"


def _symmetric_limit(values: list[float], floor: float = 0.05) -> float:
    finite = [abs(v) for v in values if not math.isnan(v)]
    return max([floor] + finite)


def plot_heatmap(profile: Profile, path: Path, region: str = "top") -> Path:
    """Ability x benchmark AIS at the report k, diverging colours centred at 0, values annotated."""
    import numpy as np
    from matplotlib.colors import Normalize

    abilities, benchmarks = profile.abilities, profile.benchmarks
    values = np.full((len(abilities), len(benchmarks)), np.nan)
    cells = [[profile.row(a, b, region=region) for b in benchmarks] for a in abilities]
    for i, line in enumerate(cells):
        for j, row in enumerate(line):
            if row is not None:
                values[i, j] = row.ais
    limit = _symmetric_limit(list(values.ravel()))
    norm = Normalize(-limit, limit)
    fig = _figure(max(6.5, 2.6 + 1.05 * len(benchmarks)), 2.2 + 0.42 * len(abilities))
    ax = fig.add_subplot()
    ax.set_facecolor("#e6e6e6")  # missing or undefined cells
    image = ax.imshow(np.ma.masked_invalid(values), cmap="RdBu_r", norm=norm, aspect="auto")
    for i, line in enumerate(cells):
        for j, row in enumerate(line):
            text = _fmt_ais(row)
            dark = row is not None and not math.isnan(row.ais) and abs(row.ais) > 0.6 * limit
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color="white" if dark else "black")
    ax.set_xticks(
        range(len(benchmarks)),
        [f"{b}: {_short(profile.metrics[b])}" if b in profile.metrics else b for b in benchmarks],
        rotation=30,
        ha="right",
        rotation_mode="anchor",
        fontsize=8,
    )
    ax.set_yticks(range(len(abilities)), [a.replace("_", " ") for a in abilities], fontsize=8)
    ax.set_xlabel("benchmark: primary metric")
    fig.colorbar(image, ax=ax, shrink=0.85, label="AIS (> 0: ablation hurts)")
    what = "top region" if region == "top" else region
    ax.set_title(
        f"{profile.model}: AIS at k = {format_k(profile.report_k)} ({what})\n{_metric_title(profile)}; "
        f"* 95% CI excludes 0; {MISSING_CELL} not evaluated",
        fontsize=9,
    )
    return _save(fig, path)


def plot_benchmark_profile(profile: Profile, benchmark: str, path: Path) -> Path:
    """One benchmark's AIS over the abilities at the report k (top region), with 95% intervals,
    beside the random control."""
    import numpy as np

    abilities = profile.abilities
    y = np.arange(len(abilities))
    fig = _figure(7.0, 1.4 + 0.38 * len(abilities))
    ax = fig.add_subplot()
    shown = [r for r in ("top", "random") if r in profile.regions]
    height = 0.8 / len(shown)
    colours = {"top": "#c0392b", "random": "#9a9a9a"}
    for n, region in enumerate(shown):
        rows = [profile.row(a, benchmark, region=region) for a in abilities]
        ais = np.array([r.ais if r else np.nan for r in rows])
        low = np.array([r.ci_low if r else np.nan for r in rows])
        high = np.array([r.ci_high if r else np.nan for r in rows])
        err = np.vstack([np.where(np.isnan(low), 0, ais - low), np.where(np.isnan(high), 0, high - ais)])
        offset = (n - (len(shown) - 1) / 2) * height
        ax.barh(
            y + offset,
            np.nan_to_num(ais),
            height=height * 0.9,
            color=colours[region],
            xerr=np.nan_to_num(err),
            error_kw={"elinewidth": 1, "capsize": 2, "ecolor": "#333333"},
            label=f"{region} region" + (" (control)" if region == "random" else ""),
        )
        for yi, row in zip(y + offset, rows):
            if row is None or math.isnan(row.ais):
                ax.text(0, yi, f" {MISSING_CELL if row is None else UNDEFINED_CELL}", va="center", fontsize=7)
    if benchmark in profile.original_scores and profile.original_scores[benchmark] == 0:
        ax.text(
            0.5,
            0.5,
            "original score is 0: AIS undefined",
            transform=ax.transAxes,
            ha="center",
            va="center",
            color="#666666",
        )
    ax.axvline(0, color="black", linewidth=0.8)
    ax.axvline(
        profile.threshold, color="#555555", linewidth=0.8, linestyle="--", label=f"threshold {profile.threshold:g}"
    )
    ax.set_yticks(y, [a.replace("_", " ") for a in abilities], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("AIS (bars: point estimate, whiskers: 95% paired bootstrap CI)")
    ax.legend(fontsize=7, loc="best")
    metric = _short(profile.metrics[benchmark]) if benchmark in profile.metrics else "no original score"
    ax.set_title(f"{profile.model}: profile of {benchmark} ({metric}) at k = {format_k(profile.report_k)}", fontsize=9)
    return _save(fig, path)


def plot_ribbons(profile: Profile, path: Path) -> Path:
    """Ability -> benchmark links where the top-region AIS at the report k exceeds the threshold;
    line width proportional to AIS (the paper's profile figure)."""
    import matplotlib
    from matplotlib.patches import PathPatch
    from matplotlib.path import Path as CurvePath

    abilities, benchmarks = profile.abilities, profile.benchmarks
    links = [
        (i, j, row)
        for i, a in enumerate(abilities)
        for j, b in enumerate(benchmarks)
        if (row := profile.row(a, b)) is not None and not math.isnan(row.ais) and row.ais > profile.threshold
    ]
    rows = max(len(abilities), len(benchmarks))
    fig = _figure(8.5, 1.6 + 0.45 * rows)
    ax = fig.add_subplot()

    def ys(count: int) -> list[float]:
        return [1.0 - (i + 0.5) / count for i in range(count)]

    ya, yb = ys(len(abilities)), ys(len(benchmarks))
    colours = matplotlib.colormaps["tab10"]
    widest = max([row.ais for _, _, row in links], default=1.0)
    for i, j, row in sorted(links, key=lambda link: link[2].ais):
        curve = CurvePath(
            [(0.0, ya[i]), (0.5, ya[i]), (0.5, yb[j]), (1.0, yb[j])],
            [CurvePath.MOVETO, CurvePath.CURVE4, CurvePath.CURVE4, CurvePath.CURVE4],
        )
        ax.add_patch(
            PathPatch(
                curve,
                facecolor="none",
                edgecolor=colours(i % 10),
                alpha=0.55,
                linewidth=1.0 + 9.0 * row.ais / widest,
                capstyle="butt",
            )
        )
    for i, a in enumerate(abilities):
        ax.plot(0, ya[i], "o", color=colours(i % 10), markersize=6)
        ax.text(-0.03, ya[i], a.replace("_", " "), ha="right", va="center", fontsize=8)
    for j, b in enumerate(benchmarks):
        ax.plot(1, yb[j], "s", color="#444444", markersize=6)
        ax.text(1.03, yb[j], b, ha="left", va="center", fontsize=8)
    if not links:
        ax.text(0.5, 0.5, f"no AIS above {profile.threshold:g}", ha="center", va="center", fontsize=10, color="#666666")
    ax.set_xlim(-0.75, 1.75)
    ax.set_ylim(0, 1)
    ax.axis("off")
    ax.set_title(
        f"{profile.model}: ability → benchmark links with AIS > {profile.threshold:g} "
        f"(top region, k = {format_k(profile.report_k)}; width ∝ AIS, widest {widest:.3f})",
        fontsize=9,
    )
    return _save(fig, path)


def plot_k_sweep(profile: Profile, benchmark: str, path: Path) -> Path:
    """AIS versus k (log axis) for one benchmark: a panel per ability, a line per region with its
    95% interval as a band."""
    import matplotlib.ticker
    import numpy as np

    abilities = profile.abilities
    columns = min(5, len(abilities))
    panels = math.ceil(len(abilities) / columns)
    fig = _figure(2.3 * columns + 0.6, 2.0 * panels + 0.8)
    axes = np.atleast_1d(fig.subplots(panels, columns, sharex=True, sharey=True, squeeze=False)).ravel()
    colours = {"top": "#c0392b", "bottom": "#2e6fb7", "random": "#8a8a8a"}
    ks = np.array(profile.k_values)
    for ax, ability in zip(axes, abilities):
        for region in profile.regions:
            rows = [profile.row(ability, benchmark, k, region) for k in profile.k_values]
            ais = np.array([r.ais if r else np.nan for r in rows])
            low = np.array([r.ci_low if r else np.nan for r in rows])
            high = np.array([r.ci_high if r else np.nan for r in rows])
            colour = colours.get(region)
            if len(ks) > 1:
                ax.plot(ks, ais, marker="o", markersize=3, linewidth=1.2, color=colour, label=region)
                ax.fill_between(ks, low, high, color=colour, alpha=0.15, linewidth=0)
            else:  # one k: a band has no width; error bars, dodged so the regions do not hide each other
                dodge = 1.12 ** (profile.regions.index(region) - (len(profile.regions) - 1) / 2)
                ax.errorbar(
                    ks * dodge,
                    ais,
                    yerr=[np.nan_to_num(ais - low), np.nan_to_num(high - ais)],
                    fmt="o",
                    markersize=3,
                    color=colour,
                    elinewidth=1,
                    capsize=3,
                    label=region,
                )
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_xscale("log")
        ax.set_xlim(ks.min() / 2, ks.max() * 2)  # explicit: a panel with no finite AIS has no data limits
        # ticks at the k values only: log-axis minor labels overlap on a panel this narrow
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_xticks(ks, [f"{k:g}" for k in ks], rotation=45 if len(ks) > 2 else 0)
        ax.set_title(ability.replace("_", " "), fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in axes[len(abilities) :]:
        ax.set_visible(False)
    axes[0].legend(fontsize=7)
    fig.supxlabel("k (fraction of all parameters, log scale)", fontsize=8)
    fig.supylabel("AIS", fontsize=8)
    metric = _short(profile.metrics[benchmark]) if benchmark in profile.metrics else "no original score"
    fig.suptitle(
        f"{profile.model}: {benchmark} ({metric}), AIS vs k; {'bands' if len(ks) > 1 else 'bars'}: 95% CI", fontsize=9
    )
    return _save(fig, path)


def write_plots(profile: Profile, folder: Path) -> list[Path]:
    """Every plot of one model into `folder`."""
    written = [plot_heatmap(profile, folder / "heatmap.png"), plot_ribbons(profile, folder / "ribbons.png")]
    for benchmark in profile.benchmarks:
        if benchmark not in profile.metrics:
            continue  # no original score: nothing to draw, and it is listed as missing
        name = _file_name(benchmark)
        written.append(plot_benchmark_profile(profile, benchmark, folder / f"profile_{name}.png"))
        written.append(plot_k_sweep(profile, benchmark, folder / f"ksweep_{name}.png"))
    return written


def write_profile(profile: Profile, folder: Path, plots: bool = True) -> list[Path]:
    """ais.csv, ais.json, ais.md and the plots of one model into `folder` (atomic writes)."""
    folder = Path(folder)
    write_csv(folder / "ais.csv", profile.rows)
    write_json(folder / "ais.json", profile_json(profile))
    write_text(folder / "ais.md", render_markdown(profile))
    written = [folder / "ais.csv", folder / "ais.json", folder / "ais.md"]
    if plots:
        written += write_plots(profile, folder)
    return written


def aggregate(
    config: str = "config.yml", model: str | None = None, report_k: float | None = None, plots: bool = True
) -> None:
    """Ability Impact Scores, bootstrap intervals, tables and plots under <model>/profile/.

    AIS = (s(original) - s(ablated)) / s(original) on each benchmark's primary metric (aggregate.metrics,
    else the first of acc_norm, acc, exact_match, pass@1 in the results). Works on whatever
    evaluations exist; missing or unreadable ones are listed in ais.md and ais.json.

    Writes, per model: ais.csv (columns model, ability, benchmark, k, region, metric, score_original,
    score_ablated, ais, ci_low, ci_high, significant, n_docs; region "top-random" rows hold the
    control-adjusted AIS(top) - AIS(random); benchmark "specificity" rows hold AIS on the ability's
    own split minus the mean AIS on the other abilities' splits; empty cells are undefined or
    unavailable), ais.json, ais.md (with the specificity table and diagonal dominance), heatmap.png,
    ribbons.png, profile_<benchmark>.png, ksweep_<benchmark>.png, and from the masks overlap.csv,
    overlap_k<k>.png, layers.csv and layers_k<k>.png (as `benchprof overlap`). An evaluation made on
    a mask that extract has since replaced (e.g. after switching extract.score) is listed as missing.

    Arguments:
        config: path of config.yml.
        model: only this model (name or tag).
        report_k: k for the headline tables and plots; default aggregate.report_k or the largest k.
        plots: also draw the PNG plots.
    """
    from .specificity import model_overlap, overlap_summary, specificity_summary

    started = time.time()
    cfg = load_config(config)
    specs = [cfg.model(model)] if model is not None else list(cfg.models)
    k = default_report_k(cfg, report_k)
    done: list[tuple[Profile, Path, int]] = []
    for spec in specs:
        model_started = time.time()
        profile = load_scores(cfg, spec.tag, report_k=k)
        folder = Layout(cfg.output_root, spec.tag).profile_dir
        if not profile.original_scores and all(m.reason in ("missing", NO_ORIGINAL) for m in profile.missing):
            overlap_files, _, _ = model_overlap(cfg, spec.tag, plots)  # masks alone still show their overlap
            print(
                f"aggregate: {spec.tag}: no evaluations under {folder.parent}; skipped"
                + (f" (wrote {len(overlap_files)} overlap files)" if overlap_files else "")
            )
            continue
        clear_manifest(folder)  # the manifest, written last, marks a complete profile
        overlap_files, overlap_rows, overlap_notes = model_overlap(cfg, spec.tag, plots)
        profile.overlap = [line for line in overlap_summary(overlap_rows).splitlines() if line]
        profile.notes += overlap_notes
        written = write_profile(profile, folder, plots=plots) + overlap_files
        write_manifest(
            folder,
            inputs={
                "aggregate": asdict(cfg.aggregate),
                "report_k": k,
                "abilities": profile.abilities,
                "benchmarks": profile.benchmarks,
                "k_values": profile.k_values,
                "regions": profile.regions,
            },
            extra={"rows": len(profile.rows), "missing": len(profile.missing), "files": [p.name for p in written]},
            started=model_started,
        )
        done.append((profile, folder, len(written)))
    if not any(profile.rows for profile, _, _ in done):
        tags = ", ".join(s.tag for s in specs)
        raise BenchprofError(
            f"aggregate: no AIS could be computed for {tags} under {cfg.output_root} "
            "(run `benchprof evaluate` first; ais.md lists what is missing)"
            if done
            else f"aggregate: no evaluation results for {tags} under {cfg.output_root} (run `benchprof evaluate` first)"
        )
    for profile, folder, files in done:
        print(f"\n{profile.model}: AIS at k = {format_k(k)}, top region (* 95% CI excludes 0)")
        print(ais_table(profile))
        for line in profile.overlap + specificity_summary(profile, k):
            print(line)
    print(
        f"\naggregate: {sum(len(p.rows) for p, _, _ in done)} rows, "
        f"{_count(sum(len(p.missing) for p, _, _ in done), 'missing evaluation')}, "
        f"{sum(files for _, _, files in done)} files -> {', '.join(str(f) for _, f, _ in done)} "
        f"in {time.time() - started:.1f} s"
    )
