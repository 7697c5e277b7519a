"""`benchprof status`: what a config's run has done, what is stale and what is pending.

Status rebuilds each output's inputs the way its stage does (finetune.importance_inputs,
extract.region_inputs, eval_jobs.JobInputs, from the data files, importance headers and mask
hashes) and compares them with the inputs recorded in its manifest or eval JSON. Model weights are
not loaded: the model fingerprint recorded by finetune is taken as current unless --fingerprint.
An output is *done* when its recorded inputs match and its files exist, *stale* when it exists
but was computed from something that changed (itself or upstream), *pending* when it is absent.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from benchprof import BenchprofError
from benchprof.core.config import NEURON_SCORES, Config, ModelSpec
from benchprof.core.storage import judge
from benchprof.stages.preflight import needed_abilities

if TYPE_CHECKING:
    import torch

    from benchprof.core.layout import Variant
    from benchprof.stages.eval_jobs import Job

STATES = ("done", "stale", "pending")


@dataclass
class Item:
    """One output of the plan and its state."""

    stage: str  # data, importance, masks, checkpoint, eval, profile
    model: str  # the model tag ("" for data)
    what: str  # e.g. "Spatial_Reasoning k0.05", "Spatial_Reasoning/k0.05/top Spatial_Reasoning"
    state: str  # done, stale, pending
    why: str = ""


KEPT_IF = "kept if what it reads is computed again the same"  # the stages are deterministic: then nothing is redone


def upstream_of(item: Item | None, name: str) -> str:
    """Why an output that reads `item` cannot be done: "" when it is done, or when only its files are gone or
    damaged under a manifest whose inputs hold (its stage writes them again as they were, so what reads them is
    judged by what the manifest recorded: `run` redoes only that stage)."""
    if item is None or item.state == "done" or regenerable(item):
        return ""
    if (item.state == "pending" and not item.why) or KEPT_IF in item.why:  # no manifest: maybe computed as it was
        return f"{name} {item.state} ({KEPT_IF})"
    return f"{name} {item.state}"


def regenerable(item: Item) -> bool:
    """Whether an output is stale only because files its manifest records are missing or damaged (storage.judge)."""
    return item.state == "stale" and item.why.startswith(("missing ", "damaged "))


def data_items(cfg: Config) -> dict[str, Item]:
    from benchprof.core.layout import data_output
    from benchprof.stages.data import ability_folder, data_inputs, generated_splits, is_hub_id

    items = {}
    for ability in needed_abilities(cfg):
        spec = cfg.dataset(ability)
        folder = ability_folder(cfg, ability)
        output = data_output(folder, ability, generated_splits(cfg, ability))
        if spec.path:
            present = is_hub_id(cfg, ability) or all(f.is_file() for f in output.files)
            items[ability] = Item(
                "data",
                "",
                ability,
                "done" if present else "pending",
                "user data" if present else f"user data missing under {folder}",
            )
            continue
        expected = data_inputs(cfg, ability, cfg.data.train_size, cfg.data.test_size, cfg.data.seed)
        state, why = judge(output, expected)
        items[ability] = Item("data", "", ability, state, why)
    return items


def model_dtype(cfg: Config, spec: ModelSpec) -> str | None:
    """The dtype finetune will load the model in, when the config fixes it."""
    name = cfg.finetune.dtype if cfg.finetune.dtype != "auto" else spec.dtype
    return None if name == "auto" else f"torch.{name}"


def importance_items(cfg: Config, spec: ModelSpec, data: dict[str, Item], fingerprint: str | None) -> dict[str, Item]:
    from benchprof.core.layout import Layout
    from benchprof.stages.data import load_split
    from benchprof.stages.finetune import importance_inputs

    layout = Layout(cfg.output_root, spec.tag)
    settings, dtype = cfg.finetune, model_dtype(cfg, spec)
    items = {}
    for ability in cfg.abilities():
        expected, upstream = None, upstream_of(data.get(ability), "data")
        if not upstream:
            try:
                records = load_split(cfg, ability, "train")
            except BenchprofError as err:
                upstream = f"data unreadable: {err}"
            else:
                records = records[: settings.max_samples] if settings.max_samples else records
                expected = importance_inputs(
                    cfg, ability, settings, records, cfg.settings.train_batch_size, fingerprint, dtype
                )
        # without loading the weights, the recorded fingerprint (and an 'auto' dtype) are taken as they are
        ignore = (() if fingerprint else ("fingerprint",)) + (() if dtype else ("dtype",))
        state, why = judge(layout.importance_output(ability), expected, upstream, ignore)
        items[ability] = Item("importance", spec.tag, ability, state, why)
    return items


def attribution_items(cfg: Config, spec: ModelSpec, data: dict[str, Item]) -> dict[str, Item]:
    """With a neuron score: each ability's statistic (attribution or activity, stages/neurons.py), in place of its
    importance."""
    from benchprof.core.layout import Layout
    from benchprof.stages.extract import placebo_key
    from benchprof.stages.neurons import statistic_of
    from benchprof.stages.statistic_files import attribution_inputs

    layout = Layout(cfg.output_root, spec.tag)
    statistic = statistic_of(cfg.extract.score)
    items = {}
    for placebo in (False, True) if "placebo" in cfg.extract.regions else (False,):
        for ability in cfg.abilities():
            expected, upstream = None, upstream_of(data.get(ability), "data")
            if not upstream:
                try:
                    expected = attribution_inputs(cfg, spec, ability, False, None, statistic, placebo)
                except BenchprofError as err:
                    upstream = f"data unreadable: {err}"
            output = layout.attribution_output(ability, statistic, placebo)
            state, why = judge(output, expected, upstream)
            items[placebo_key(ability) if placebo else ability] = Item(output.stage, spec.tag, ability, state, why)
    return items


def neuron_mask_items(cfg: Config, spec: ModelSpec, attribution: dict[str, Item]) -> dict[tuple[str, float], Item]:
    """With a neuron score: each (ability, k) neuron-region folder, judged from the attribution files it reads."""
    from benchprof.core.layout import Layout
    from benchprof.stages.extract import attribution_used, neuron_identities, neuron_region_inputs, placebo_key
    from benchprof.stages.neurons import statistic_of

    layout = Layout(cfg.output_root, spec.tag)
    statistic = statistic_of(cfg.extract.score)
    items = {}
    for ability in cfg.abilities():
        used = attribution_used(cfg, ability, cfg.extract.score)
        read = used + [placebo_key(b) for b in used if placebo_key(b) in attribution]
        upstream = next((u for b in read if (item := attribution.get(b)) and (u := upstream_of(item, item.stage))), "")
        for k in cfg.settings.k_values:
            output = layout.masks_output(ability, k, cfg.extract.region_names())
            expected = None
            if not upstream:
                expected = neuron_region_inputs(cfg, ability, k, neuron_identities(cfg, layout, ability, statistic))
            state, why = judge(output, expected, upstream)
            items[(ability, k)] = Item("masks", spec.tag, output.label, state, why)
    return items


def mask_items(cfg: Config, spec: ModelSpec, importance: dict[str, Item]) -> dict[tuple[str, float], Item]:
    from benchprof.core.layout import Layout
    from benchprof.core.regions import region_metadata
    from benchprof.stages.extract import region_inputs
    from benchprof.stages.weight_scores import importance_identity

    if cfg.extract.score in NEURON_SCORES:
        return neuron_mask_items(cfg, spec, importance)
    layout = Layout(cfg.output_root, spec.tag)
    items = {}
    for ability in cfg.abilities():
        path = layout.importance_file(ability)
        upstream = upstream_of(importance.get(ability), "importance")
        metadata, identity = None, None
        if not upstream:
            try:
                metadata, identity = region_metadata(path), importance_identity(path)
            except BenchprofError as err:
                upstream = str(err)
        for k in cfg.settings.k_values:
            output = layout.masks_output(ability, k, cfg.extract.region_names())
            expected = None
            if metadata is not None and identity is not None:
                n = math.floor(k * int(metadata.get("total_params", 0)))
                expected = region_inputs(cfg, ability, k, n, identity, metadata, cfg.extract.selection)
            state, why = judge(output, expected, upstream)
            items[(ability, k)] = Item("masks", spec.tag, output.label, state, why)
    return items


def eval_items(cfg: Config, spec: ModelSpec, masks: dict[tuple[str, float], Item], data: dict[str, Item]) -> list[Item]:
    """Each evaluation job of the model, judged."""
    return [item for _, item in judged_jobs(cfg, spec, masks, data)]


def judged_jobs(
    cfg: Config, spec: ModelSpec, masks: dict[tuple[str, float], Item], data: dict[str, Item]
) -> list[tuple[Job, Item]]:
    """Each evaluation job of the model with its state: its result's recorded inputs against those the config, the
    model's content, the masks and the benchmark's data give now, and the states of the outputs it reads."""
    from benchprof.core.layout import Layout
    from benchprof.stages import tasks
    from benchprof.stages.eval_jobs import JobInputs, job_list

    layout = Layout(cfg.output_root, spec.tag)
    planned_error = ""
    try:
        include_path, mapping, planned = tasks.plan_tasks(cfg)
    except BenchprofError as err:  # a benchmark's data is not generated yet, or damaged (and written again)
        include_path, mapping, planned = tasks.tasks_dir(cfg), {}, {}
        planned_error = f"benchmark data pending ({err})"
        if any(regenerable(item) for item in data.values()):
            planned_error = f"benchmark data to write again ({KEPT_IF})"
    job_inputs = JobInputs(cfg, spec, layout, include_path, mapping, cfg.evals.backend, None, planned, False)
    items: list[tuple[Job, Item]] = []
    for job in job_list(cfg):
        v = job.variant
        output = layout.eval_output(v, job.benchmark)
        upstream = "" if v.is_original else upstream_of(masks.get(v.parts()[:2]), "masks")
        upstream = (
            upstream
            or (upstream_of(data.get(job.benchmark), "benchmark data") if job.benchmark in data else "")
            or (planned_error if tasks.is_local(cfg, job.benchmark) else "")
        )
        expected = None
        if not upstream:
            try:
                expected = job_inputs(job)
            except (BenchprofError, KeyError, OSError) as err:
                upstream = f"inputs unavailable ({err})"
        state, why = judge(output, expected, upstream)
        items.append((job, Item("eval", spec.tag, output.label, state, why)))
    return items


def evaluation_states(cfg: Config, spec: ModelSpec) -> dict[tuple[Variant, str], tuple[str, str]]:
    """(variant, benchmark) -> its evaluation judged exactly as `benchprof status` judges it (upstream outputs
    included): what `aggregate` and `compare` read only when it is done. Model weights are not loaded."""
    data = data_items(cfg)
    _, masks = region_items(cfg, spec, data, None)
    return {(job.variant, job.benchmark): (item.state, item.why) for job, item in judged_jobs(cfg, spec, masks, data)}


def region_items(
    cfg: Config, spec: ModelSpec, data: dict[str, Item], fingerprint: str | None
) -> tuple[dict[str, Item], dict[tuple[str, float], Item]]:
    """The model's importance (or, with a neuron score, attribution) outputs and its mask folders, judged."""
    if cfg.extract.score in NEURON_SCORES:
        importance = attribution_items(cfg, spec, data)
    else:
        importance = importance_items(cfg, spec, data, fingerprint)
    return importance, mask_items(cfg, spec, importance)


