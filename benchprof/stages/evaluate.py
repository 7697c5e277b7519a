"""Stage `evaluate`: lm-eval on the original model and every ablated variant.

The work is a list of (variant, benchmark) jobs: the original model first, then each (ability, k, region) in config
order, each with every benchmark. A worker loads the model once, wraps it in one lm-eval HFLM
(scoring.SharedPrefixLM, which computes a prefix shared by several requests once, unless evals.scorer is lm_eval),
and for each variant removes the region (zeroes its weights in place, or under damage.ablation mean holds its
neurons at their means: mean_ablation.removed), runs all of the variant's benchmarks and restores the model.
`--shard i/n` keeps the jobs j with j % n == i; with several GPUs in settings.cuda_visible_devices one worker
process runs per GPU (with evals.cpu_workers, one per share of the cores). The workers evaluate spawns with backend
hf share one queue instead (JOB_QUEUE): each walks every pending job, the original's then the longest first, and
takes the next whose lock no other worker holds, so none sits idle while another has work left. A job writes
`<benchmark>.samples.jsonl` first and `<benchmark>.json` last, so the JSON marks it done; it records a hash of its
inputs and a rerun skips jobs whose hash still matches.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchprof import BenchprofError
from benchprof.core.config import Config, ModelSpec
from benchprof.core.console import drop_model_object_warning
from benchprof.core.layout import Layout, Variant
from benchprof.core.results import write_result
from benchprof.core.selection import Selection, new_k_note, with_new_k
from benchprof.core.storage import is_current
from benchprof.stages.damage import eval_dtype
from benchprof.stages.eval_jobs import (
    Job,
    Plan,
    ablated_variants,
    cpu_worker_count,
    job_list,
    parse_shard,
    pending_count,
    pending_jobs,
    shard_jobs,
)
from benchprof.stages.preflight import datasets_cache_problems

if TYPE_CHECKING:
    import numpy as np
    from lm_eval.api.model import LM
    from lm_eval.tasks import TaskManager
    from numpy.typing import NDArray
    from tqdm import tqdm


@functools.lru_cache(maxsize=1024)
def compiled_template(template: str) -> Any:
    """lm-eval's Jinja environment's compiled form of one prompt template, kept: lm-eval compiles the template
    string again for every document and field (lm_eval.utils.apply_template)."""
    import lm_eval.utils

    return lm_eval.utils.env.from_string(template)


def render_template(template: str, doc: dict[str, Any]) -> str:
    """lm_eval.utils.apply_template, with the template compiled once (compiled_template): the same text."""
    return str(compiled_template(template).render(**doc))


@contextlib.contextmanager
def lean_lm_eval() -> Iterator[None]:
    """Within the block, lm-eval does per job only what benchprof keeps: no environment report
    (evaluator.add_env_info: torch's collect_env, about 0.4 s a job, fields benchprof does not keep) and each
    prompt template compiled once (utils.apply_template compiles it again per document and field: a third of
    a small job's time). Either is left as it is where a later lm-eval lacks it; both are restored after."""
    import lm_eval.evaluator
    import lm_eval.utils

    patches = [
        (lm_eval.evaluator, "add_env_info", lambda storage: None),
        (lm_eval.utils, "apply_template", render_template),
    ]
    saved = [(module, name, getattr(module, name)) for module, name, _ in patches if hasattr(module, name)]
    for module, name, replacement in patches:
        if hasattr(module, name):
            setattr(module, name, replacement)
    try:
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)


def run_lm_eval(
    lm: LM, task: str, num_fewshot: int, limit: int | None, task_manager: TaskManager, seed: int
) -> dict[str, Any]:
    """One lm-eval run, no response cache (a shared one would answer for the original model), lean
    (lean_lm_eval: what lm-eval does per job beyond the results benchprof keeps is skipped)."""
    import lm_eval

    drop_model_object_warning()  # also the few-shot warning of benchprof's own tasks, for every caller
    with lean_lm_eval():
        return lm_eval.simple_evaluate(
            model=lm,
            tasks=[task],
            num_fewshot=num_fewshot,
            limit=limit,
            log_samples=True,
            task_manager=task_manager,
            use_cache=None,
            cache_requests=False,
            random_seed=seed,
            numpy_random_seed=seed,
            torch_random_seed=seed,
            fewshot_random_seed=seed,
        )


def document_scores(
    lm: LM, tasks: dict[str, str], limit: int | None, task_manager: TaskManager, seed: int, metric: str = "acc"
) -> dict[str, NDArray[np.float64]]:
    """{benchmark: each scored document's `metric`, in doc_id order} for `tasks` (benchmark -> lm-eval task
    name, as `tasks.write_tasks` maps them; one task each, not a group), 0-shot, the model as `lm` holds it now."""
    import numpy as np

    out = {}
    for benchmark, task in tasks.items():
        every = run_lm_eval(lm, task, 0, limit, task_manager, seed)["samples"]
        if task not in every:
            raise BenchprofError(f"{benchmark}: task {task} is a group ({', '.join(sorted(every))}); name one task")
        samples = every[task]
        if not samples or metric not in samples[0]:
            raise BenchprofError(f"{benchmark}: lm-eval reports no per-document {metric!r} for task {task}")
        out[benchmark] = np.array([float(s[metric]) for s in sorted(samples, key=lambda s: s["doc_id"])])
    return out


# set by evaluate for the workers it spawns, to the time (ns) the queue began: take jobs from the shared queue
JOB_QUEUE = "BENCHPROF_JOB_QUEUE"


def longest_first(pending: list[tuple[Job, dict]]) -> list[tuple[Job, dict]]:
    """The queue's order: the original model's jobs first (every benchmark's score and pace within minutes, which
    `status` times the rest by), then by the documents a job scores, most first (no limit counts as the longest:
    only lm-eval knows its size), in job order among equals, so that a variant's jobs stay together where they
    cost alike and the last jobs taken are the shortest."""
    limit = [math.inf if inputs["limit"] is None else int(inputs["limit"]) for _, inputs in pending]
    order = sorted(range(len(pending)), key=lambda i: (not pending[i][0].variant.is_original, -limit[i]))
    return [pending[i] for i in order]


def variant_runs(pending: list[tuple[Job, dict]]) -> list[tuple[Variant, list[tuple[Job, dict]]]]:
    """Consecutive pending (job, inputs) pairs of one variant: each run is applied once (in job order, every
    variant's jobs are one run)."""
    runs: list[tuple[Variant, list[tuple[Job, dict]]]] = []
    for job, inputs in pending:
        if runs and runs[-1][0] == job.variant:
            runs[-1][1].append((job, inputs))
        else:
            runs.append((job.variant, [(job, inputs)]))
    return runs


def by_variant(pending: list[tuple[Job, dict]]) -> dict[Variant, list[tuple[Job, dict]]]:
    """Pending (job, inputs) pairs grouped by variant, in job order: each variant is applied once."""
    groups: dict[Variant, list[tuple[Job, dict]]] = {}
    for job, inputs in pending:
        groups.setdefault(job.variant, []).append((job, inputs))
    return groups


@dataclass(frozen=True)
class Worker:
    """What every job of one model's evaluation in this process shares: the config and model, its outputs folder,
    each benchmark's lm-eval task name and the task manager that knows them, and --force."""

    cfg: Config
    spec: ModelSpec
    layout: Layout
    mapping: dict[str, str]
    task_manager: TaskManager
    force: bool
    queue_since: int = 0  # a worker of the shared queue: when it began (time.time_ns); 0 otherwise


def run_hf(worker: Worker, pending: list[tuple[Job, dict]], progress: tqdm) -> tuple[int, int]:
    """Load once, wrap in one HFLM (benchprof's SharedPrefixLM unless evals.scorer is lm_eval), and for each
    variant: apply, run its benchmarks, restore. Returns (model loads: 1, jobs left to another process)."""
    from lm_eval.models.huggingface import HFLM

    from benchprof.core.modeling import checkpoint_fingerprint, load_model, pick_device
    from benchprof.stages.damage import load_region
    from benchprof.stages.mean_ablation import reference_means, removed
    from benchprof.stages.prefix_scorer import SharedPrefixLM

    cfg, spec, layout = worker.cfg, worker.spec, worker.layout
    # damage.ablation mean: the values its neurons are held at, computed (if missing) before this model is loaded
    means = reference_means(cfg, spec) if any(not job.variant.is_original for job, _ in pending) else None
    loaded_at = time.time()
    model, tokenizer = load_model(
        *cfg.model_source(spec), dtype=eval_dtype(cfg, spec), device=pick_device(cfg.evals.device)
    )
    # of the unablated model: every mask is checked against it
    fp = checkpoint_fingerprint(cfg.model_source(spec)[0], layout.model_dir, model, loaded_at=loaded_at)
    drop_model_object_warning()  # lm-eval warns about the model object it is handed here, on purpose
    scorer = SharedPrefixLM if cfg.evals.scorer == "shared_prefix" else HFLM
    lm = scorer(pretrained=model, tokenizer=tokenizer, batch_size=cfg.settings.eval_batch_size)
    left = 0
    for variant, jobs in variant_runs(pending):
        region = {} if variant.is_original else load_region(model, layout.mask_file(*variant.parts()), fp)
        with removed(model, region, means):
            for job, inputs in jobs:
                left += not run_job(worker, job, inputs, lm, fp)
                progress.update(1)
    return 1, left


def run_vllm(worker: Worker, pending: list[tuple[Job, dict]], progress: tqdm) -> tuple[int, int]:
    """One vLLM engine per variant, from its `damage --save` checkpoint (the original: the model itself).
    Returns (engines started, jobs left to another process)."""
    from lm_eval.api.registry import get_model

    cfg, spec, layout = worker.cfg, worker.spec, worker.layout
    loads = left = 0
    for variant, jobs in by_variant(pending).items():
        path = cfg.model_source(spec)[0] if variant.is_original else str(layout.damaged_dir(*variant.parts()))
        loads += 1
        lm = get_model("vllm")(
            pretrained=path,
            tokenizer=path if not variant.is_original else cfg.model_source(spec)[1],
            dtype=eval_dtype(cfg, spec),
            tensor_parallel_size=cfg.evals.tensor_parallel_size,
            batch_size="auto",
            seed=cfg.settings.seed,
        )
        for job, inputs in jobs:
            left += not run_job(worker, job, inputs, lm, None)
            progress.update(1)
        del lm
        free_vllm()
    return loads, left


def free_vllm() -> None:
    """Release a vLLM engine's GPU memory before the next variant's engine starts (best effort)."""
    import gc

    import torch

    try:
        from vllm.distributed.parallel_state import destroy_distributed_environment, destroy_model_parallel

        destroy_model_parallel()
        destroy_distributed_environment()
    except Exception:  # older or newer vLLM without these: garbage collection still frees most
        pass
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def run_job(worker: Worker, job: Job, inputs: dict[str, Any], lm: LM, model_fingerprint: str | None) -> bool:
    """Score one job under its lock; False when another process holds the lock or finished the job meanwhile
    (an `evaluate --shard` beside `benchprof run`: each job is scored once)."""
    from benchprof.core.locks import job_lock

    cfg, spec, layout, force = worker.cfg, worker.spec, worker.layout, worker.force

    with job_lock(layout.job_lock(job.variant, job.benchmark), f"benchprof evaluate ({spec.tag})") as mine:
        output_of_job = layout.eval_output(job.variant, job.benchmark)
        if not mine or (not force and is_current(output_of_job, inputs)):
            return False
        result = layout.eval_file(job.variant, job.benchmark)
        if force and worker.queue_since and result.is_file() and result.stat().st_mtime_ns >= worker.queue_since:
            if is_current(output_of_job, inputs):  # --force in a shared queue: another worker scored it this run
                return False
        started = time.time()
        task = worker.mapping[job.benchmark]
        try:
            output = run_lm_eval(
                lm, task, inputs["num_fewshot"], inputs["limit"], worker.task_manager, cfg.settings.seed
            )
        except Exception as err:  # lm-eval raises many kinds; say which job failed
            raise BenchprofError(
                f"evaluate {job.variant.label()} on {job.benchmark}: lm-eval failed: {type(err).__name__}: {err}"
            ) from err
        write_result(
            layout, job.variant, job.benchmark, spec.tag, task, output, inputs, model_fingerprint, time.time() - started
        )
    return True


def worker_commands(
    config: Path,
    devices: list[str],
    per_worker: int,
    options: dict[str, Any],
    cpu_workers: int = 0,
    queue: bool = False,
) -> list[tuple[list[str], dict[str, str]]]:
    """(argv, env) of each worker process: worker i sees its own GPU(s) and runs shard i/n, or with `queue`
    takes jobs from the queue all workers share (JOB_QUEUE). With `cpu_workers`, that many workers that see no
    GPU, each told how many run side by side (LOCAL_WORLD_SIZE, which settings.thread_count divides the cores
    by)."""
    if cpu_workers:
        groups: list[list[str]] = [[] for _ in range(cpu_workers)]
        side_by_side = {"LOCAL_WORLD_SIZE": str(cpu_workers)}
    else:
        groups = [devices[i : i + per_worker] for i in range(0, len(devices) - per_worker + 1, per_worker)]
        side_by_side = {}
    args = []
    for name, value in options.items():
        if value is None or value is False:
            continue
        if isinstance(value, (list, tuple)):
            value = ",".join(map(str, value))
        args.append(f"--{name}" if value is True else f"--{name}={value}")
    out, since = [], str(time.time_ns())
    for i, group in enumerate(groups):
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=",".join(group), **side_by_side)
        env.pop(JOB_QUEUE, None)
        if queue:
            env[JOB_QUEUE] = since
        argv = [sys.executable, "-m", "benchprof", "evaluate", str(config), f"--shard={i}/{len(groups)}", *args]
        out.append((argv, env))
    return out


