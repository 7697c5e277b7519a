import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from benchprof.core.config import ConfigError
from benchprof.core.loader import load_config, parse_config

ROOT = Path(__file__).resolve().parents[1]
TWO = ["Spatial_Reasoning", "Temporal_Reasoning"]
MIX_SIZE = "evals.composites.mix.size"


def base() -> dict:
    return {
        "settings": {"k_values": ["1e-5", 0.01]},
        "models": [{"name": "some/model"}],
        "datasets": [{"name": "Spatial_Reasoning"}],
        "evals": {"benchmarks": ["arc_challenge", "Spatial_Reasoning"], "num_fewshot": [25, 0]},
    }


def test_shipped_configs_load():
    cfg = load_config(ROOT / "config.yml")
    assert cfg.settings.k_values == [0.00001, 0.00004, 0.00016, 0.00064, 0.00256, 0.01024]
    assert len(cfg.datasets) == 10 and len(cfg.evals.benchmarks) == 10
    assert cfg.models[0].name == "meta-llama/Llama-3.1-8B-Instruct"
    assert cfg.evals.fewshot("arc_challenge") == 25
    demo = load_config(ROOT / "configs" / "demo.yml")
    assert demo.models


def test_string_numbers_are_cast():
    cfg = parse_config(base())
    assert cfg.settings.k_values == [1e-5, 0.01]
    assert isinstance(cfg.settings.k_values[0], float)
    assert cfg.models[0].tag == "model"