def checkpoint_items(cfg: Config, spec: ModelSpec, masks: dict[tuple[str, float], Item]) -> list[Item]:
    """The `damage --save` checkpoints: every one on disk, and every one evals.backend vllm needs.

    Judged like any output: its manifest's inputs (mask hash, the model fingerprint the mask records,
    dtype) and every file it recorded, so a truncated or deleted model.safetensors is stale."""
    from benchprof.core.layout import Layout
    from benchprof.core.regions import region_metadata
    from benchprof.stages.damage import checkpoint_inputs, eval_dtype, variants

    layout = Layout(cfg.output_root, spec.tag)
    items = []
    for v in variants(cfg):
        output = layout.checkpoint_output(*v.parts())
        if cfg.evals.backend != "vllm" and not output.manifest.parent.exists():
            continue  # optional under backend hf: listed once written
        upstream, expected = upstream_of(masks.get(v.parts()[:2]), "masks"), None
        if not upstream:
            mask = layout.mask_file(*v.parts())
            fingerprint = region_metadata(mask).get("fingerprint", "")
            expected = checkpoint_inputs(layout, v, fingerprint, eval_dtype(cfg, spec))
        state, why = judge(output, expected, upstream)
        items.append(Item("checkpoint", spec.tag, output.label, state, why))
    return items


