"""Stage `aggregate`: a model's evaluations -> Ability Impact Scores with intervals -> tables and plots.

Reads a model's evaluations into a Profile (profile_scores.load_scores: every AIS, its paired bootstrap interval
and test, the region specificity rows), then writes the profile (report.py, plots.py) and the overlap of the
regions (overlap.py) into <model>/profile/ (file names: layout.py), and with several models their comparison.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from benchprof import BenchprofError
from benchprof.core.config import Config, ModelSpec
from benchprof.core.layout import CompareLayout, Layout
from benchprof.core.ownership import recorded_files, remove_unwritten
from benchprof.core.results import evaluation_hashes
from benchprof.core.storage import clear_manifest, write_manifest
from benchprof.profile.analyses import JointDraws, compare_models, write_analyses, write_comparison
from benchprof.profile.documents import write_documents
from benchprof.profile.formatting import counted
from benchprof.profile.plots import write_plots
from benchprof.profile.report import write_tables
from benchprof.profile.rows import Profile
from benchprof.profile.spikes import current_spikes, quote_reach, spikes_inputs
from benchprof.profile.terminal import print_profile
from benchprof.stages.overlap import model_overlap, overlap_summary
from benchprof.stages.profile_scores import NO_ORIGINAL, default_report_k, load_scores, never_evaluated, profile_inputs


def write_profile(profile: Profile, layout: Layout, plots: bool = True) -> list[Path]:
    """ais.csv, ais.json, ais.md, benchmarks.csv, similarity.csv and the plots of one model into its profile
    folder (atomic writes)."""
    return (
        write_tables(profile, layout)
        + write_analyses(profile, layout, plots=plots)
        + (write_plots(profile, layout) if plots else [])
    )


@dataclass(frozen=True)
class _Written:
    """One model's profile as `aggregate` wrote it."""

    profile: Profile
    folder: Path  # its profile folder
    files: int  # how many files were written, the overlap's included


def _aggregate_model(cfg: Config, spec: ModelSpec, k: float, plots: bool, draws: JointDraws) -> _Written | None:
    """Compute and write one model's profile and the overlap of its masks; None when it has no evaluations."""
    from benchprof.stages.status import evaluation_states

    model_started = time.time()
    profile = load_scores(cfg, spec.tag, report_k=k, joint_out=draws, judged=evaluation_states(cfg, spec))
    layout = Layout(cfg.output_root, spec.tag)
    folder = layout.profile_dir
    if not profile.original_scores and never_evaluated(profile):
        overlap_files, _, _ = model_overlap(cfg, spec.tag, plots)  # masks alone still show their overlap
        print(
            f"aggregate: {spec.tag}: no evaluations under {folder.parent}; skipped"
            + (f" (wrote {len(overlap_files)} overlap files)" if overlap_files else "")
        )
        return None
    if not profile.rows:  # nothing current to profile: the profile on disk (maybe another config's) is left alone
        first = next((m for m in profile.missing if m.reason != NO_ORIGINAL), None)
        named = f" (first: {first.benchmark} {first.variant}: {first.reason})" if first else ""
        print(
            f"aggregate: {spec.tag}: no AIS from {counted(len(profile.missing), 'evaluation')} missing or stale"
            f"{named}; nothing written"
        )
        return None
    previous = recorded_files(folder)
    clear_manifest(folder)  # the manifest, written last, marks a complete profile
    overlap_files, overlap_rows, overlap_notes = model_overlap(cfg, spec.tag, plots)
    profile.overlap = [line for line in overlap_summary(overlap_rows).splitlines() if line]
    profile.notes += overlap_notes
    profile.notes = list(dict.fromkeys(profile.notes))  # a note shared by rows or metrics: once
    documents = write_documents(layout, profile)  # first: ais.md quotes a spikes.csv measured on these documents
    spiked = current_spikes(layout.spikes_dir, spikes_inputs(documents, profile_inputs(cfg, k)))
    quote_reach(profile, spiked)
    written = write_profile(profile, layout, plots=plots) + overlap_files + [documents]
    remove_unwritten(folder, previous, written)  # e.g. the plots of an ability no longer profiled
    write_manifest(
        folder,
        files=written,
        inputs=profile_inputs(cfg, k),
        extra={
            "command": "aggregate",  # the folder's owner (ownership.owned_by)
            "rows": len(profile.rows),
            "missing": len(profile.missing),
            "written": [p.name for p in written],  # not "files": that key holds each file's size and sha256
            "evaluations": evaluation_hashes(layout.model_dir),  # status: is the profile behind them?
        },
        started=model_started,
    )
    return _Written(profile, folder, len(written))