def spawn_workers(commands: list[tuple[list[str], dict[str, str]]], stop_on_failure: bool = False) -> None:
    """Run the workers side by side, wait for all, and fail naming any that failed. With `stop_on_failure` (the
    shared queue's workers, where another would take up a failed job and fail on it too) the first failure stops
    the others: what they finished is kept, their job in progress is left for the rerun."""
    from benchprof.core.console import terminal_fd
    from benchprof.stages.sharding import parent_death_signal

    dies_with_us = parent_death_signal()  # a killed evaluate takes its workers with it
    procs = [subprocess.Popen(argv, env=env, stderr=terminal_fd(), preexec_fn=dies_with_us) for argv, env in commands]
    stopped: set[int] = set()
    while stop_on_failure and any(p.poll() is None for p in procs):
        if any(p.returncode not in (None, 0) for p in procs):
            stopped = {i for i, p in enumerate(procs) if p.poll() is None}
            for i in stopped:
                procs[i].terminate()
            break
        time.sleep(0.2)
    codes = [p.wait() for p in procs]
    failed = [
        f"shard {i}/{len(procs)} ({where(commands[i][1])}, exit {c})"
        for i, c in enumerate(codes)
        if c != 0 and i not in stopped
    ]
    if failed:
        others = f"; {len(stopped)} other(s) stopped" if stopped else ""
        raise BenchprofError(
            f"evaluate: {len(failed)} worker(s) failed: {'; '.join(failed)}{others}; rerun the same command to resume"
        )