def profile_item(cfg: Config, spec: ModelSpec, evals: list[Item]) -> Item:
    from benchprof.core.layout import Layout
    from benchprof.core.results import evaluation_hashes
    from benchprof.core.storage import read_manifest
    from benchprof.stages.eval_jobs import job_list
    from benchprof.stages.profile_scores import profile_inputs

    layout = Layout(cfg.output_root, spec.tag)
    output = layout.profile_output()
    state, why = judge(output, profile_inputs(cfg))
    if state == "done":
        unfinished = sum(1 for e in evals if e.state != "done")
        recorded = (read_manifest(layout.profile_dir) or {}).get("evaluations", {})
        current = evaluation_hashes(layout.model_dir)
        # this config's evaluations only: another config's benchmarks evaluated in the same folder are not the
        # profile's, and leave it current
        own = [str(layout.eval_file(j.variant, j.benchmark).relative_to(layout.model_dir)) for j in job_list(cfg)]
        changed = [path for path in own if path in current and recorded.get(path) != current[path]]
        if unfinished:
            state, why = "stale", f"{unfinished} evaluation(s) not done"
        elif changed:
            state, why = "stale", f"{len(changed)} evaluation(s) newer than the profile"
    return Item("profile", spec.tag, output.label, state, why)


def spikes_items(cfg: Config, spec: ModelSpec) -> list[Item]:
    """The model's spikes.csv (`benchprof spikes`), where one was written: done while it was measured on the profile
    as it is now (ais.md quotes it), else stale. None where spikes never ran: they are not a stage of `run`."""
    from benchprof.core.layout import Layout
    from benchprof.profile.documents import DOCUMENTS
    from benchprof.profile.spikes import SPIKES, spikes_inputs, spikes_output
    from benchprof.stages.profile_scores import profile_inputs

    layout = Layout(cfg.output_root, spec.tag)
    if not (layout.spikes_dir / SPIKES).is_file():
        return []
    documents = layout.profile_dir / DOCUMENTS
    if not documents.is_file():
        return [
            Item("spikes", spec.tag, "spikes.csv", "stale", f"{DOCUMENTS} missing: no profile to have measured it on")
        ]
    state, why = judge(spikes_output(layout.spikes_dir), spikes_inputs(documents, profile_inputs(cfg)))
    if state == "stale":  # `run` does not redo them: say what does
        why = f"measured on another profile; ais.md does not quote it; rerun `benchprof spikes` ({why})"
    return [Item("spikes", spec.tag, "spikes.csv", state, why)]