def aggregate(cfg: Config, model: str | None = None, report_k: float | None = None, plots: bool = True) -> None:
    """Ability Impact Scores, bootstrap intervals, tables and plots under <model>/profile/.

    AIS = (s(original) - s(ablated)) / s(original) on each benchmark's primary metric (aggregate.metrics,
    else the first of acc_norm, acc, exact_match, pass@1 in the results). Works on whatever
    evaluations exist; missing or unreadable ones are listed in ais.md and ais.json.

    Writes, per model: ais.csv (one column per AisRow field of profile/rows.py: the cell, scores, AIS, 95%
    interval, paired test, Benjamini-Hochberg q-value and star, chance level, minimum detectable AIS;
    docs/statistics.md; region "top-random" rows hold AIS(top) minus the mean AIS of every ability's
    random draws at k; metric "p_correct" rows the same cells on each item's probability of the correct
    option; benchmark "specificity" rows hold AIS on the ability's own split minus the mean AIS on the
    other abilities' splits; empty cells are undefined or unavailable), ais.json, ais.md (with the
    statistics, the null calibration of the random control, specificity and diagonal dominance),
    benchmarks.csv (each benchmark's significantly positive and negative abilities and the spread of its positive
    AIS mass, docs/analyses.md), similarity.csv and similarity.png (every pair of benchmarks' profiles),
    heatmap.png, ribbons.png, profile_<benchmark>.png, ksweep_<benchmark>.png, and from the masks overlap.csv,
    overlap_k<k>.png, layers.csv and layers_k<k>.png (as `benchprof overlap`). An evaluation made on
    a mask that extract has since replaced (e.g. after switching extract.score) is listed as missing. With several
    models, also outputs/compare/: profiles.csv, correlation.csv, compare.md and profiles.png (each benchmark's
    profile per model, its similarity between models, the findings that hold in every model).

    Arguments:
        cfg: the config (on the command line: the path of config.yml).
        model: only this model (name or tag).
        report_k: k for the headline tables and plots; default aggregate.report_k or the largest k.
        plots: also draw the PNG plots.
    """
    started = time.time()
    specs = cfg.selected_models(model)
    compare_dir = CompareLayout(cfg.output_root).compare_dir  # no model is tagged so (config: layout.SHARED_FOLDERS)
    k = default_report_k(cfg, report_k)
    done: list[_Written] = []
    draws: dict[str, JointDraws] = {}  # model -> its benchmarks' joint resamples
    for spec in specs:
        draws[spec.tag] = {}
        written = _aggregate_model(cfg, spec, k, plots, draws[spec.tag])
        if written is not None:
            done.append(written)
    if not done:
        tags = ", ".join(s.tag for s in specs)
        raise BenchprofError(
            f"aggregate: no current evaluation results for {tags} under {cfg.output_root} "
            f"(run `benchprof evaluate {cfg.path}` first; `benchprof status {cfg.path}` lists what is missing or stale)"
        )
    compared = [w.profile for w in done if w.profile.rows]
    compare_files: list[Path] = []
    if len(compared) > 1:
        comparison = compare_models(compared, [draws[p.model] for p in compared])
        compare_files = write_comparison(comparison, CompareLayout(cfg.output_root), plots=plots)
    for w in done:
        print_profile(w.profile, k)
    if compare_files:
        print(f"\ncompare: {len(compared)} models -> {compare_dir} ({len(compare_files)} files)")
    print(
        f"\naggregate: {sum(len(w.profile.rows) for w in done)} rows, "
        f"{counted(sum(len(w.profile.missing) for w in done), 'missing evaluation')}, "
        f"{sum(w.files for w in done)} files -> {', '.join(str(w.folder) for w in done)} "
        f"in {time.time() - started:.1f} s"
    )