def where(env: dict[str, str]) -> str:
    """The device(s) a worker process was given, in words."""
    return f"GPU {env['CUDA_VISIBLE_DEVICES']}" if env["CUDA_VISIBLE_DEVICES"] else "CPU"


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def evaluate(
    cfg: Config,
    ability: str | None = None,
    k: Selection = None,
    region: str | None = None,
    model: str | None = None,
    benchmark: str | None = None,
    limit: int | None = None,
    backend: str | None = None,
    shard: str | None = None,
    force: bool = False,
    original: bool = True,
    original_only: bool = False,
) -> None:
    """Score the original model and every ablated variant on every benchmark with lm-eval.

    Jobs are (variant, benchmark) pairs: the original model (scored once, under original/eval/)
    and every (ability, k, region) of the config. A worker loads the model once, wraps it in one
    lm-eval HFLM (benchprof's SharedPrefixLM unless evals.scorer is lm_eval) and for each variant
    zeroes the region in place, runs its benchmarks and restores the weights. Each job writes
    <benchmark>.samples.jsonl (one line per scored document) and then <benchmark>.json (lm-eval
    results, a hash of the job's inputs); a rerun skips jobs whose hash matches. With several GPUs
    in settings.cuda_visible_devices and no --shard, one worker process runs per GPU (per
    tensor_parallel_size GPUs with vllm).

    Arguments:
        cfg: the config (on the command line: the path of config.yml).
        ability: only variants of this ability (or a comma-separated list).
        k: only these k values; a k that settings.k_values does not list is added to this run's.
        region: only this region (top, bottom, random).
        model: only this model (name or tag).
        benchmark: only this benchmark (or a comma-separated list).
        limit: score at most this many documents of every benchmark (quick runs); default each
            benchmark's own limit (evals.limits, the benchmark's entry), else evals.limit.
        backend: hf (in-memory ablation, default) or vllm (damage --save checkpoints, GPU only).
        shard: i/n runs the jobs j with j % n == i (several nodes or GPUs).
        force: rerun finished jobs.
        original: also score the original model (--nooriginal to skip it).
        original_only: score the unablated model alone (--original_only): no region, no mask needed.
    """
    from benchprof.stages import tasks

    started = time.time()
    if original_only:
        if not original:
            raise BenchprofError("--original_only and --nooriginal: nothing would be scored")
        k = []  # no (ability, k, region) variant: the original model only
    cfg = cfg.with_overrides(evals={"limit": limit, "backend": backend})
    cfg, new_k = with_new_k(cfg, k)
    backend = cfg.evals.backend
    limit = None if limit is None else cfg.evals.limit  # --limit, checked; it wins over evals.limits
    if backend == "vllm" and importlib.util.find_spec("vllm") is None:
        raise BenchprofError(
            "evals.backend: vllm is not installed (pip install vllm, on a GPU node); backend hf needs nothing more"
        )
    if problems := datasets_cache_problems():  # before a model loads: a read-only cache fails lm-eval's first task
        raise BenchprofError(problems[0])
    specs = cfg.selected_models(model)
    all_jobs = job_list(cfg, ability, k, region, benchmark, original)
    index, count = parse_shard(shard) if shard is not None else (0, 1)
    since = os.environ.get(JOB_QUEUE, "")
    queue = shard is not None and since.isdigit()  # a worker of the shared queue: every job is its to take
    jobs = all_jobs if queue else shard_jobs(all_jobs, index, count)
    # the tasks of the benchmarks these jobs score (every shard the same): one evaluated alone needs no other's data
    include_path, mapping = tasks.write_tasks(cfg, sorted({job.benchmark for job in all_jobs}))
    plan = Plan(cfg, specs, jobs, include_path, mapping, backend, limit, force, int(since) if queue else 0)

    options = {"ability": ability, "k": None if original_only else k, "region": region, "model": model}
    options |= {"benchmark": benchmark, "limit": limit, "backend": backend, "force": force}
    options |= {"nooriginal": not original, "original_only": original_only}  # the workers' k: [] is no option
    if shard is not None:
        pin_device(cfg)
        # the shared queue's workers: one bar (each counts every job) and no summary of their own on the terminal
        score_models(plan, f"{'worker' if queue else 'shard'} {index}/{count}, ", started, not queue, index == 0)
        return
    dispatch(plan, options, started)
    if new_k:  # a worker's k came from its parent, which says this once
        print(new_k_note("evaluate", cfg, new_k))


