"""Reliability (issue 9): killed runs resume to the same outputs, changed configs recompute exactly
what depends on the change, bad input fails early with one line, `benchprof status` tells the state."""

import csv
import errno
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from benchprof import BenchprofError
from benchprof.cli import main
from benchprof.core.layout import Layout, Variant
from benchprof.core.loader import load_config
from benchprof.core.storage import read_json, save_tensors, write_json
from benchprof.stages.preflight import model_facts, parameter_counts, preflight, read_model
from benchprof.stages.run import run
from benchprof.stages.status import plan_status

ABILITY = "Spatial_Reasoning"
OTHER = "Temporal_Reasoning"
K = 0.05


def write_config(folder: Path, model_dir: Path, **changes) -> Path:
    """A small generated-data project: one ability, one k, its own test split as the benchmark."""
    raw = {
        "settings": {"k_values": [K], "output_dir": "outputs", "eval_batch_size": 8, "train_batch_size": 8},
        "models": [{"name": str(model_dir), "tag": "tiny", "dtype": "float32"}],
        "datasets": [{"name": ABILITY}],
        "data": {"dir": "data", "train_size": 24, "test_size": 12, "seed": 1},
        "evals": {"benchmarks": [ABILITY], "limit": 12, "device": "cpu"},
        "aggregate": {"bootstrap": 50},
    }
    for key, value in changes.items():
        section, name = key.split("__") if "__" in key else (key, None)
        if name is None:
            raw[section] = value
        else:
            raw[section][name] = value
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.yml"
    path.write_text(yaml.safe_dump(raw))
    return path


def final_outputs(folder: Path) -> dict:
    """What a finished run produced: safetensors bytes, eval metrics and AIS rows."""
    root = folder / "outputs" / "tiny"
    tensors = {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.safetensors"))}
    metrics = {str(p.relative_to(root)): read_json(p)["results"] for p in sorted(root.rglob("eval/**/*.json"))}
    with open(root / "profile" / "ais.csv") as f:
        rows = list(csv.DictReader(f))
    return {
        "tensors": tensors,
        "metrics": metrics,
        "ais": rows,
        "data": {p.name: p.read_bytes() for p in sorted((folder / "data" / ABILITY).glob("*.jsonl"))},
    }


def assert_same_outputs(got: dict, want: dict) -> None:
    assert got["data"] == want["data"]
    assert sorted(got["tensors"]) == sorted(want["tensors"]) and len(want["tensors"]) == 4
    for name in want["tensors"]:
        assert got["tensors"][name] == want["tensors"][name], name  # byte for byte
    assert got["metrics"].keys() == want["metrics"].keys() and len(want["metrics"]) == 4
    for name, results in want["metrics"].items():
        for task, values in results.items():
            for metric, value in values.items():
                if isinstance(value, float):
                    assert got["metrics"][name][task][metric] == pytest.approx(value, rel=1e-6, abs=1e-9)
    assert len(got["ais"]) == len(want["ais"]) > 0
    for row_got, row_want in zip(got["ais"], want["ais"]):
        for column, value in row_want.items():
            try:
                assert float(row_got[column]) == pytest.approx(float(value), rel=1e-6, abs=1e-9, nan_ok=True)
            except ValueError:
                assert row_got[column] == value


def temp_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob(".*.tmp"))


@pytest.fixture(scope="module")
def reference(tiny_model_dir, tmp_path_factory):
    """An uninterrupted run, in process."""
    folder = tmp_path_factory.mktemp("reference")
    config = write_config(folder, tiny_model_dir)
    run(load_config(config))
    return folder, final_outputs(folder)


# ---- kill and resume -------------------------------------------------------------------------

KILLER = """
import os, re, signal, sys
pattern, nth = sys.argv[1], int(sys.argv[2])
real_replace, seen = os.replace, [0]

def replace(src, dst, *args, **kwargs):
    if re.search(pattern, str(dst)):
        seen[0] += 1
        if seen[0] == nth:  # SIGKILL right before this rename: the temporary file is written, the target not
            os.kill(os.getpid(), signal.SIGKILL)
    return real_replace(src, dst, *args, **kwargs)

os.replace = replace
from benchprof.cli import main
main(sys.argv[3:])
"""


