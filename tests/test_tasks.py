"""tasks: the lm-eval task YAMLs benchprof writes for ability splits and composites."""

from __future__ import annotations

import json
import logging

from benchprof.stages.tasks import task_yaml


def test_a_generated_task_fixes_its_num_fewshot_so_lm_eval_warns_nothing(tmp_path, tiny_model_dir):
    """lm-eval warned 'Overwriting default num_fewshot of benchprof_... from None to 0' once per generated task
    on the demo's terminal, a warning no user can act on: the YAML benchprof writes says 0 itself (its only
    split is the scored one, so the config refuses more), and the task is scored as before."""
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    from benchprof.core.modeling import load_model
    from benchprof.stages.evaluate import run_lm_eval

    record = {
        "id": "1",
        "ability": "Spatial_Reasoning",
        "question_type": "spatial_relation",
        "context": "",
        "question": "Where is the sun at noon?",
        "options": ["up", "down"],
        "answer": "up",
        "label": 0,
    }
    data = tmp_path / "test.jsonl"
    data.write_text(json.dumps(record) + "\n")
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "benchprof_mine.yaml").write_text(task_yaml("benchprof_mine", data))
    model, tokenizer = load_model(str(tiny_model_dir))
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=1)
    warned: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = warned.append  # type: ignore[method-assign]
    logger = logging.getLogger("lm_eval")
    logger.addHandler(handler)
    try:
        manager = TaskManager(include_path=[str(tmp_path / "tasks")], include_defaults=False)
        output = run_lm_eval(lm, "benchprof_mine", 0, None, manager, 0)
    finally:
        logger.removeHandler(handler)
    assert output["results"]["benchprof_mine"]["acc,none"] in (0.0, 1.0)
    assert not [r.getMessage() for r in warned if "num_fewshot" in r.getMessage()]


def test_lm_evals_task_index_is_cached_per_version_and_read_back(tmp_path, monkeypatch):
    """builtin_tasks indexes lm-eval's ~15,000 task names once and keeps them in the user's cache folder; a second
    process reads the file (here: a name only the file holds is found), an unreadable file is rebuilt."""
    from benchprof.stages.preflight import builtin_tasks
    from benchprof.stages.tasks import builtin_index

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    builtin_index.cache_clear()
    first = builtin_tasks()
    [cache] = (tmp_path / "benchprof").glob("lm_eval_tasks-*.json")
    assert "arc_easy" in first and first["arc_easy"] is not None and first["arc_easy"].is_file()
    names = json.loads(cache.read_text())
    assert names["arc_easy"][1] == "TASK" and names["mmlu"][1] == "GROUP"  # the kind: a plain task needs no index
    cache.write_text(json.dumps({**names, "only_in_the_cache": [None, "TAG"]}))
    builtin_index.cache_clear()
    assert "only_in_the_cache" in builtin_tasks()
    cache.write_text("{not json")
    builtin_index.cache_clear()
    assert set(builtin_tasks()) == set(first)
    builtin_index.cache_clear()


def test_builtin_tasks_are_indexed_only_for_a_benchmark_read_from_the_hub(tmp_path):
    """A local copy (evals.dataset_paths) or an ability loads without lm-eval's own index; arc_easy from the hub
    needs it."""
    from benchprof.core.loader import parse_config
    from benchprof.stages.tasks import needs_builtin_tasks

    def config(benchmarks: list[str], copies: dict[str, str]):
        raw = {
            "settings": {"output_dir": str(tmp_path / "out")},
            "models": [{"name": "m"}],
            "datasets": [{"name": "Long_Term_Knowledge"}],
            "evals": {"benchmarks": benchmarks, "dataset_paths": copies},
        }
        return parse_config(raw, tmp_path / "config.yml")

    copy = tmp_path / "arc_copy"
    copy.mkdir()
    assert not needs_builtin_tasks(config(["Long_Term_Knowledge"], {}))
    assert not needs_builtin_tasks(config(["arc_easy", "Long_Term_Knowledge"], {"arc_easy": str(copy)}))
    assert needs_builtin_tasks(config(["arc_easy"], {}))
    assert needs_builtin_tasks(config(["arc_easy", "piqa"], {"arc_easy": str(copy)}))