def dispatch(plan: Plan, options: dict[str, Any], started: float) -> None:
    """The plan's jobs in worker processes (one per GPU, or evals.cpu_workers on a CPU, each given `options`) where
    there are several, else in this process."""
    cfg = plan.cfg
    devices = cfg.settings.devices()
    per_worker = cfg.evals.tensor_parallel_size if plan.backend == "vllm" else 1
    if len(devices) // per_worker > 1 and cuda_available():
        run_workers(plan, devices, per_worker, options, started, pending_count(plan))
        return
    if cfg.evals.cpu_workers > 1 and plan.backend == "hf" and not on_gpu(cfg):
        todo = pending_count(plan)
        if (cpu_workers := cpu_worker_count(plan, cfg.evals.cpu_workers, todo)) > 1:
            run_workers(plan, [], 1, options, started, todo, cpu_workers)
            return
    pin_device(cfg)
    score_models(plan, "", started)


def pin_device(cfg: Config) -> None:
    """With one GPU in settings.cuda_visible_devices, make it the one CUDA sees (before anything touches CUDA)."""
    devices = cfg.settings.devices()
    if len(devices) == 1 and "CUDA_VISIBLE_DEVICES" not in os.environ:
        os.environ["CUDA_VISIBLE_DEVICES"] = devices[0]