def killed_run(folder: Path, config: Path, pattern: str, nth: int = 1) -> None:
    """`benchprof run config` in a subprocess, SIGKILLed just before the nth rename onto a path matching `pattern`."""
    script = folder / "killer.py"
    script.write_text(KILLER)
    proc = subprocess.run(
        [sys.executable, str(script), pattern, str(nth), "run", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]


@pytest.mark.parametrize(
    "stage,pattern,nth",
    [
        ("data", r"data/Spatial_Reasoning/test\.jsonl$", 1),
        ("finetune", r"importance/manifest\.json$", 1),
        ("extract", r"masks/k0\.05/random\.safetensors$", 1),
        ("evaluate", r"eval/.*Spatial_Reasoning\.json$", 3),
        ("aggregate", r"profile/ais\.md$", 1),
    ],
)
def test_killed_run_resumes_to_the_same_outputs(reference, tiny_model_dir, tmp_path, stage, pattern, nth):
    config = write_config(tmp_path, tiny_model_dir)
    killed_run(tmp_path, config, pattern, nth)
    assert temp_files(tmp_path), "the kill should have left a temporary file behind"
    run(load_config(config))
    assert_same_outputs(final_outputs(tmp_path), reference[1])
    left = [p for p in temp_files(tmp_path) if "profile" not in p.parts or stage != "aggregate"]
    assert not left, left  # a resumed stage clears what the killed one left


def test_external_sigkill_during_evaluation_then_resume(reference, tiny_model_dir, tmp_path):
    """A real SIGKILL from outside, once the first evaluation file appears."""
    config = write_config(tmp_path, tiny_model_dir)
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchprof", "run", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    first = tmp_path / "outputs" / "tiny" / "original" / "eval" / f"{ABILITY}.json"
    deadline = time.time() + 240
    while not first.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    run(load_config(config))
    assert_same_outputs(final_outputs(tmp_path), reference[1])


def test_reverted_config_after_a_kill_recomputes_from_the_right_data(reference, tiny_model_dir, tmp_path):
    """Killed after the new importance file is in place but before its manifest: reverting the
    config must not let the old manifest vouch for the new file."""
    shutil.copytree(reference[0] / "outputs", tmp_path / "outputs")
    shutil.copytree(reference[0] / "data", tmp_path / "data")
    config = write_config(tmp_path, tiny_model_dir, data__seed=2)
    killed_run(tmp_path, config, r"importance/manifest\.json$")
    config = write_config(tmp_path, tiny_model_dir)  # back to seed 1
    run(load_config(config))
    assert_same_outputs(final_outputs(tmp_path), reference[1])


# ---- invalidation ----------------------------------------------------------------------------


def write_user_data(folder: Path, reference_folder: Path) -> Path:
    """A user-supplied dataset folder (a copy of generated Spatial_Reasoning data)."""
    shutil.copytree(reference_folder / "data" / ABILITY, folder, ignore=shutil.ignore_patterns("manifest.json"))
    return folder


def stamps(root: Path) -> dict[str, int]:
    return {
        str(p.relative_to(root)): p.stat().st_mtime_ns
        for p in sorted(root.rglob("*"))
        if p.is_file()
        and p.suffix in (".safetensors", ".json", ".jsonl")
        and "profile" not in p.parts
        and "tasks" not in p.parts
    }


def test_changes_recompute_exactly_what_depends_on_them(reference, tiny_model_dir, tmp_path):
    user_data = write_user_data(tmp_path / "spatial", reference[0])
    datasets = [{"name": ABILITY, "path": str(user_data)}, {"name": OTHER}]
    config = write_config(tmp_path, tiny_model_dir, datasets=datasets)
    run(load_config(config))
    root = tmp_path / "outputs" / "tiny"
    before = stamps(root)

    # a new k adds masks and evaluations; nothing computed before is touched
    config = write_config(tmp_path, tiny_model_dir, datasets=datasets, settings__k_values=[K, 0.1])
    run(load_config(config))
    after = stamps(root)
    assert {name: after[name] for name in before} == before
    added = sorted(set(after) - set(before))
    assert all("k0.1" in name for name in added)
    assert len([n for n in added if n.endswith(".safetensors")]) == 2 * 3  # 2 abilities x 3 regions
    assert len([n for n in added if "eval" in n and n.endswith(f"{ABILITY}.json")]) == 2 * 3

    # a new data seed regenerates OTHER's data: its importance, masks and evaluations are redone,
    # the user-supplied ability and the original evaluation (benchmark data unchanged) are not
    config = write_config(tmp_path, tiny_model_dir, datasets=datasets, settings__k_values=[K, 0.1], data__seed=2)
    run(load_config(config))
    final = stamps(root)
    changed = sorted(name for name in after if final[name] != after[name])
    assert changed and all(name.startswith(OTHER) for name in changed)
    assert f"{OTHER}/importance/importance.safetensors" in changed
    assert sum(1 for n in changed if "/masks/" in n and n.endswith(".safetensors")) == 2 * 3
    # random regions do not depend on importance: same mask bytes, so their evaluations are kept
    assert sorted(n for n in changed if "/eval/" in n and n.endswith(f"{ABILITY}.json")) == [
        f"{OTHER}/eval/k{k}/{region}/{ABILITY}.json" for k in ("0.05", "0.1") for region in ("bottom", "top")
    ]
    assert all(final[name] == after[name] for name in after if not name.startswith(OTHER))


# ---- fail early ------------------------------------------------------------------------------


def test_preflight_passes_and_counts_parameters_like_the_loaded_model(reference, tiny_model_dir):
    from safetensors import safe_open

    cfg = load_config(reference[0] / "config.yml")
    assert preflight(cfg) == []
    facts = read_model(0, str(tiny_model_dir), str(tiny_model_dir), [])  # through transformers, not the cache
    assert facts is not None and model_facts(0, str(tiny_model_dir), str(tiny_model_dir), []) == facts
    total, eligible, n_layers = parameter_counts(facts, "mlp", 0, 0)
    path = Layout(cfg.output_root, "tiny").importance_file(ABILITY)
    with safe_open(str(path), "pt") as f:
        assert total == int(f.metadata()["total_params"])
        assert eligible == sum(f.get_slice(n).get_shape()[0] * f.get_slice(n).get_shape()[1] for n in f.keys())
    assert n_layers == 4


def problems_of(config: Path) -> list[str]:
    with pytest.raises(BenchprofError) as err:
        preflight(load_config(config))
    return str(err.value).splitlines()


def test_preflight_names_each_problem(tiny_model_dir, tmp_path):
    no_config = tmp_path / "not_a_model"
    no_config.mkdir()
    assert problems_of(write_config(tmp_path, no_config)) == [
        f"models[0].name: {no_config}: no config.json (not a Hugging Face model folder)"
    ]
    assert problems_of(write_config(tmp_path, tmp_path / "missing")) == [
        f"models[0].name: {tmp_path / 'missing'}: model folder not found"
    ]
    assert problems_of(write_config(tmp_path, "nobody-xyz/no-such-model")) == [
        "models[0].name: 'nobody-xyz/no-such-model' not found locally and HF_HUB_OFFLINE=1"
    ]
    [line] = problems_of(write_config(tmp_path, tiny_model_dir, settings__k_values=[0.9]))
    assert line.startswith("settings.k_values[0]: k=0.9 selects n = floor(k * ") and "eligible" in line
    [line] = problems_of(write_config(tmp_path, tiny_model_dir, settings__front_removal=3, settings__back_removal=1))
    assert line.startswith("settings.front_removal/back_removal: 3 + 1 remove all 4 layers")
    (tmp_path / "a_file").write_text("")
    assert problems_of(write_config(tmp_path, tiny_model_dir, settings__output_dir="a_file/out")) == [
        f"settings.output_dir: {tmp_path / 'a_file'} is not a folder"
    ]


def test_model_facts_are_kept_by_content_and_still_refuse(tiny_model_dir, tmp_path, monkeypatch):
    """The model check through transformers (read_model: about 3 s of imports) runs once per content of the model's
    files: later preflights read its facts back and refuse a k that selects nothing or more than the eligible
    weights as before; a changed tokenizer file is read again."""
    import benchprof.stages.preflight as preflight_module

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    config = write_config(tmp_path, model)
    assert preflight(load_config(config)) == []
    kept = sorted((tmp_path / "cache" / "benchprof").glob("model_facts-*.json"))
    assert len(kept) == 1
    facts = read_model(0, str(model), str(model), [])
    total, eligible, _ = parameter_counts(facts, "mlp", 0, 0)
    read_through_transformers = preflight_module.read_model

    def not_again(*args):
        raise AssertionError("the model was read through transformers again")

    monkeypatch.setattr(preflight_module, "read_model", not_again)
    assert preflight(load_config(config)) == []
    assert problems_of(write_config(tmp_path, model, settings__k_values=[0.9])) == [
        f"settings.k_values[0]: k=0.9 selects n = floor(k * {total}) = {math.floor(0.9 * total)} weights, more than "
        f"the {eligible} eligible in tiny (finetune.scope mlp, layers 0..3); lower k or front/back_removal"
    ]
    [line] = problems_of(write_config(tmp_path, model, settings__k_values=[1e-9]))
    assert line.startswith(f"settings.k_values[0]: k=1e-09 selects no weight of tiny: n = floor(k * {total}) = 0 ")
    [line] = problems_of(write_config(tmp_path, model, settings__front_removal=3, settings__back_removal=1))
    assert line.startswith("settings.front_removal/back_removal: 3 + 1 remove all 4 layers")
    monkeypatch.setattr(preflight_module, "read_model", read_through_transformers)
    (model / "chat_template.jinja").unlink(missing_ok=True)
    settings = json.loads((model / "tokenizer_config.json").read_text())
    settings.pop("chat_template", None)
    (model / "tokenizer_config.json").write_text(json.dumps(settings))
    [warning] = preflight(load_config(write_config(tmp_path, model)))
    assert "no chat template" in warning
    assert len(list((tmp_path / "cache" / "benchprof").glob("model_facts-*.json"))) == 2


def test_the_shipped_demo_model_facts_are_what_transformers_says_and_serve_a_first_dry_run(tmp_path, monkeypatch):
    """benchprof/assets/model_facts.json (lab/shipped_facts.py) holds, for the demo model's files and this
    environment's library versions, what read_model says through transformers now; a first preflight of the demo
    config with an empty user cache reads them and never transformers; another key (an edited tokenizer file) is
    read through transformers again."""
    from benchprof.lab.shipped_facts import shipped_entries
    from benchprof.stages.preflight import SHIPPED_FACTS, model_facts_key

    shipped = json.loads(SHIPPED_FACTS.read_text())
    demo = SHIPPED_FACTS.parent / "demo-model"
    if shipped[0]["key"][1] != model_facts_key(str(demo), str(demo))[1]:  # another torch, transformers or tokenizers
        pytest.skip("the shipped facts are for other library versions: such a dry run checks through transformers")
    assert shipped == shipped_entries(), "run scripts/ship_model_facts.py: the demo model or a library changed"
    import benchprof.stages.preflight as preflight_module

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def not_read(*args):
        raise AssertionError("the demo model was read through transformers")

    monkeypatch.setattr(preflight_module, "read_model", not_read)
    config = write_config(tmp_path, demo)
    assert preflight(load_config(config)) == []
    edited = tmp_path / "demo-model"
    shutil.copytree(demo, edited)
    (edited / "generation_config.json").write_text("{}")
    with pytest.raises(AssertionError, match="through transformers"):
        preflight(load_config(write_config(tmp_path, edited)))


def test_preflight_checks_user_datasets(tiny_model_dir, tmp_path, reference):
    data = write_user_data(tmp_path / "spatial", reference[0])
    config = write_config(tmp_path, tiny_model_dir, datasets=[{"name": ABILITY, "path": str(data)}])
    assert preflight(load_config(config)) == []
    lines = (data / "train.jsonl").read_text().splitlines()
    (data / "train.jsonl").write_text("\n".join(lines[:2] + ['{"id": "x", oops'] + lines[3:]) + "\n")
    (data / "test.jsonl").write_text("\n")
    assert problems_of(config) == [
        f"datasets[0].path: {data / 'train.jsonl'}:3: not valid JSON "
        "(Expecting property name enclosed in double quotes)",
        f"datasets[0].path: {data / 'test.jsonl'}: no records",
    ]
    config = write_config(tmp_path, tiny_model_dir, datasets=[{"name": ABILITY, "path": str(tmp_path / "none")}])
    assert problems_of(config) == [f"datasets[0].path: {tmp_path / 'none'}: folder not found"]


def own_task(folder: Path, data: Path) -> Path:
    """A multiple-choice task YAML of the user's own (evals.include_path) reading `data`."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = {
        "task": "mytask",
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(data)}},
        "test_split": "test",
        "output_type": "multiple_choice",
        "doc_to_text": "{{question}}",
        "doc_to_choice": "{{options}}",
        "doc_to_target": "label",
        "metric_list": [{"metric": "acc"}],
    }
    (folder / "mytask.yaml").write_text(yaml.safe_dump(spec))
    return folder


def test_preflight_finds_what_the_stages_found_late(tiny_model_dir, tmp_path):
    """Each of these was found only after finetune or evaluate (a traceback, or a wrong result); now one line each."""
    assert problems_of(write_config(tmp_path, tiny_model_dir, evals={"benchmarks": [ABILITY], "device": "cuda"})) == [
        "evals.device: 'cuda', but CUDA is not available on this machine; use auto or cpu"
    ]
    assert problems_of(write_config(tmp_path, tiny_model_dir, evals={"benchmarks": [ABILITY], "device": "gpu"})) == [
        "evals.device: 'gpu' is not a device (auto, cpu, cuda, cuda:0, ...)"
    ]
    assert problems_of(write_config(tmp_path, tiny_model_dir, evals={"benchmarks": [ABILITY], "backend": "vllm"})) == [
        "evals.backend: vllm is not installed (pip install vllm, on a GPU node); backend hf needs nothing more"
    ]
    mix = {"mix": {"abilities": [ABILITY, OTHER], "size": 30}}  # 15 of each; data.test_size is 12
    config = write_config(tmp_path, tiny_model_dir, evals={"benchmarks": [ABILITY, "mix"], "composites": mix})
    assert problems_of(config) == [
        f"evals.composites.mix.size: 30 takes 15 test items of each of its 2 abilities, and {ABILITY} has 12 "
        "(data.test_size)",
        f"evals.composites.mix.size: 30 takes 15 test items of each of its 2 abilities, and {OTHER} has 12 "
        "(data.test_size)",
    ]
    [line] = problems_of(write_config(tmp_path, tiny_model_dir, settings__k_values=[1e-9]))  # was a warning
    assert line.startswith("settings.k_values[0]: k=1e-09 selects no weight of tiny: n = floor(k * ") and (
        "eligible); raise k to at least" in line
    )
    evals = {"benchmarks": [ABILITY, "arc_easy"], "limit": 4}  # a metric the task does not report: found in aggregate
    metrics = {ABILITY: "exact_match", "arc_easy": "f1,none"}
    config = write_config(tmp_path, tiny_model_dir, evals=evals, aggregate={"metrics": metrics})
    assert problems_of(config) == [
        f"aggregate.metrics.{ABILITY}: 'exact_match' is not a metric of its task (it reports acc, acc_norm)",
        "aggregate.metrics.arc_easy: 'f1,none' is not a metric of its task (it reports acc, acc_norm)",
    ]
    config = write_config(tmp_path, tiny_model_dir, evals=evals, aggregate={"metrics": {"arc_easy": "acc,none"}})
    assert preflight(load_config(config)) == []
    (tmp_path / "mydata").mkdir()  # 'mydata/QR' is a folder under it, not a hub dataset id
    config = write_config(tmp_path, tiny_model_dir, datasets=[{"name": ABILITY, "path": "mydata/QR"}])
    assert problems_of(config) == [f"datasets[0].path: {tmp_path / 'mydata' / 'QR'}: folder not found"]


def test_preflight_reads_the_users_task_yamls(tiny_model_dir, tmp_path):
    tasks = own_task(tmp_path / "tasks_in", tmp_path / "gone.jsonl")
    evals = {"benchmarks": [ABILITY, "mytask"], "include_path": [str(tasks)]}
    assert problems_of(write_config(tmp_path, tiny_model_dir, evals=evals)) == [
        f"evals.benchmarks[1]: mytask ({tasks / 'mytask.yaml'}): data {tmp_path / 'gone.jsonl'} not found"
    ]
    # few-shot examples on a task with only the split it scores: lm-eval would draw them from that split
    (tmp_path / "here.jsonl").write_text("")
    tasks = own_task(tmp_path / "tasks_shots", tmp_path / "here.jsonl")
    shots = {**evals, "include_path": [str(tasks)], "num_fewshot": [0, 3]}
    assert problems_of(write_config(tmp_path, tiny_model_dir, evals=shots)) == [
        f"evals.num_fewshot[1]: mytask ({tasks / 'mytask.yaml'}) has no fewshot, training or validation split "
        "apart from the one it scores; its 3 examples would come from that split; use 0"
    ]
    tasks = own_task(tmp_path / "broken", tmp_path / "gone.jsonl")  # a new folder: lm-eval's index is cached
    (tasks / "mytask.yaml").write_text("task: mytask\ndataset_path: json\n  test_split: [test\n")
    evals["include_path"] = [str(tasks)]
    problems = problems_of(write_config(tmp_path, tiny_model_dir, evals=evals))
    assert problems[0].startswith(  # "... here" or "... in this context", as libyaml or PyYAML says it
        f"evals.include_path: {tasks / 'mytask.yaml'}: lm-eval cannot read this task YAML "
        "(line 3: mapping values are not allowed "
    )
    assert problems[1].startswith("evals.benchmarks[1]: unknown benchmark 'mytask'") and len(problems) == 2


def test_cuda_visible_devices_without_cuda_is_a_warning(tiny_model_dir, tmp_path):
    """The GPUs listed are not there: the stages run on the CPU, which a user should know, but can go on."""
    config = write_config(tmp_path, tiny_model_dir, settings__cuda_visible_devices="0")
    assert preflight(load_config(config)) == [
        "settings.cuda_visible_devices: '0', but CUDA is not available on this machine; every stage runs on the CPU"
    ]


def cpu_flags() -> set[str]:
    """The feature flags Linux lists for this CPU (/proc/cpuinfo): a reference beside torch's own probe."""
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    return next((set(line.split(":", 1)[1].split()) for line in lines if line.startswith("flags")), set())


@pytest.mark.skipif(
    not Path("/proc/cpuinfo").is_file() or os.uname().machine != "x86_64", reason="reads x86 flags from /proc/cpuinfo"
)
def test_the_bfloat16_probe_agrees_with_the_cpus_flags():
    """cpu_bfloat16 says native exactly where Linux lists amx_bf16 or avx512_bf16 (on this machine, either way)."""
    from benchprof.core.modeling import cpu_bfloat16

    assert cpu_bfloat16()[0] == bool({"amx_bf16", "avx512_bf16"} & cpu_flags())


@pytest.mark.parametrize("native", [True, False])
def test_bfloat16_evaluation_on_a_cpu_without_its_units_is_a_warning(tiny_model_dir, tmp_path, monkeypatch, native):
    """On a CPU without bfloat16 units (torch emulates bfloat16: 6.9x slower than float32 on an AMD EPYC), each
    key that asks for bfloat16 is named once, the checkpoint's own bfloat16 under dtype auto included; float32,
    or a CPU with bfloat16 units, is not warned about."""
    import benchprof.core.modeling as modeling

    monkeypatch.setattr(modeling, "cpu_bfloat16", lambda: (native, "Test CPU"))
    bf16_folder = tmp_path / "bf16-checkpoint"
    shutil.copytree(tiny_model_dir, bf16_folder)
    config = json.loads((bf16_folder / "config.json").read_text())
    (bf16_folder / "config.json").write_text(json.dumps({**config, "dtype": "bfloat16", "torch_dtype": "bfloat16"}))
    tail = (
        ": bfloat16 on a CPU without bfloat16 units (Test CPU), where torch emulates it: evaluation is slower than "
        "in float32 here (6.9x on an AMD EPYC; docs/research/performance.md, section 5)"
    )
    models = [
        {"name": str(tiny_model_dir), "tag": "a", "dtype": "bfloat16"},
        {"name": str(tiny_model_dir), "tag": "b", "dtype": "float32"},
        {"name": str(bf16_folder), "tag": "c", "dtype": "auto"},
    ]
    cases = [
        ("evals", {"evals__dtype": "bfloat16"}, "evals.dtype"),
        ("models", {"models": models}, "models[0].dtype, models[2].dtype (auto: the checkpoint's bfloat16)"),
        ("fp32", {"models": models, "evals__dtype": "float32"}, None),
    ]
    for name, changes, keys in cases:
        got = preflight(load_config(write_config(tmp_path / name, tiny_model_dir, **changes)))
        assert got == ([keys + tail] if keys and not native else [])


def test_unknown_benchmark_fails_before_anything_is_written(tiny_model_dir, tmp_path, capsys):
    config = write_config(
        tmp_path, tiny_model_dir, evals={"benchmarks": [ABILITY, "arc_eazy"], "limit": 4}, settings__k_values=[0.9]
    )
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(config)])
    assert exit_info.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("benchprof: error:")]
    # the names are checked first and alone (fast: no torch, no tokenizer); the k problem comes once they pass
    assert err == [
        "benchprof: error: evals.benchmarks[1]: unknown benchmark 'arc_eazy' (not an lm-eval task, "
        "an ability, an evals.composites entry or a task under evals.include_path; did you mean 'arc_easy'?)"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yml"]  # nothing written
    config = write_config(
        tmp_path, tiny_model_dir, evals={"benchmarks": [ABILITY], "limit": 4}, settings__k_values=[0.9]
    )
    with pytest.raises(SystemExit):
        main(["run", str(config)])
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("benchprof: error:")]
    assert len(err) == 1 and err[0].startswith("benchprof: error: settings.k_values[0]: k=0.9")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yml"]


