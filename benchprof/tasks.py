"""Local lm-eval tasks: each ability's test split, and composite benchmarks mixed from several.

A benchmark name in `evals.benchmarks` that is an ability or a `evals.composites` entry becomes a
generated `multiple_choice` task YAML with absolute data paths (lm-eval resolves relative paths
against the working directory, and silently skips a YAML it cannot parse). Any other name is a
standard lm-eval task and passes through unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import BenchprofError
from .config import ABILITIES, Config
from .storage import write_text

if TYPE_CHECKING:
    from lm_eval.tasks import TaskManager

# Jinja for lm-eval; prompts.eval_prompt is the same text in Python (keep the two in step).
DOC_TO_TEXT = "{% if context %}Context: {{context}}\n{% endif %}Question: {{question}}\nAnswer:"


def task_name(benchmark: str) -> str:
    """lm-eval task name of a local benchmark: 'Spatial_Reasoning' -> 'benchprof_spatial_reasoning'."""
    return "benchprof_" + benchmark.lower()


def is_local(cfg: Config, benchmark: str) -> bool:
    return benchmark in ABILITIES or benchmark in cfg.evals.composites


def tasks_dir(cfg: Config) -> Path:
    """Generated task YAMLs and composite data live beside the models' folders under outputs/."""
    return cfg.output_root / "tasks"


def task_yaml(name: str, data_file: Path) -> str:
    """One multiple_choice task over a JSONL file in the ability schema (JSON is valid YAML)."""
    spec: dict[str, Any] = {
        "task": name,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(Path(data_file).resolve())}},
        "test_split": "test",
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
    from .data import load_split

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


def plan_tasks(cfg: Config) -> tuple[Path, dict[str, str], dict[Path, str]]:
    """(include path, benchmark -> task name, file -> text) of every local benchmark, nothing written."""
    from . import layout
    from .data import ability_folder, is_hub_id, load_split

    def jsonl(records: list[dict[str, Any]]) -> str:
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)

    folder = tasks_dir(cfg)
    mapping: dict[str, str] = {}
    files: dict[Path, str] = {}
    for benchmark in cfg.evals.benchmarks:
        if not is_local(cfg, benchmark):
            mapping[benchmark] = benchmark
            continue
        name = task_name(benchmark)
        if benchmark in cfg.evals.composites:
            data_file = folder / f"{name}.jsonl"
            files[data_file] = jsonl(composite_records(cfg, benchmark))
        elif is_hub_id(cfg, benchmark):
            data_file = folder / f"{name}.jsonl"  # lm-eval reads a local copy in our schema
            files[data_file] = jsonl(load_split(cfg, benchmark, "test"))
        else:
            load_split(cfg, benchmark, "test")  # checks the schema, names file and line on error
            data_file = layout.data_file(ability_folder(cfg, benchmark), "test")
        files[folder / f"{name}.yaml"] = task_yaml(name, data_file)
        mapping[benchmark] = name
    return folder, mapping, files


def write_tasks(cfg: Config) -> tuple[Path, dict[str, str]]:
    """Write the YAMLs (and composite data) of every local benchmark; return (include path, benchmark -> task name).

    A file whose content is unchanged is left alone (several evaluate workers may run this at once).
    """
    folder, mapping, files = plan_tasks(cfg)
    for path, text in files.items():
        if not (path.is_file() and path.read_text() == text):
            write_text(path, text)
    return folder, mapping


def task_manager(cfg: Config, include_path: Path) -> TaskManager:
    """An lm-eval TaskManager that knows our local tasks (and the built-in ones only if needed)."""
    from lm_eval.tasks import TaskManager

    needs_defaults = any(not is_local(cfg, b) for b in cfg.evals.benchmarks)
    return TaskManager(include_path=str(include_path), include_defaults=needs_defaults)