def on_gpu(cfg: Config) -> bool:
    """Whether this process would evaluate on CUDA (evals.device, auto: where CUDA is available)."""
    from benchprof.core.modeling import pick_device

    return pick_device(cfg.evals.device) != "cpu"


def run_workers(
    plan: Plan,
    devices: list[str],
    per_worker: int,
    options: dict[str, Any],
    started: float,
    todo: int,
    cpu_workers: int = 0,
) -> None:
    """The plan's jobs in one `evaluate --shard` process per `per_worker` GPUs (or in `cpu_workers` CPU
    processes), then the stage's summary line: `todo` jobs of them were not done."""
    from benchprof.core.loader import effective_config
    from benchprof.stages.damage import ensure_checkpoints
    from benchprof.stages.mean_ablation import reference_means

    for spec in plan.specs:  # checkpoints and mean ablation's values first, here: workers must not race on them
        if plan.backend == "vllm":
            ensure_checkpoints(plan.cfg, spec, ablated_variants(plan.jobs))
        if ablated_variants(plan.jobs):
            reference_means(plan.cfg, spec)
    queue = plan.backend == "hf"  # vllm starts an engine per variant: its workers keep their shards of variants
    commands = worker_commands(effective_config(plan.cfg), devices, per_worker, options, cpu_workers, queue)
    spawn_workers(commands, stop_on_failure=queue)
    gpus = "CPU" if cpu_workers else "GPUs " + " | ".join(env["CUDA_VISIBLE_DEVICES"] for _, env in commands)
    print(
        f"evaluate: {len(commands)} workers ({gpus}) ran {todo} jobs, "
        f"{len(plan.jobs) * len(plan.specs) - todo} skipped (finished), in "
        f"{time.time() - started:.0f}s; results under {plan.cfg.output_root}"
    )