def test_tokenizer_without_chat_template_warns(tiny_model_dir, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    (model / "chat_template.jinja").unlink(missing_ok=True)
    settings = json.loads((model / "tokenizer_config.json").read_text())
    settings.pop("chat_template", None)
    (model / "tokenizer_config.json").write_text(json.dumps(settings))
    [warning] = preflight(load_config(write_config(tmp_path, model)))
    assert warning.startswith("models[0].tokenizer: ") and "no chat template" in warning and "plain_text" in warning


# ---- clear errors ----------------------------------------------------------------------------


def copy_project(reference_folder: Path, folder: Path, model_dir: Path) -> Path:
    shutil.copytree(reference_folder / "outputs", folder / "outputs")
    shutil.copytree(reference_folder / "data", folder / "data")
    return write_config(folder, model_dir)


def test_truncated_safetensors_are_named(reference, tiny_model_dir, tmp_path):
    from benchprof.stages.evaluate import evaluate
    from benchprof.stages.extract import extract

    config = copy_project(reference[0], tmp_path, tiny_model_dir)
    layout = Layout(tmp_path / "outputs", "tiny")
    importance = layout.importance_file(ABILITY)
    importance.write_bytes(importance.read_bytes()[:1000])
    with pytest.raises(BenchprofError, match=rf"^{importance}: not a readable safetensors file"):
        extract(load_config(config), force=True)
    mask = layout.mask_file(ABILITY, K, "top")
    mask.write_bytes(mask.read_bytes()[:-10])
    with pytest.raises(BenchprofError, match=rf"^{mask}: not a readable safetensors mask"):
        evaluate(load_config(config))


def test_masks_from_another_model_are_refused(reference, tiny_model_dir, tmp_path):
    from safetensors import safe_open

    from benchprof.stages.evaluate import evaluate

    config = copy_project(reference[0], tmp_path, tiny_model_dir)
    mask = Layout(tmp_path / "outputs", "tiny").mask_file(ABILITY, K, "top")
    with safe_open(str(mask), "pt") as f:
        tensors, metadata = {n: f.get_tensor(n) for n in f.keys()}, f.metadata()
    save_tensors(mask, tensors, {**metadata, "fingerprint": "0123456789abcdef"})
    with pytest.raises(BenchprofError, match=rf"^{mask}: masks from another model"):
        evaluate(load_config(config))


def test_aggregate_never_pairs_evaluations_of_two_models(reference, tiny_model_dir, tmp_path, capsys):
    """The model edited in place, then finetune, extract and only the top region re-evaluated (`evaluate
    --nooriginal --region top`): the original's evaluations are of another model, stale as `status` says, so no
    row can be computed: one line names the first, and the profile on disk is left alone."""
    import torch
    from safetensors.torch import load_file, save_file

    from benchprof.stages.aggregate import aggregate
    from benchprof.stages.evaluate import evaluate
    from benchprof.stages.extract import extract
    from benchprof.stages.finetune import finetune

    model_dir = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model_dir)
    config = copy_project(reference[0], tmp_path, model_dir)
    weights = model_dir / "model.safetensors"
    tensors = load_file(weights)
    name = next(n for n in tensors if "mlp.up_proj" in n)
    tensors[name] = tensors[name] + torch.full_like(tensors[name], 0.01)  # a fine-tuned checkpoint, same size
    save_file(tensors, weights, metadata={"format": "pt"})
    finetune(load_config(config))
    extract(load_config(config))
    evaluate(load_config(config), region="top", original=False)
    report = tmp_path / "outputs" / "tiny" / "profile" / "ais.md"
    before = report.read_bytes() if report.is_file() else None
    capsys.readouterr()
    with pytest.raises(BenchprofError, match="no current evaluation results for tiny"):
        aggregate(load_config(config), plots=False)
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("aggregate: tiny:")]
    assert "original: stale (changed: model" in line and line.endswith("; nothing written")
    assert (report.read_bytes() if report.is_file() else None) == before