@pytest.mark.parametrize(
    "mutate, key",
    [
        (lambda c: c["settings"].update(bogus=1), "settings.bogus"),
        (lambda c: c["settings"].update(seed=2**70), "settings.seed"),
        (lambda c: c["settings"].update(seed=-1), "settings.seed"),
        (lambda c: c.update(aggregate={"seed": 2**32}), "aggregate.seed"),
        (lambda c: c.update(data={"test_size": 10**12}), "data.test_size"),
        (lambda c: c.update(aggregate={"bootstrap": 10**12}), "aggregate.bootstrap"),
        (lambda c: c["evals"].update(num_fewshot=[10**9, 0]), "evals.num_fewshot[0]"),
        (lambda c: c.update(aggregate={"chance": {"hellaswag": 0.25}}), "aggregate.chance.hellaswag"),
        (lambda c: c.update(extra={}), "extra"),
        (lambda c: c["settings"].update(k_values=[0.5, 1.5]), "settings.k_values[1]"),
        (lambda c: c["settings"].update(k_values=[0]), "settings.k_values[0]"),
        (lambda c: c["settings"].update(k_values=["abc"]), "settings.k_values[0]"),
        (lambda c: c["settings"].update(front_removal="two"), "settings.front_removal"),
        (lambda c: c["settings"].update(train_batch_size=1.5), "settings.train_batch_size"),
        (lambda c: c["datasets"].append({"name": "Telepathy"}), "datasets[1].name"),
        (lambda c: c["datasets"][0].update(key="context,colour"), "datasets[0].key"),
        (lambda c: c["evals"].update(num_fewshot=[0]), "evals.num_fewshot"),
        (lambda c: c["evals"].update(backend="tgi"), "evals.backend"),
        (lambda c: c["models"][0].pop("name"), "models[0].name"),
        (lambda c: c.update(models=[]), "models"),
        (lambda c: c.update(extract={"regions": ["top", "middle"]}), "extract.regions"),
        (lambda c: c.update(finetune={"gradient_checkpointing": "yes"}), "finetune.gradient_checkpointing"),
        (lambda c: c["settings"].update(k_values=[]), "settings.k_values"),
        (lambda c: c.update(datasets=[]), "datasets"),
        (lambda c: c.pop("datasets"), "datasets"),
        (lambda c: c["evals"].update(benchmarks=[], num_fewshot=[]), "evals.benchmarks"),
        (lambda c: c["evals"].update(num_fewshot=[25, -1]), "evals.num_fewshot[1]"),
        (lambda c: c.update(finetune={"dtype": "float16"}), "finetune.dtype"),
        (lambda c: c.update(finetune={"processes": 0}), "finetune.processes"),
        # an empty list or name that used to pass and fail stages later (regions: [] in plots.py)
        (lambda c: c.update(extract={"regions": []}), "extract.regions"),
        (lambda c: c.update(extract={"regions": ["bottom"]}), "extract.regions"),
        (lambda c: c["models"][0].update(name=""), "models[0].name"),
        (lambda c: c["datasets"][0].update(key=" , "), "datasets[0].key"),
        (lambda c: c["evals"].update(benchmarks=["arc_challenge", ""]), "evals.benchmarks[1]"),
        (lambda c: c["evals"].update(include_path=[""]), "evals.include_path[0]"),
        (lambda c: c["evals"].update(include_path=""), "evals.include_path[0]"),
        (lambda c: c["evals"].update(dataset_paths={"arc_challenge": ""}), "evals.dataset_paths.arc_challenge"),
        (lambda c: c.update(aggregate={"metrics": {"arc_challenge": ""}}), "aggregate.metrics.arc_challenge"),
        (
            lambda c: c["evals"].update(benchmarks=[{"name": "arc_challenge", "metric": ""}], num_fewshot=[]),
            "evals.benchmarks[0].metric",
        ),
        # an entry beside the parallel list named the list's rule; an entry's bad limit an internal key
        (lambda c: c["evals"].update(benchmarks=["arc_challenge", {"name": "Spatial_Reasoning"}]), "evals.num_fewshot"),
        (
            lambda c: c["evals"].update(benchmarks=[{"name": "arc_challenge", "limit": 0}], num_fewshot=[]),
            "evals.benchmarks[0].limit",
        ),
        # silently accepted before issue 30
        *[
            (lambda c, size=size: c["evals"].update(composites={"mix": {"abilities": TWO, "size": size}}), MIX_SIZE)
            for size in (0, -5, "big", 1, 2.5, True)
        ],
        (lambda c: c["evals"].update(tensor_parallel_size=0), "evals.tensor_parallel_size"),
        (lambda c: c["evals"].update(cpu_workers=0), "evals.cpu_workers"),
        (lambda c: c.update(aggregate={"threshold": -1}), "aggregate.threshold"),
        (lambda c: c["models"][0].update(tag="../escaped"), "models[0].tag"),
        (lambda c: c["models"][0].update(tag="a/b"), "models[0].tag"),
        (lambda c: c["models"][0].update(tag="a\\b"), "models[0].tag"),
        (lambda c: c["models"][0].update(tag=".."), "models[0].tag"),
        (lambda c: c["models"][0].update(tag="."), "models[0].tag"),
        (lambda c: c["models"][0].update(tag="tasks"), "models[0].tag"),
        (lambda c: c["models"][0].update(tag="compare"), "models[0].tag"),
        (lambda c: c["models"][0].update(name="some/tasks"), "models[0].tag"),  # the tag taken from the name
        (lambda c: c["settings"].update(output_dir=""), "settings.output_dir"),
        (lambda c: c.update(data={"dir": " "}), "data.dir"),
        (lambda c: c.update(aggregate={"bootstrap": -1}), "aggregate.bootstrap"),
        (lambda c: c.update(data={"difficulty": "hard"}), "data.difficulty"),
        (lambda c: c.update(aggregate={"metrics": {"gsm8k": "exact_match"}}), "aggregate.metrics.gsm8k"),
        # few-shot examples of a generated task would come from its scored split (lm-eval's fallback)
        (lambda c: c["evals"].update(num_fewshot=[25, 3]), "evals.num_fewshot[1]"),
    ],
)
def test_bad_values_name_the_key(mutate, key):
    raw = base()
    mutate(raw)
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    assert str(err.value).startswith(key), str(err.value)
    assert "\n" not in str(err.value)


def test_cli_bad_config_one_line_nonzero(tmp_path):
    raw = base()
    raw["evals"]["num_fewshot"] = [1, 2, 3]
    path = tmp_path / "bad.yml"
    path.write_text(yaml.safe_dump(raw))
    proc = subprocess.run([sys.executable, "-m", "benchprof", "extract", str(path)], capture_output=True, text=True)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "evals.num_fewshot" in lines[0], proc.stderr


def test_help_lists_stages_without_torch():
    code = (
        "import sys; from benchprof.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'benchprof --help imported torch'"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={"PAGER": "cat", "PATH": "/usr/bin:/bin"}
    )
    assert proc.returncode == 0, proc.stderr
    for stage in ("run", "data", "finetune", "extract", "damage", "evaluate", "aggregate"):
        assert stage in proc.stdout + proc.stderr