def score_models(plan: Plan, where: str, started: float, summary: bool = True, bar: bool = True) -> None:
    """The plan's unfinished jobs scored in this process, model after model, then the stage's summary line (on the
    terminal with `summary`, else in the log only) and, with `bar`, a progress bar."""
    from benchprof.core.console import log_line
    from benchprof.core.console import progress as progress_bar
    from benchprof.stages import tasks
    from benchprof.stages.damage import ensure_checkpoints

    cfg, jobs, force = plan.cfg, plan.jobs, plan.force
    loads = ran = skipped = elsewhere = 0
    variants_run: set[tuple[str, Variant]] = set()
    for spec in plan.specs:
        layout = Layout(cfg.output_root, spec.tag)
        pending = pending_jobs(plan, spec)
        skipped += len(jobs) - len(pending)
        if plan.queue_since:
            pending = longest_first(pending)
        if not pending:
            continue
        task_manager = tasks.task_manager(cfg, plan.include_path)
        unknown = sorted({plan.mapping[j.benchmark] for j, _ in pending} - set(task_manager.all_tasks))
        if unknown:
            raise BenchprofError(f"evals.benchmarks: lm-eval knows no task {unknown[0]!r}")
        worker = Worker(cfg, spec, layout, plan.mapping, task_manager, force, plan.queue_since)
        with progress_bar(total=len(pending), desc=f"evaluate {spec.tag}", unit="job", disable=not bar) as progress:
            if plan.backend == "vllm":
                ensure_checkpoints(cfg, spec, ablated_variants([j for j, _ in pending]))
                model_loads, left = run_vllm(worker, pending, progress)
            else:
                model_loads, left = run_hf(worker, pending, progress)
        loads += model_loads
        elsewhere += left
        ran += len(pending) - left
        variants_run.update((spec.tag, j.variant) for j, _ in pending)
    ablated = sum(1 for _, v in variants_run if not v.is_original)
    originals = len(variants_run) - ablated
    (print if summary else log_line)(
        f"evaluate: {ran} jobs run, {skipped} skipped (finished)"
        + (f", {elsewhere} taken by the other workers" if elsewhere and plan.queue_since else "")
        + (f", {elsewhere} left to another process (`benchprof status` shows when they are done)" if elsewhere
           and not plan.queue_since else "")
        + f", over {ablated} ablated variant(s){' + original' if originals else ''}, "
        f"{loads} model load(s), {where}{time.time() - started:.0f}s; results under {cfg.output_root}"
    )  # fmt: skip