def test_evaluate_original_only_scores_the_unablated_model_alone(reference, tiny_model_dir, tmp_path):
    """`benchprof evaluate --original_only`: the original's evaluations, no region's, and no mask is read (the
    masks are gone here)."""
    from benchprof.cli import main

    config = copy_project(reference[0], tmp_path, tiny_model_dir)
    root = tmp_path / "outputs" / "tiny"
    for folder in {*root.glob("*/eval"), *root.glob("*/masks")}:
        shutil.rmtree(folder)
    main(["evaluate", str(config), "--original_only"])
    written = sorted(str(p.relative_to(root)) for p in root.rglob("eval/**/*.json"))
    assert written == [f"original/eval/{ABILITY}.json"]
    with pytest.raises(SystemExit):
        main(["evaluate", str(config), "--original_only", "--nooriginal"])


def test_a_user_task_evaluates_without_the_abilities_data(tiny_model_dir, tmp_path):
    """`evaluate --benchmark mytask --original_only` on a project whose ability data was never generated: the user's
    task needs none of it, so it runs (it used to stop at "run `benchprof data` first")."""
    import json

    from benchprof.cli import main

    data = tmp_path / "mine.jsonl"
    rows = [{"question": f"{a} plus one?", "options": [str(a + 1), str(a + 5)], "label": 0} for a in range(4)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tasks = own_task(tmp_path / "tasks_in", data)
    evals = {"benchmarks": [ABILITY, "mytask"], "include_path": [str(tasks)], "device": "cpu"}
    config = write_config(tmp_path, tiny_model_dir, evals=evals)
    main(["evaluate", str(config), "--benchmark", "mytask", "--original_only"])
    assert (tmp_path / "outputs" / "tiny" / "original" / "eval" / "mytask.json").is_file()
    assert not (tmp_path / "data").exists()


def disk_full(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_disk_full_leaves_nothing_partial(tmp_path, monkeypatch):
    import safetensors.torch
    import torch

    target = tmp_path / "out" / "result.json"
    write_json(target, {"old": 1})
    real_write_text = Path.write_text

    def half_then_full(self, text, *args, **kwargs):
        real_write_text(self, text[: len(text) // 2])
        disk_full()

    monkeypatch.setattr(Path, "write_text", half_then_full)
    with pytest.raises(BenchprofError, match=rf"^{target}: cannot write \(No space left on device\)"):
        write_json(target, {"new": 2})
    monkeypatch.undo()
    assert read_json(target) == {"old": 1} and temp_files(tmp_path) == []

    def partial_save(tensors, filename, metadata=None):
        Path(filename).write_bytes(b"\0" * 100)
        raise safetensors.SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(safetensors.torch, "save_file", partial_save)
    fresh = tmp_path / "out" / "mask.safetensors"
    with pytest.raises(BenchprofError, match=rf"^{fresh}: cannot write \(.*No space left on device"):
        save_tensors(fresh, {"a": torch.zeros(3)})
    assert not fresh.exists() and temp_files(tmp_path) == []


def test_disk_full_in_a_stage_then_rerun(reference, tiny_model_dir, tmp_path, monkeypatch):
    import safetensors.torch

    from benchprof.stages.extract import extract

    config = copy_project(reference[0], tmp_path, tiny_model_dir)
    masks = Layout(tmp_path / "outputs", "tiny").masks_dir(ABILITY, K)
    real_save = safetensors.torch.save_file
    calls = []

    def second_fails(tensors, filename, metadata=None):
        calls.append(filename)
        if len(calls) == 2:
            disk_full()
        real_save(tensors, filename, metadata=metadata)

    monkeypatch.setattr(safetensors.torch, "save_file", second_fails)
    with pytest.raises(BenchprofError, match="No space left on device"):
        extract(load_config(config), force=True)
    monkeypatch.undo()
    assert not (masks / "manifest.json").exists() and temp_files(tmp_path) == []
    extract(load_config(config))  # no manifest: the whole (ability, k) is redone
    for region in ("top", "bottom", "random"):
        name = f"{ABILITY}/masks/k0.05/{region}.safetensors"
        assert (masks / f"{region}.safetensors").read_bytes() == reference[1]["tensors"][name]


# ---- status ----------------------------------------------------------------------------------


def states(items) -> dict[tuple[str, str], str]:
    return {(i.stage, i.what): i.state for i in items}


def test_status_without_loading_weights(reference, tiny_model_dir, tmp_path, monkeypatch, capsys):
    import benchprof.core.modeling

    def no_load(*args, **kwargs):
        raise AssertionError("status loaded the model")

    monkeypatch.setattr(benchprof.core.modeling, "load_model", no_load)
    config = copy_project(reference[0], tmp_path, tiny_model_dir)
    items = plan_status(load_config(config))
    assert {i.state for i in items} == {"done"} and len(items) == 1 + 1 + 1 + 4 + 1, items
    main(["status", str(config)])
    assert capsys.readouterr().out.splitlines()[-1].startswith("status: 8 done, 0 stale, 0 pending")

    # a new k and a new data seed
    config = write_config(tmp_path, tiny_model_dir, settings__k_values=[K, 0.1], data__seed=2)
    got = states(plan_status(load_config(config)))
    assert got[("data", ABILITY)] == "stale"
    assert got[("importance", ABILITY)] == "stale" and got[("masks", f"{ABILITY} k0.05")] == "stale"
    assert got[("masks", f"{ABILITY} k0.1")] == "pending"
    assert got[("eval", f"original {ABILITY}")] == "stale"  # the benchmark is the ability's test split
    assert got[("eval", f"{ABILITY}/k0.05/top {ABILITY}")] == "stale"
    assert got[("eval", f"{ABILITY}/k0.1/top {ABILITY}")] == "pending"
    assert got[("profile", "ais")] == "stale"
    main(["status", str(config)])  # nothing done at the new inputs: no pace to say the time left by, and no line
    out = capsys.readouterr().out.splitlines()
    assert " done, " in out[-1] and not any(" job(s) left" in x for x in out), out

    # only a new k: what exists stays done
    config = write_config(tmp_path, tiny_model_dir, settings__k_values=[K, 0.1])
    got = states(plan_status(load_config(config)))
    assert got[("importance", ABILITY)] == got[("masks", f"{ABILITY} k0.05")] == "done"
    assert got[("eval", f"{ABILITY}/k0.05/random {ABILITY}")] == "done"
    assert got[("eval", f"{ABILITY}/k0.1/random {ABILITY}")] == "pending"
    # the time left: the 3 pending jobs at the median wall time of the benchmark's 4 done ones
    layout = Layout(tmp_path / "outputs", "tiny")
    done = [Variant(), *(Variant(ABILITY, K, r) for r in ("top", "bottom", "random"))]
    walls = [json.loads(layout.eval_file(v, ABILITY).read_text())["wall_seconds"] for v in done]
    main(["status", str(config)])
    expected = f"status: tiny: 3 evaluation job(s) left, about {3 * statistics.median(walls):.0f} s of job time"
    assert any(line.startswith(expected) for line in capsys.readouterr().out.splitlines()), expected
    for variant, edited in zip(done[:2], ("NaN", "-1000"), strict=True):  # times edited in two done results
        path = layout.eval_file(variant, ABILITY)
        path.write_text(
            path.read_text().replace(
                f'"wall_seconds": {json.dumps(walls[done.index(variant)])}', f'"wall_seconds": {edited}'
            )
        )
        assert edited in path.read_text()
    main(["status", str(config)])
    expected = f"status: tiny: 3 evaluation job(s) left, about {3 * statistics.median(walls[2:]):.0f} s of job time"
    assert any(line.startswith(expected) for line in capsys.readouterr().out.splitlines()), expected

    # an interrupted extract: files without a manifest are pending, and so is what follows
    config = write_config(tmp_path, tiny_model_dir)
    layout = Layout(tmp_path / "outputs", "tiny")
    (layout.masks_dir(ABILITY, K) / "manifest.json").unlink()
    items = {(i.stage, i.what): i for i in plan_status(load_config(config))}
    assert items[("masks", f"{ABILITY} k0.05")].state == "pending"
    assert "interrupted" in items[("masks", f"{ABILITY} k0.05")].why
    assert items[("eval", f"{ABILITY}/k0.05/top {ABILITY}")].state == "stale"
    assert items[("eval", f"original {ABILITY}")].state == "done"
    assert items[("profile", "ais")].state == "stale"
    assert layout.eval_file(Variant(ABILITY, K, "top"), ABILITY).is_file()


def test_status_says_the_dtype_scored_and_another_dtype_is_not_done(reference, tiny_model_dir, tmp_path, capsys):
    """float32 and bfloat16 results never mix (issue 66): the dtype is an input of every evaluation, so another
    evals.dtype makes each evaluation and the profile stale and leaves importance and regions done; status says
    which dtype scores."""
    config = copy_project(reference[0], tmp_path, tiny_model_dir)
    main(["status", str(config)])
    out = capsys.readouterr().out.splitlines()
    assert "status: tiny: evaluations scored in float32 (models[0].dtype)" in out
    assert out[-1].startswith("status: 8 done, 0 stale, 0 pending")
    config = write_config(tmp_path, tiny_model_dir, evals={"benchmarks": [ABILITY], "limit": 12, "dtype": "bfloat16"})
    items = {(i.stage, i.what): i for i in plan_status(load_config(config))}
    evals = [i for (stage, _), i in items.items() if stage == "eval"]
    assert len(evals) == 4 and all(i.state == "stale" and i.why == "changed: dtype" for i in evals), evals
    assert items[("profile", "ais")].state == "stale"
    assert items[("importance", ABILITY)].state == items[("masks", f"{ABILITY} k0.05")].state == "done"
    main(["status", str(config)])
    assert "status: tiny: evaluations scored in bfloat16 (evals.dtype)" in capsys.readouterr().out.splitlines()


def test_status_writes_nothing(reference, tiny_model_dir, tmp_path):
    """status only reads: not even the model's hash cache (model_files.json), which evaluate keeps."""
    config = copy_project(reference[0], tmp_path, tiny_model_dir)
    (tmp_path / "outputs" / "tiny" / "model_files.json").unlink(missing_ok=True)

    def tree() -> dict[str, int]:
        return {str(p.relative_to(tmp_path)): p.stat().st_mtime_ns for p in sorted(tmp_path.rglob("*"))}

    before = tree()
    main(["status", str(config)])
    assert tree() == before
