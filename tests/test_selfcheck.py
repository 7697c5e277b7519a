"""benchprof.lab.selfcheck (scripts/gpu_check.sh): its comparison fed a CPU run as if it were the GPU's.

A reduced demo config (two abilities, one k, 10 test items) runs twice on the CPU through the same
function the GPU check uses (`run_pipeline`, a fresh `benchprof run` each): the first run is written
as the reference, the second is compared with it as the GPU run would be. The CPU is deterministic,
so every check must pass with Jaccard exactly 1 and AIS differences exactly 0; then the second run's
summary is damaged in the ways a broken GPU path would damage it, and the matching check must fail.
"""

import copy
import json
import subprocess
from pathlib import Path

import pytest
import torch
import yaml
from test_golden import reduced_demo

from benchprof.core.layout import format_k
from benchprof.core.loader import load_config
from benchprof.lab.selfcheck import TOLERANCES, compare, main, run_pipeline, table, timings
from benchprof.lab.selfcheck_reference import (
    DEMO_CONFIG,
    REFERENCE,
    jaccard,
    reference_inputs,
    sampled,
    stale_inputs,
    summarize,
    write_reference,
)

ROOT = Path(__file__).resolve().parents[1]
ABILITIES = ["Quantitative_Reasoning", "Commonsense_Causal"]


def small_demo(folder: Path) -> Path:
    config = reduced_demo(folder)
    raw = yaml.safe_load(config.read_text())
    raw["data"].update(train_size=32, test_size=10)
    raw["settings"]["k_values"] = [0.03]
    raw["extract"]["regions"] = ["top", "random"]
    raw["evals"].update(benchmarks=ABILITIES, num_fewshot=[0, 0], composites={})
    raw["aggregate"]["bootstrap"] = 100
    config.write_text(yaml.safe_dump(raw))
    return config


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("selfcheck")
    config = small_demo(tmp)
    reference_config, _ = run_pipeline(config, tmp / "reference", "float32", "cpu")
    reference = write_reference(reference_config, tmp / "reference.json")
    run_config, seconds = run_pipeline(config, tmp / "gpu", "float32", "cpu")
    assert seconds > 0
    return json.loads((tmp / "reference.json").read_text()), summarize(load_config(run_config)), reference, run_config


@pytest.mark.slow  # two `benchprof run`s of a reduced demo: 40-90 s on 2 shared cores
def test_a_cpu_run_as_the_gpu_run_passes_every_check_exactly(runs):
    reference, run, written, _ = runs
    assert reference == written  # the JSON round trip keeps everything
    assert sorted(reference["regions"]) == [f"{a}/k0.03/top" for a in sorted(ABILITIES)]
    assert len(reference["ais"]) == 2 * 2 * 2  # abilities x benchmarks x {top, random} at one k
    # a 1/64 sample of n = floor(0.03 * 3,420,416) = 102,612 positions
    sizes = [sum(map(len, region.values())) for region in reference["regions"].values()]
    assert all(102_612 / 64 * 0.85 < size < 102_612 / 64 * 1.15 for size in sizes)
    checks = compare(reference, run, "float32", TOLERANCES["float32"])
    assert [c.ok for c in checks] == [True] * 5, table(checks)
    values = {c.name: c.value for c in checks}
    assert values["top regions: min sampled Jaccard"] == 1.0
    assert values["original scores: max |diff|"] == 0.0 and values["AIS rows: max |diff|"] == 0.0