def plan_status(cfg: Config, fingerprint: bool = False) -> list[Item]:
    """Every output of the config's run, in stage order, with its state."""
    from benchprof.core.layout import Layout
    from benchprof.core.modeling import checkpoint_fingerprint, load_model

    def loaded(spec: ModelSpec) -> torch.nn.Module:
        dtype = cfg.finetune.dtype if cfg.finetune.dtype != "auto" else spec.dtype
        return load_model(*cfg.model_source(spec), dtype=dtype)[0]

    data = data_items(cfg)
    items: list[Item] = list(data.values())
    for spec in cfg.models:
        fp = None
        if fingerprint and cfg.abilities():
            # known from an earlier stage (modeling.checkpoint_fingerprint), or the model is loaded
            fp = checkpoint_fingerprint(
                cfg.model_source(spec)[0], Layout(cfg.output_root, spec.tag).model_dir, partial(loaded, spec), False
            )
        importance, masks = region_items(cfg, spec, data, fp)
        evals = eval_items(cfg, spec, masks, data)
        checkpoints = checkpoint_items(cfg, spec, masks)
        items += list(importance.values()) + list(masks.values()) + checkpoints + evals
        items += [profile_item(cfg, spec, evals), *spikes_items(cfg, spec)]
    return items


def status(cfg: Config, verbose: bool = False, fingerprint: bool = False) -> None:
    """Print what a run of this config has done, what is stale and what is pending, and the dtype each model's
    evaluations are scored in.

    Reads manifests, eval JSONs, data files and safetensors headers only; model weights are not
    loaded, so the model fingerprint recorded by finetune is taken as current (--fingerprint loads
    the model and checks it). Evaluations are summarised per variant unless --verbose.

    Arguments:
        cfg: the config (on the command line: the path of config.yml).
        verbose: one line per evaluation job instead of one per variant.
        fingerprint: load each model once to check its fingerprint against the importance manifests.
    """
    if cfg.output_root.exists() and not cfg.output_root.is_dir():
        raise BenchprofError(f"settings.output_dir: {cfg.output_root} is not a folder")
    items = plan_status(cfg, fingerprint=fingerprint)
    lines: list[Item | tuple[str, str]] = []  # an item, or (model, variant) for a summarised variant
    evals: dict[tuple[str, str], list[Item]] = {}
    for item in items:
        if item.stage == "eval" and not verbose:
            variant, benchmark = item.what.rsplit(" ", 1)
            evals.setdefault((item.model, variant), []).append(item)
            if len(evals[(item.model, variant)]) == 1:
                lines.append((item.model, variant))
            continue
        lines.append(item)
    for entry in lines:
        if isinstance(entry, Item):
            print(format_item(entry))
            continue
        group = evals[entry]
        counts = {s: sum(1 for i in group if i.state == s) for s in STATES}
        state = "done" if counts["done"] == len(group) else ("stale" if counts["stale"] else "pending")
        not_done = [
            f"{i.what.rsplit(' ', 1)[1]} ({i.state}{': ' + i.why if i.why else ''})" for i in group if i.state != "done"
        ]
        why = ", ".join(f"{counts[s]} {s}" for s in STATES if counts[s]) if not_done else ""
        reasons = {i.why for i in group if i.state != "done"}
        if not_done and len(reasons) == 1 and reasons != {""}:
            why += f" | {reasons.pop()}"  # the same reason for all: say it once
        elif not_done:
            shown = "; ".join(not_done[:3]) + (f"; ... {len(not_done) - 3} more" if len(not_done) > 3 else "")
            why += f" | {shown}"
        print(format_item(Item("eval", entry[0], entry[1], state, why)))
    for i, spec in enumerate(cfg.models):
        print(f"status: {spec.tag}: {dtype_scored(cfg, i, spec)}")
        left = evaluation_time_left(cfg, spec, items)
        if left:
            print(f"status: {spec.tag}: {left}")
    totals = {s: sum(1 for i in items if i.state == s) for s in STATES}
    print(
        f"status: {totals['done']} done, {totals['stale']} stale, {totals['pending']} pending "
        f"(of {len(items)} outputs) for {cfg.path}"
    )
    for spec, found in linkable(cfg):  # a new tag of a profiled checkpoint: its "pending" is mostly a link away
        print(f"status: {spec.tag}: same checkpoint as {cfg.output_root / found}; a run links its results first")
    sys.stdout.flush()


