"""The evaluate stage's jobs and what each is computed from.

A job is one (variant, benchmark) pair; `job_list` puts them in their fixed order (the original first, then
each (ability, k, region) in config order, benchmarks inner) and `shard_jobs` keeps shard i of n. `JobInputs`
gives a job's inputs, hashed into its result JSON: the task (`task_hash`: a generated task's YAML and data, a
user task's files), few-shot, limit, seed, backend and scorer, the model's content identity, the dtype, the
mask file's hash and, under mean ablation, what its values are computed from. A rerun of `evaluate` skips a job
whose inputs still match; `status` compares the same. A `Plan` is one evaluate call's resolved jobs; `pending_jobs`
are those not done.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchprof import BenchprofError
from benchprof.core.config import Config, ModelSpec
from benchprof.core.layout import Layout, Variant, task_yaml_file
from benchprof.core.modeling import model_signature
from benchprof.core.regions import region_metadata
from benchprof.core.selection import Selection, select
from benchprof.core.storage import is_current
from benchprof.stages.damage import eval_dtype, require_masks, variants
from benchprof.stages.mean_ablation import reference_identity


def cpu_worker_cap(asked: int, pending: int) -> int:
    """evals.cpu_workers capped at the usable cores (this process's CPU affinity) and at the pending jobs: each
    worker loads the model, so one without a job, or one sharing a core, only costs."""
    return min(asked, len(os.sched_getaffinity(0)), pending)


@dataclass(frozen=True)
class Job:
    """One evaluation: a variant of the model (the original, or a region zeroed) on one benchmark."""

    variant: Variant
    benchmark: str


def job_list(
    cfg: Config,
    ability: Selection = None,
    k: Selection = None,
    region: Selection = None,
    benchmark: Selection = None,
    original: bool = True,
) -> list[Job]:
    """The jobs in their fixed order: original first, then variants in config order; benchmarks inner."""
    benchmarks = select(benchmark, cfg.evals.benchmarks, "--benchmark")
    todo = ([Variant()] if original else []) + variants(cfg, ability, k, region)
    return [Job(v, b) for v in todo for b in benchmarks]


def parse_shard(shard: str) -> tuple[int, int]:
    """'i/n' -> (i, n), with 0 <= i < n."""
    try:
        i, n = (int(x) for x in str(shard).split("/"))
    except ValueError:
        raise BenchprofError(f"--shard: expected i/n such as 0/4, got {shard!r}") from None
    if not 0 <= i < n:
        raise BenchprofError(f"--shard: {shard!r} needs 0 <= i < n")
    return i, n


def shard_jobs(jobs: list[Job], i: int, n: int) -> list[Job]:
    return [job for j, job in enumerate(jobs) if j % n == i]


def task_hash(
    include_path: Path, task: str, planned: dict[Path, str] | None = None, user_yaml: Path | None = None
) -> str:
    """A generated task's YAML and data files, or a user task's files (tasks.task_files), hashed; a standard
    lm-eval task is named by its name only. Names, not locations, enter the hash: a moved project stays current.

    `planned` (tasks.plan_tasks' files) stands in for files not written yet (`benchprof status`); `user_yaml`:
    the YAML of a task under evals.include_path.
    """
    import hashlib

    from benchprof.core.storage import file_hash, value_hash
    from benchprof.stages.tasks import task_files

    if user_yaml is not None:
        return value_hash({name: file_hash(path) for name, path in sorted(task_files(user_yaml).items())})

    planned = planned or {}

    def content_hash(path: Path) -> str | None:
        if path in planned:
            return hashlib.sha256(planned[path].encode("utf-8")).hexdigest()[:16]  # as io.file_hash
        return file_hash(path) if path.is_file() else None

    yaml_path = task_yaml_file(include_path, task)
    if yaml_path in planned:
        text = planned[yaml_path]
    elif yaml_path.is_file():
        text = yaml_path.read_text()
    else:
        return task
    spec = json.loads(text)  # benchprof writes its task YAMLs as JSON
    if "group" in spec:  # a group over local copies (mmlu): its own spec and each subtask's hash
        subtasks = [task_hash(include_path, t, planned) for t in spec["task"]]
        return value_hash([value_hash(spec), subtasks])
    data_files = spec["dataset_kwargs"]["data_files"]
    if "include" not in spec:  # an ability split or composite: one test file
        data = Path(data_files["test"])
        # the YAML holds the data file's absolute path: hash it without, so a moved project stays current
        spec["dataset_kwargs"]["data_files"]["test"] = data.name
        return value_hash([value_hash(spec), content_hash(data)])
    # a task re-pointed at a local copy of its data: the task's own files and the copy's
    original = Path(spec["include"])
    files: dict[str, str | None] = {name: file_hash(path) for name, path in sorted(task_files(original).items())}
    for split, paths in data_files.items():
        files.update({f"{split}/{Path(p).name}": content_hash(Path(p)) for p in paths})
    spec["include"] = original.name
    spec["dataset_kwargs"]["data_files"] = {split: [Path(p).name for p in paths] for split, paths in data_files.items()}
    return value_hash([value_hash(spec), files])


def _recorded_mask(path: Path) -> tuple[str, str | None] | None:
    """(hash, fingerprint) of a mask file as its folder's manifest recorded them; None without a record."""
    from benchprof.core.storage import read_json

    try:
        record = read_json(path.parent / "manifest.json")
        entry, inputs = record["files"][path.name], record["inputs"]
        return str(entry["hash"]), inputs.get("fingerprint")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


class JobInputs:
    """The inputs of each job (hashed into its JSON), computed once per run and mask."""

    def __init__(
        self,
        cfg: Config,
        spec: ModelSpec,
        layout: Layout,
        include_path: Path,
        mapping: dict[str, str],
        backend: str,
        limit: int | None,  # --limit for every benchmark; None: each its own (evals.limit_for)
        planned: dict[Path, str] | None = None,
        update_cache: bool = True,  # False: the model's hash cache is read only (`benchprof status` writes nothing)
    ):
        self.cfg, self.layout, self.include_path, self.mapping = cfg, layout, include_path, mapping
        self.backend, self.limit, self.planned = backend, limit, planned
        self.model = model_signature(cfg, spec, update_cache)
        self.update_cache = update_cache
        self.dtype = eval_dtype(cfg, spec)
        self.spec = spec
        self._ablation: dict[str, Any] | None = None  # mean ablation's identity, once an ablated job asks (ablation)
        self._masks: dict[Variant, tuple[str | None, str | None]] = {}
        self._tasks: dict[str, str] = {}

    def mask(self, variant: Variant) -> tuple[str | None, str | None]:
        from benchprof.core.storage import file_hash

        if variant.is_original:
            return None, None
        if variant not in self._masks:
            path = self.layout.mask_file(*variant.parts())
            recorded = None if self.update_cache else _recorded_mask(path)
            found = file_hash(path) if recorded is None or path.is_file() else None  # each mask hashed once
            if recorded is not None and found != recorded[0]:
                # status: a mask gone or damaged under a manifest whose inputs hold is what extract writes again
                # (masks_items judges it so), so the jobs on it are judged by what that manifest recorded
                self._masks[variant] = recorded
            else:
                self._masks[variant] = (found, region_metadata(path).get("fingerprint"))
        return self._masks[variant]

    def __call__(self, job: Job) -> dict[str, Any]:
        from benchprof.stages.tasks import user_tasks

        task = self.mapping[job.benchmark]
        if task not in self._tasks:
            user_yaml = user_tasks(self.cfg).get(task) if task == job.benchmark else None
            self._tasks[task] = task_hash(self.include_path, task, self.planned, user_yaml)
        mask, mask_fingerprint = self.mask(job.variant)
        return {
            "benchmark": job.benchmark,
            "task": task,
            "task_hash": self._tasks[task],
            "num_fewshot": self.cfg.evals.fewshot(job.benchmark),
            "limit": self.limit if self.limit is not None else self.cfg.evals.limit_for(job.benchmark),
            "seed": self.cfg.settings.seed,
            "backend": self.backend,
            "scorer": self.cfg.evals.scorer if self.backend == "hf" else None,
            "model": self.model,
            "dtype": self.dtype,
            "variant": job.variant.label(),
            "mask": mask,
            "mask_fingerprint": mask_fingerprint,
            **({} if job.variant.is_original else self.ablation()),
        }

    def ablation(self) -> dict[str, Any]:
        """What an ablated variant's scores depend on under mean ablation (mean_ablation.reference_identity, computed
        once); nothing more under zero ablation, so that its keys are as they always were."""
        if self._ablation is None:
            mean = self.cfg.damage.ablation == "mean"
            self._ablation = reference_identity(self.cfg, self.spec, self.update_cache) if mean else {}
        return self._ablation


def ablated_variants(jobs: list[Job]) -> list[Variant]:
    return [v for v in dict.fromkeys(job.variant for job in jobs) if not v.is_original]


@dataclass(frozen=True)
class Plan:
    """One evaluate call's resolved work: config (--limit, --backend applied), models, shard's jobs, tasks, --force."""

    cfg: Config
    specs: list[ModelSpec]
    jobs: list[Job]
    include_path: Path
    mapping: dict[str, str]
    backend: str
    limit: int | None
    force: bool
    queue_since: int = 0  # a worker of the shared queue (JOB_QUEUE): when it began; its jobs: all, longest first


def pending_jobs(plan: Plan, spec: ModelSpec) -> list[tuple[Job, dict[str, Any]]]:
    """The plan's jobs of one model that are not done (all of them with --force), each with its inputs; the masks
    they need are checked first (one line naming a missing one)."""
    layout = Layout(plan.cfg.output_root, spec.tag)
    require_masks(layout, ablated_variants(plan.jobs))
    job_inputs = JobInputs(plan.cfg, spec, layout, plan.include_path, plan.mapping, plan.backend, plan.limit)
    pending = []
    for job in plan.jobs:
        inputs = job_inputs(job)
        if plan.force or not is_current(layout.eval_output(job.variant, job.benchmark), inputs):
            pending.append((job, inputs))
    return pending


def pending_count(plan: Plan) -> int:
    """How many of the plan's jobs, over its models, are not done."""
    return sum(len(pending_jobs(plan, spec)) for spec in plan.specs)


def cpu_worker_count(plan: Plan, asked: int, pending: int) -> int:
    """evals.cpu_workers capped (cpu_worker_cap) for `pending` jobs; the cap is said in one line."""
    workers = cpu_worker_cap(asked, pending)
    if 0 < workers < asked:  # nothing pending: nothing to say
        cores = len(os.sched_getaffinity(0))
        print(f"evaluate: evals.cpu_workers {asked} capped at {workers} ({cores} usable cores, {pending} pending jobs)")
    return workers