@pytest.mark.slow  # two `benchprof run`s of a reduced demo: 40-90 s on 2 shared cores
def test_damaged_runs_fail_the_matching_check(runs):
    reference, run, _, _ = runs
    tolerance = TOLERANCES["bfloat16"]  # the loosest: each damage below must still be caught

    def failing(changed: dict) -> set[str]:
        return {c.name for c in compare(reference, changed, "bfloat16", tolerance) if not c.ok}

    swapped = copy.deepcopy(run)  # each ability's top region replaced by the other's
    keys = sorted(swapped["regions"])
    swapped["regions"] = dict(zip(keys, [swapped["regions"][k] for k in reversed(keys)]))
    assert jaccard(swapped["regions"][keys[0]], reference["regions"][keys[0]]) < 0.5
    assert failing(swapped) == {"top regions: min sampled Jaccard"}

    thinned = copy.deepcopy(run)  # a region that lost a fifth of its weights
    for name, positions in thinned["regions"][keys[0]].items():
        thinned["regions"][keys[0]][name] = positions[: len(positions) * 4 // 5]
    assert failing(thinned) == {"top regions: min sampled Jaccard"}

    missing = copy.deepcopy(run)
    del missing["regions"][keys[1]]
    assert failing(missing) == {"top regions: min sampled Jaccard"}

    shifted = copy.deepcopy(run)  # one AIS row off by more than the per-row tolerance
    row = sorted(shifted["ais"])[0]
    shifted["ais"][row] += 0.3
    assert failing(shifted) == {"AIS rows: max |diff|"}  # 0.3 over 8 rows keeps the mean under 0.05

    dropped = copy.deepcopy(run)
    del dropped["ais"][row]
    assert "AIS rows: max |diff|" in failing(dropped)

    rescored = copy.deepcopy(run)
    benchmark = sorted(rescored["original"])[0]
    rescored["original"][benchmark] -= 0.1
    assert failing(rescored) == {"original scores: max |diff|"}


@pytest.mark.slow  # two `benchprof run`s of a reduced demo: 40-90 s on 2 shared cores
def test_timings_run_on_the_cpu_run(runs):
    """The timing half of the check runs wherever the comparison does and measures each figure; how fast is
    not asserted here (timings on a shared CPU are noise: the self-check reports them, docs/research/performance.md)."""
    checks = {c.name: c for c in timings(load_config(runs[3]), "float32", "cpu", repeats=1)}
    for name in ("importance tokens/s", "plain fwd+bwd tokens/s", "variant in place (s)", "variant by reload (s)"):
        assert checks[name].value > 0, checks[name]
    assert checks["importance / plain time"].value == pytest.approx(
        checks["plain fwd+bwd tokens/s"].value / checks["importance tokens/s"].value, rel=0.05
    )


def test_known_answer_sign_flip_is_caught():
    reference = {
        "regions": {"A/k0.03/top": {"t": [1, 5, 9]}},
        "original": {"A": 0.5},
        "ais": {"A|A|0.03|top": 0.4, "A|A|0.03|random": 0.0},
    }
    same = copy.deepcopy(reference)
    assert all(c.ok for c in compare(reference, same, "float32", TOLERANCES["float32"]))
    flipped = copy.deepcopy(reference)
    flipped["ais"]["A|A|0.03|top"] = -0.01  # 0.41 off, and the sign flipped
    failed = {c.name for c in compare(reference, flipped, "float32", TOLERANCES["float32"]) if not c.ok}
    assert "known answer: same sign as CPU" in failed


def test_sample_is_one_in_64_and_stable():
    positions = torch.arange(0, 640_000)
    first = sampled("model.layers.0.mlp.up_proj.weight", positions.numpy())
    assert 9_000 < len(first) < 11_000 and first == sorted(first)
    assert first == sampled("model.layers.0.mlp.up_proj.weight", positions.numpy())
    other = sampled("model.layers.1.mlp.up_proj.weight", positions.numpy())
    assert len(set(first) & set(other)) < len(first) // 10  # another tensor samples other positions


def test_shipped_reference_is_the_demo_config_on_cpu():
    reference = json.loads(REFERENCE.read_text())
    cfg = load_config(DEMO_CONFIG)
    assert reference["dtype"] == "float32" and reference["device"] == "cpu"
    ks = [format_k(k) for k in cfg.settings.k_values]
    assert sorted(reference["regions"]) == sorted(f"{a}/k{k}/top" for a in cfg.abilities() for k in ks)
    assert sorted(reference["original"]) == sorted(cfg.evals.benchmarks)
    assert len(reference["ais"]) == len(cfg.abilities()) * len(cfg.evals.benchmarks) * len(ks) * 2


@pytest.mark.skipif(torch.cuda.is_available(), reason="the machine has CUDA")
def test_gpu_check_without_cuda_exits_with_one_line():
    done = subprocess.run([str(ROOT / "scripts" / "gpu_check.sh")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("gpu_check: no CUDA device visible")
    assert done.stdout == ""


def test_importance_difference_is_the_largest_relative_gap(tmp_path):
    """The 2-GPU strategies are judged by max |a - b| / max |b| per tensor, the worst tensor counting."""
    from benchprof.core.storage import save_tensors
    from benchprof.lab.selfcheck import importance_difference, vllm_checks

    one = {"a": torch.tensor([1.0, 2.0, 4.0]), "b": torch.tensor([10.0, 0.0])}
    other = {"a": torch.tensor([1.0, 2.0, 4.0004]), "b": torch.tensor([10.0, 0.002])}
    save_tensors(tmp_path / "one.safetensors", one, {})
    save_tensors(tmp_path / "other.safetensors", other, {})
    gap = importance_difference(tmp_path / "one.safetensors", tmp_path / "other.safetensors")
    assert gap == pytest.approx(max(0.0004 / 4.0004, 0.002 / 10.0), rel=1e-5)
    save_tensors(tmp_path / "fewer.safetensors", {"a": one["a"]}, {})
    assert importance_difference(tmp_path / "fewer.safetensors", tmp_path / "one.safetensors") == float("inf")
    [skipped] = vllm_checks(tmp_path / "unused.yml", tmp_path)  # vllm is not installed here
    assert skipped.value == "skipped" and skipped.ok


def test_the_shipped_reference_is_from_the_demo_config_as_it_is(tmp_path, capsys):
    """gpu_check compares a GPU run of configs/demo.yml with the shipped CPU reference: one written from other
    items, loss or k would fail on a sound GPU. A change to demo.yml must come with a new reference."""
    reference = json.loads(REFERENCE.read_text())
    assert stale_inputs(reference, DEMO_CONFIG) == []
    assert reference["inputs"] == reference_inputs(DEMO_CONFIG)
    changed = yaml.safe_load(DEMO_CONFIG.read_text())
    changed["finetune"]["loss_on"] = "all"
    (tmp_path / "demo.yml").write_text(yaml.safe_dump(changed))
    assert stale_inputs(reference, tmp_path / "demo.yml") == ["finetune"]
    assert main(["--config", str(tmp_path / "demo.yml"), "--json", str(tmp_path / "out.json")]) == 2
    assert "was written from another demo.yml (finetune changed)" in capsys.readouterr().err  # before any GPU work