def _hours(seconds: float) -> str:
    return (
        f"{seconds / 3600:.1f} h"
        if seconds >= 5400
        else f"{seconds / 60:.0f} min"
        if seconds >= 90
        else f"{seconds:.0f} s"
    )


def evaluation_time_left(cfg: Config, spec: ModelSpec, items: list[Item]) -> str:
    """What the model's evaluation jobs not done will take at this run's own pace, to plan a long run from measured
    costs: each benchmark's median `wall_seconds` over its done jobs (a median, as a job paused or run beside other work
    lasts longer), times its jobs left; with evals.device cpu and evals.cpu_workers, that job time shared by the workers
    (the shared queue keeps them busy to the end: docs/scaling.md; measured: docs/research/cpu-threads-and-workers.md).
    '' when nothing is left or no job of the model is done yet."""
    import json
    import statistics

    from benchprof.core.layout import Layout
    from benchprof.stages.eval_jobs import cpu_worker_cap, job_list

    layout = Layout(cfg.output_root, spec.tag)
    state = {i.what: (i.state, i.why) for i in items if i.stage == "eval" and i.model == spec.tag}
    measured: dict[str, list[float]] = {}
    left: dict[str, int] = {}
    maybe = 0  # jobs redone only if an upstream output computed again differs
    for job in job_list(cfg):
        judged, why = state.get(layout.eval_output(job.variant, job.benchmark).label, ("done", ""))
        if judged != "done" and KEPT_IF in why:
            maybe += 1
        elif judged != "done":
            left[job.benchmark] = left.get(job.benchmark, 0) + 1
            continue
        try:
            record = json.loads(layout.eval_file(job.variant, job.benchmark).read_text(encoding="utf-8"))
            seconds = float(record["wall_seconds"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a result without its time (written before it was recorded): nothing to measure
        if math.isfinite(seconds) and seconds >= 0:  # an edited or damaged time (NaN, negative) measures nothing
            measured.setdefault(job.benchmark, []).append(seconds)
    if not left or not measured:  # nothing left, or no pace measured yet (a run not started): nothing to say
        return f"{maybe} evaluation job(s) left only if what they read comes out different" if maybe else ""
    known = {b: statistics.median(v) for b, v in measured.items()}
    seconds = sum(known[b] * n for b, n in left.items() if b in known)
    unmeasured = {b: n for b, n in left.items() if b not in known}
    jobs = sum(left.values())
    text = f"{jobs} evaluation job(s) left"
    if seconds:
        text += f", about {_hours(seconds)} of job time at this run's pace (each benchmark's median done job)"
        workers = cpu_worker_cap(cfg.evals.cpu_workers, jobs - sum(unmeasured.values()))
        if workers > 1 and cfg.evals.backend == "hf" and cfg.evals.device == "cpu":  # no torch imported to ask
            text += f", about {_hours(seconds / workers)} on {workers} CPU workers"
    if unmeasured:
        # documents differ too much in length between benchmarks for another benchmark's pace to say
        text += f"; {sum(unmeasured.values())} job(s) of {len(unmeasured)} benchmark(s) with none done yet not counted"
    return text + (f"; {maybe} more only if what they read comes out different" if maybe else "")


def dtype_scored(cfg: Config, i: int, spec: ModelSpec) -> str:
    """Which dtype the model's evaluations are scored in (damage.eval_dtype) and the key that sets it. Each
    evaluation's inputs record it, so results of two dtypes never mix: another dtype makes them stale."""
    from benchprof.stages.damage import eval_dtype, eval_dtype_key

    dtype = eval_dtype(cfg, spec)
    named = dtype if dtype != "auto" else "the checkpoint's own dtype"
    return f"evaluations scored in {named} ({eval_dtype_key(cfg, i)})"


def same_checkpoint_folder(cfg: Config, spec: ModelSpec) -> str | None:
    """Another folder under output_dir that holds this model's checkpoint (modeling.same_model_folder), or None:
    the results `run` links into a new tag's folder before any work (cli.adopt_results)."""
    from benchprof.core.modeling import same_model_folder

    found = same_model_folder(cfg.model_source(spec)[0], cfg.output_root)
    return found if found is not None and found != spec.tag else None


def linkable(cfg: Config) -> list[tuple[ModelSpec, str]]:
    """(model, folder) for each model whose outputs folder holds nothing yet while another folder holds the
    same checkpoint."""
    from benchprof.core.layout import Layout

    out = []
    for spec in cfg.models:
        folder = Layout(cfg.output_root, spec.tag).model_dir
        if folder.is_dir() and any(p.name != ".lock" for p in folder.iterdir()):  # the lock of this very command
            continue
        if (found := same_checkpoint_folder(cfg, spec)) is not None:
            out.append((spec, found))
    return out


def format_item(item: Item) -> str:
    where = f"{item.model}: " if item.model else ""
    return f"{item.state:<8} {item.stage:<11} {where}{item.what}" + (f"  ({item.why})" if item.why else "")