def test_a_duplicate_key_is_refused_with_its_path_and_line(tmp_path):
    """YAML keeps the last of two equal keys silently; a config that says a thing twice is refused."""
    path = tmp_path / "config.yml"
    text = yaml.safe_dump(base(), sort_keys=False)
    path.write_text(text.replace("settings:\n", "settings:\n  seed: 1\n  seed: 2\n", 1))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"settings.seed: duplicate key ({path} line 3; first on line 2)"
    raw = base()
    raw["datasets"][0]["path"] = "a"
    text = yaml.safe_dump(raw, sort_keys=False)
    path.write_text(text.replace("  path: a\n", "  path: a\n  key: answer\n  path: b\n"))
    with pytest.raises(ConfigError, match=r"^datasets\[0\]\.path: duplicate key \("):
        load_config(path)
    # a merge key (<<) is not a duplicate, nor is a key it brings in that the mapping sets again
    path.write_text(yaml.safe_dump(base()) + "aggregate: {<<: {seed: 1, bootstrap: 5}, seed: 2}\n")
    assert load_config(path).aggregate.seed == 2 and load_config(path).aggregate.bootstrap == 5


def test_composite_size_and_tags_that_are_fine():
    raw = base()
    raw["evals"]["composites"] = {"mix": {"abilities": TWO, "size": 2}}
    raw["models"][0]["tag"] = "my.model-v2_1"
    cfg = parse_config(raw)
    assert cfg.evals.composites["mix"]["size"] == 2 and cfg.models[0].tag == "my.model-v2_1"
    raw["aggregate"] = {"bootstrap": 0, "threshold": 0}  # 0 resamples: no intervals (documented)
    assert parse_config(raw).aggregate.bootstrap == 0


def test_a_composite_named_as_an_ability_split_is_refused():
    """A composite under an ability's name would be scored in place of that ability's own test split."""
    raw = base()
    raw["evals"]["composites"] = {TWO[0]: {"abilities": TWO, "size": 2}}
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    assert str(err.value) == (
        f"evals.composites: '{TWO[0]}' is an ability's test split; give the composite another name"
    )


def snapshot_tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    "mutate, key",
    [
        (lambda raw: raw["evals"].update(benchmarks=["../../../X"], composites={"../../../X": {"abilities": TWO}}),
         "evals.benchmarks[0]"),
        (lambda raw: raw["evals"].update(benchmarks=["ok"], composites={"../../../X": {"abilities": TWO}}),
         "evals.composites"),
        (lambda raw: raw["evals"].update(benchmarks=["../../../../ESC"]), "evals.benchmarks[0]"),
        (lambda raw: raw["evals"].update(benchmarks=["a\\b"]), "evals.benchmarks[0]"),
        (lambda raw: raw["models"][0].update(tag=".configs"), "models[0].tag"),
        (lambda raw: raw["models"][0].update(tag="../up"), "models[0].tag"),
        (lambda raw: raw["evals"].update(benchmarks=["x" * 5000]), "evals.benchmarks[0]"),
    ],
)  # fmt: skip
def test_names_that_would_leave_their_folder_are_refused_and_nothing_is_written(tmp_path, mutate, key):
    """Names become file names (results, task files, model folders): one that would leave its folder, or a
    reserved hidden one, is refused at load with one short line, and no command writes anything anywhere."""
    project = tmp_path / "a" / "b" / "c" / "project"
    project.mkdir(parents=True)
    raw = base()
    raw["models"][0]["name"] = str(tmp_path / "missing-model")
    raw["settings"]["output_dir"] = "outputs"
    raw["evals"].pop("num_fewshot")
    mutate(raw)
    config = project / "config.yml"
    config.write_text(yaml.safe_dump(raw))
    before = snapshot_tree(tmp_path)
    for command in ("status", "run", "evaluate", "aggregate"):
        proc = subprocess.run(
            [sys.executable, "-m", "benchprof", command, str(config)], capture_output=True, text=True, cwd=project
        )
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and key in lines[0], proc.stderr
        assert len(lines[0]) < 300  # a 5,000-character name is quoted as a short prefix
    assert snapshot_tree(tmp_path) == before


def test_the_layout_refuses_an_unsafe_name_whatever_the_caller():
    from benchprof import BenchprofError
    from benchprof.core.layout import Layout, Variant, task_yaml_file

    layout = Layout(Path("/tmp/outputs"), "tiny")
    for name in ("../x", "a/b", ".hidden", "", "n" * 201):
        with pytest.raises(BenchprofError):
            layout.eval_file(Variant(), name)
        with pytest.raises(BenchprofError):
            task_yaml_file(Path("/tmp/tasks"), name)
    with pytest.raises(BenchprofError):
        Layout(Path("/tmp/outputs"), "..")
    assert layout.eval_file(Variant(), "mmlu_college_physics").name == "mmlu_college_physics.json"


def test_an_alias_bomb_is_refused_in_one_short_line(tmp_path):
    """Nine levels of YAML aliases, each repeating the one below ten times: 10^9 values from 1 KB. Refused at
    load, before anything walks or prints the expanded value."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join(f'*a{i - 1}' for _ in range(10))}]" for i in range(1, 10)]
    raw = base()
    path = tmp_path / "bomb.yml"
    path.write_text(
        "\n".join(lines) + "\n" + yaml.safe_dump({**raw, "settings": {"k_values": "*a9"}}).replace("'*a9'", "*a9")
    )
    with pytest.raises(ConfigError, match="aliases expand to") as err:
        load_config(path)
    assert len(str(err.value)) < 200
    proc = subprocess.run([sys.executable, "-m", "benchprof", "status", str(path)], capture_output=True, text=True)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1


def test_a_wrong_value_is_quoted_as_a_short_prefix():
    raw = base()
    raw["settings"]["front_removal"] = "x" * 100_000
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    assert str(err.value).startswith("settings.front_removal") and len(str(err.value)) < 200


def test_threads_divide_the_usable_cores_among_the_processes_unless_set(monkeypatch):
    import os

    cores = len(os.sched_getaffinity(0))
    settings = parse_config(base()).settings
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert settings.thread_count() == cores
    assert settings.thread_count(processes=2) == max(1, cores // 2)
    assert settings.thread_count(processes=4 * cores) == 1
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")  # a torchrun rank of two on this machine
    assert settings.thread_count() == max(1, cores // 2)
    raw = base()
    raw["settings"]["threads"] = 3
    assert parse_config(raw).settings.thread_count(processes=2) == 3
    raw["settings"]["threads"] = -1
    with pytest.raises(ConfigError, match=r"^settings\.threads"):
        parse_config(raw)


def test_use_threads_reaches_torch_before_and_after_its_import():
    import subprocess
    import sys

    code = (
        "from benchprof.core.modeling import use_threads; use_threads(1); import torch; a = torch.get_num_threads(); "
        "use_threads(2); print(a, torch.get_num_threads())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "OMP_NUM_THREADS": "2"},
    )
    assert done.stdout.split() == ["1", "2"], done.stderr


def test_run_reports_an_unusable_data_dir_before_any_model_or_task_check(tmp_path):
    """The folders are checked first and alone: a data.dir below a file is the one error, although the model does
    not exist either (that check would load a tokenizer and lm-eval's task index first), and nothing is written."""
    (tmp_path / "afile").write_text("x")
    raw = base()
    raw["models"] = [{"name": str(tmp_path / "no-such-model")}]
    raw["data"] = {"dir": str(tmp_path / "afile" / "data")}
    raw["settings"]["output_dir"] = str(tmp_path / "out")
    path = tmp_path / "c.yml"
    path.write_text(yaml.safe_dump(raw))
    code = "import sys; from benchprof.cli import main; main(sys.argv[1:])"
    proc = subprocess.run([sys.executable, "-c", code, "run", str(path)], capture_output=True, text=True)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [f"benchprof: error: data.dir: {tmp_path / 'afile'} is not a folder"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("section", "key", "folder", "where"),
    [
        ("settings", "output_dir", str(ROOT / "benchprof"), "benchprof's package folder"),
        ("data", "dir", str(ROOT / "benchprof" / "abilities"), "benchprof's package folder"),
        ("settings", "output_dir", str(ROOT / ".git" / "outputs"), "a .git folder"),
        ("data", "dir", str(ROOT / ".git"), "a .git folder"),
        ("settings", "output_dir", str(ROOT), "benchprof's package folder"),  # the model tagged benchprof: its folder
    ],
)
def test_a_folder_benchprof_writes_inside_its_package_or_git_is_refused_at_load(tmp_path, section, key, folder, where):
    """settings.output_dir or data.dir inside the package's own folder or a .git folder (the probe's ../benchprof
    and benchprof/abilities): one line naming the key before any command runs, and nothing written there."""
    raw = base()
    raw["models"][0]["tag"] = "benchprof"
    raw.setdefault(section, {})[key] = folder
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=rf"^{section}\.{key}: .* is inside {where}"):
        load_config(config)
    proc = subprocess.run([sys.executable, "-m", "benchprof", "data", str(config)], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.startswith(f"benchprof: error: {section}.{key}: ")
    assert proc.stderr.count("\n") == 1 and not (ROOT / "benchprof" / "benchprof").exists()


def test_a_config_that_is_not_utf8_text_is_one_line(tmp_path):
    from benchprof.core.loader import load_config
    from benchprof.core.schema import ConfigError

    path = tmp_path / "config.yml"
    path.write_bytes("settings:\n  output_dir: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=rf"^{path}: not a UTF-8 text file \(byte 27\); a config is YAML text$"):
        load_config(path)
