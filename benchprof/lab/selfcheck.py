"""The GPU self-check (`scripts/gpu_check.sh`): the demo pipeline on CUDA against a CPU reference.

On a GPU node, offline, in a few minutes: `benchprof run` of configs/demo.yml (outputs in a temporary
folder) on cuda:0, once in float32 and once in bfloat16, each compared with the same config run on a
CPU in float32, as recorded in benchprof/assets/selfcheck_reference.json:
- regions: Jaccard of every (ability, k) top region with the CPU's, over a fixed 1/64 sample of the
  positions (a hash of tensor and index, so the reference stays small; the sampled Jaccard's standard
  error is about sqrt(J(1-J)/m), m the sampled union: ~540 positions at k = 0.01, ~1,600 at k = 0.03);
- scores: the original model's score on each benchmark, and the AIS of every top and random row of
  the headline metric (profile/ais.json); the known answer (each ability's top region on its own
  benchmark) must keep the CPU's sign wherever the CPU's AIS is clear of the tolerance.
Tolerances (TOLERANCES), measured on the CPU against this reference before they were set: the
demo rerun in float32 with other batch sizes (train 8, eval 16: another summation order) gave
Jaccard 1.0 and AIS differences of exactly 0; the demo in bfloat16 gave sampled Jaccard 0.954-0.981
(exact 0.968-0.981), original scores within 0.02, AIS rows within 0.142 (mean 0.020; one flipped item
moves an AIS by 0.01 / original score, 0.023 on a benchmark at 0.44). The bf16 limits are about
twice those; the fp32 limits let the rounding of another device's kernels (torch keeps TF32 off
for fp32 matmuls by default) flip about two items of 100.
It also times the importance pass against a plain forward + backward of the same batches, and one
variant zeroed and restored in place against reloading the model; with vLLM installed, evaluates one
region through the vllm backend (damage --save, then vLLM) against hf's AIS; with 2+ GPUs, runs the
importance pass of ddp, fsdp and deepspeed on 2 GPUs against the 1-GPU files. Prints one table,
writes it as JSON.

    scripts/gpu_check.sh [--json gpu_check.json] [--workdir DIR] [--dtypes float32,bfloat16]
    python -m benchprof.lab.selfcheck --write-reference   # after `benchprof run configs/demo.yml` on a CPU
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchprof.core.layout import Layout, format_k
from benchprof.lab.selfcheck_reference import (
    DEMO_CONFIG,
    REFERENCE,
    jaccard,
    stale_inputs,
    summarize,
    write_reference,
)

if TYPE_CHECKING:
    from benchprof.core.config import Config


@dataclass(frozen=True)
class Tolerance:
    jaccard: float  # every top region's sampled Jaccard with the CPU's at least this
    original: float  # |score - CPU score| of the original model, per benchmark (100 items: 0.01 per item)
    ais: float  # |AIS - CPU AIS| per row
    ais_mean: float  # mean |AIS - CPU AIS| over the rows


TOLERANCES = {
    "float32": Tolerance(jaccard=0.97, original=0.02, ais=0.05, ais_mean=0.01),
    "bfloat16": Tolerance(jaccard=0.90, original=0.05, ais=0.25, ais_mean=0.05),
}


@dataclass
class Check:
    run: str  # float32, bfloat16, timing
    name: str
    value: float | str
    limit: str
    ok: bool
    detail: str = ""


def compare(reference: dict[str, Any], run: dict[str, Any], label: str, tolerance: Tolerance) -> list[Check]:
    """The checks of one run's summary against the CPU reference's (both from `summarize`)."""
    checks = []
    missing = sorted(set(reference["regions"]) - set(run["regions"]))
    similarity = {
        key: jaccard(run["regions"][key], ref) for key, ref in reference["regions"].items() if key in run["regions"]
    }
    worst = min(similarity, key=similarity.__getitem__) if similarity else "none"
    checks.append(
        Check(
            label,
            "top regions: min sampled Jaccard",
            round(similarity[worst], 4) if similarity else "n/a",
            f">= {tolerance.jaccard}",
            not missing and bool(similarity) and similarity[worst] >= tolerance.jaccard,
            f"worst {worst}, mean {statistics.fmean(similarity.values()):.4f} over {len(similarity)}"
            + (f"; missing {missing}" if missing else "")
            if similarity
            else f"missing {missing}",
        )
    )
    original = {b: abs(run["original"].get(b, math.nan) - s) for b, s in reference["original"].items()}
    worst_benchmark = max(original, key=lambda b: math.inf if math.isnan(original[b]) else original[b])
    worst_gap = original[worst_benchmark]
    checks.append(
        Check(
            label,
            "original scores: max |diff|",
            round(worst_gap, 4),
            f"<= {tolerance.original}",
            worst_gap <= tolerance.original,  # NaN (a missing benchmark) fails
            f"worst {worst_benchmark}",
        )
    )
    gaps = {key: abs(run["ais"].get(key, math.nan) - value) for key, value in reference["ais"].items()}
    missing_rows = sorted(key for key, gap in gaps.items() if math.isnan(gap))
    present = {key: gap for key, gap in gaps.items() if not math.isnan(gap)}
    worst_row = max(present, key=present.__getitem__) if present else "none"
    worst_ais = present.get(worst_row, math.nan)
    mean_gap = statistics.fmean(present.values()) if present else math.nan
    checks.append(
        Check(
            label,
            "AIS rows: max |diff|",
            round(worst_ais, 4),
            f"<= {tolerance.ais}",
            not missing_rows and worst_ais <= tolerance.ais,
            f"worst {worst_row} of {len(gaps)} rows" + (f"; {len(missing_rows)} missing" if missing_rows else ""),
        )
    )
    checks.append(
        Check(
            label,
            "AIS rows: mean |diff|",
            round(mean_gap, 4),
            f"<= {tolerance.ais_mean}",
            mean_gap <= tolerance.ais_mean,
        )
    )
    known = [key for key in reference["ais"] if key.split("|")[0] == key.split("|")[1] and key.endswith("|top")]
    clear = [key for key in known if abs(reference["ais"][key]) > tolerance.ais]
    flipped = [key for key in clear if key not in run["ais"] or (run["ais"][key] > 0) != (reference["ais"][key] > 0)]
    checks.append(
        Check(
            label,
            "known answer: same sign as CPU",
            f"{len(clear) - len(flipped)}/{len(clear)}",
            "all",
            not flipped,
            f"{len(known) - len(clear)} rows within the tolerance of 0 not judged"
            + (f"; flipped {flipped}" if flipped else ""),
        )
    )
    return checks


def run_config(config: Path, workdir: Path, dtype: str, device: str) -> Path:
    """`config` rewritten for one run under `workdir` (outputs, generated data), `dtype` everywhere, on `device`."""
    import yaml

    raw = yaml.safe_load(Path(config).read_text())
    base = Path(config).resolve().parent

    def absolute(value: str) -> str:  # a path relative to the original config, if one exists there
        candidate = base / Path(value).expanduser()
        return str(candidate.resolve()) if candidate.exists() else value

    folder = workdir / dtype
    folder.mkdir(parents=True, exist_ok=True)
    raw["settings"]["output_dir"] = str(folder / "outputs")
    raw["settings"]["cuda_visible_devices"] = "0" if device == "cuda" else ""
    for model in raw["models"]:
        model.update(name=absolute(model["name"]), dtype=dtype)
        if model.get("tokenizer"):
            model["tokenizer"] = absolute(model["tokenizer"])
    for dataset in raw.get("datasets", []):
        if dataset.get("path"):
            dataset["path"] = absolute(dataset["path"])
    raw.setdefault("data", {})["dir"] = str(workdir / "data")  # generated once, shared by the runs
    raw.setdefault("finetune", {})["dtype"] = dtype
    raw.setdefault("evals", {}).update(device=device, dtype=dtype)
    path = folder / "config.yml"
    path.write_text(yaml.safe_dump(raw))
    return path


def run_pipeline(config: Path, workdir: Path, dtype: str, device: str) -> tuple[Path, float]:
    """`benchprof run` of the rewritten config in a fresh process; (its config, wall seconds)."""
    from benchprof import BenchprofError

    path = run_config(config, workdir, dtype, device)
    log = path.with_name("run.log")
    started = time.time()
    with open(log, "w") as out:
        done = subprocess.run(
            [sys.executable, "-m", "benchprof", "run", str(path)], stdout=out, stderr=subprocess.STDOUT
        )
    if done.returncode != 0:
        tail = log.read_text().strip().splitlines()[-1:] or ["(no output)"]
        raise BenchprofError(
            f"gpu_check: benchprof run in {dtype} failed (exit {done.returncode}): {tail[0]}; log {log}"
        )
    return path, time.time() - started


def timed(step: Callable[[], None], device: str, repeats: int = 3) -> float:
    """Median seconds of `step()` after one warm-up, synchronising the GPU around each."""
    import torch

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    step()
    times = []
    for _ in range(repeats):
        sync()
        started = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def timings(cfg: Config, dtype: str, device: str, repeats: int = 3) -> list[Check]:
    """Importance pass against a plain forward + backward (tokens/s), and one variant in place against a reload."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the loads below are timed outside any stage: no "Loading weights" bars
    try:
        return _timings(cfg, dtype, device, repeats)
    finally:
        hf_logging.enable_progress_bar()


def _timings(cfg: Config, dtype: str, device: str, repeats: int) -> list[Check]:
    import functools

    from benchprof.core.modeling import eligible_names, load_model, num_layers
    from benchprof.stages.damage import ablated, eval_dtype, load_region
    from benchprof.stages.data import load_split
    from benchprof.stages.finetune import batch_loss, encode_batches, importance_score
    from benchprof.stages.sharding import accumulate_gradients

    spec = cfg.models[0]
    ability = cfg.abilities()[0]
    model, tokenizer = load_model(*cfg.model_source(spec), dtype=dtype, device=device)
    records = load_split(cfg, ability, "train")[: cfg.finetune.max_samples]
    batches, n_tokens = encode_batches(
        tokenizer, records, cfg.dataset(ability).keys(), cfg.finetune.max_length, cfg.settings.train_batch_size, "all"
    )
    batches = [{key: value.to(device) for key, value in batch.items()} for batch in batches]
    tokens = sum(int(b["attention_mask"].sum()) for b in batches)
    loss = functools.partial(batch_loss, n_loss_tokens=n_tokens)
    eligible = eligible_names([n for n, _ in model.named_parameters()], cfg.finetune.scope, num_layers(model))

    def plain() -> None:
        for p in model.parameters():
            p.requires_grad_(True)
            p.grad = None
        for batch in batches:
            loss(model, batch).backward()

    def importance() -> None:
        params = dict(model.named_parameters())
        sums = accumulate_gradients(model, batches, loss, eligible)
        for name in eligible:
            importance_score(sums.pop(name), params[name].detach().float())

    plain_s, importance_s = timed(plain, device, repeats), timed(importance, device, repeats)
    for p in model.parameters():
        p.grad = None
    layout = Layout(cfg.output_root, spec.tag)
    region = load_region(model, layout.mask_file(ability, max(cfg.settings.k_values), "top"))

    def in_place() -> None:
        with ablated(model, region):
            pass

    def reload() -> None:
        load_model(*cfg.model_source(spec), dtype=eval_dtype(cfg, spec), device=device)

    in_place_s, reload_s = timed(in_place, device, repeats), timed(reload, device, repeats)
    ratio = importance_s / plain_s
    return [
        Check(
            dtype, "importance tokens/s", round(tokens / importance_s), "", True, f"{ability}, {len(batches)} batches"
        ),
        Check(dtype, "plain fwd+bwd tokens/s", round(tokens / plain_s), "", True, "every parameter trainable"),
        Check(dtype, "importance / plain time", round(ratio, 3), "<= 1.5", ratio <= 1.5, "hooks + fp32 sums + |θ·Σg|"),
        Check(dtype, "variant in place (s)", round(in_place_s, 5), "", True, "zero + restore the largest top region"),
        Check(dtype, "variant by reload (s)", round(reload_s, 4), "", True, "load_model to the device"),
    ]


def variant_config(base: Path, folder: Path, **sections: dict[str, Any]) -> Path:
    """The config of a finished run (`base`) rewritten to write under `folder`, with some sections updated."""
    import yaml

    raw = yaml.safe_load(base.read_text())
    folder.mkdir(parents=True, exist_ok=True)
    raw["settings"]["output_dir"] = str(folder / "outputs")
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    path = folder / "config.yml"
    path.write_text(yaml.safe_dump(raw))
    return path


def importance_difference(one: Path, other: Path) -> float:
    """max over tensors of max |a − b| / max |b| between two importance files (`b`: `other`)."""
    from benchprof.core.storage import read_tensors

    a, _ = read_tensors(one, "importance")
    b, _ = read_tensors(other, "importance")
    if set(a) != set(b):
        return math.inf
    return max(float((a[n] - b[n]).abs().max()) / max(float(b[n].abs().max()), 1e-30) for n in b)


def strategy_checks(float32_run: Path, workdir: Path) -> list[Check]:
    """With 2+ GPUs: the importance pass of ddp, fsdp and deepspeed on 2 GPUs (torchrun, NCCL) against the
    1-GPU float32 run's importance files; equal up to the order of the sums (limit 1e-4 of each tensor's max).

    Written for a GPU node and not yet run on one (no GPU was lent while it was written); the same
    comparison of 2 processes with 1 runs on CPU with gloo in tests/test_sharding_multi.py.
    """
    from benchprof import BenchprofError
    from benchprof.core.loader import load_config
    from benchprof.stages.sharding import launch

    base = load_config(float32_run)
    checks = []
    for strategy in ("ddp", "fsdp", "deepspeed"):
        label = f"2 GPUs {strategy}"
        config = variant_config(
            float32_run,
            workdir / f"gpus2-{strategy}",
            settings={"cuda_visible_devices": "0,1"},
            finetune={"strategy": strategy, "processes": 2},
        )
        try:
            launch(config, 2, ["0", "1"], ["--force"])
        except BenchprofError as err:
            checks.append(Check(label, "importance", "failed", "exit 0", False, str(err)))
            continue
        cfg = load_config(config)
        for spec in cfg.models:
            for ability in cfg.abilities():
                two = Layout(cfg.output_root, spec.tag).importance_file(ability)
                one = Layout(base.output_root, spec.tag).importance_file(ability)
                difference = importance_difference(two, one)
                checks.append(
                    Check(
                        label, f"importance {ability}", f"{difference:.2e}", "<= 1e-4", difference <= 1e-4, "vs 1 GPU"
                    )
                )
    return checks


def vllm_checks(float32_run: Path, workdir: Path) -> list[Check]:
    """When vLLM is installed: the first ability's top region at the largest k, evaluated with backend vllm
    (damage --save, then vLLM on the saved checkpoint) on that ability's own benchmark, against the hf
    backend's AIS of the float32 run (limit 0.05: the two backends batch and round differently).

    Written for a GPU node and not yet run on one (no GPU was lent while it was written).
    """
    import importlib.util
    import shutil

    from benchprof import BenchprofError
    from benchprof.core.layout import Variant
    from benchprof.core.loader import load_config
    from benchprof.core.results import primary_metric, read_results

    if importlib.util.find_spec("vllm") is None:
        return [Check("vllm", "round trip", "skipped", "", True, "vllm is not installed")]
    base = load_config(float32_run)
    ability, k = base.abilities()[0], max(base.settings.k_values)
    config = variant_config(float32_run, workdir / "vllm", evals={"backend": "vllm"})
    cfg = load_config(config)
    spec = cfg.models[0]
    source, target = Layout(base.output_root, spec.tag), Layout(cfg.output_root, spec.tag)
    shutil.copytree(source.masks_dir(ability, k), target.masks_dir(ability, k))  # the same region
    command = [sys.executable, "-m", "benchprof", "evaluate", str(config), "--ability", ability, "--k", str(k)]
    command += ["--region", "top", "--benchmark", ability]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return [Check("vllm", "round trip", "failed", "exit 0", False, tail)]

    def ais(layout: Layout) -> float:
        _, original = read_results(layout.eval_file(Variant(), ability))
        _, ablated = read_results(layout.eval_file(Variant(ability, k, "top"), ability))
        metric = primary_metric(original)
        if metric is None or not original[metric]:
            raise BenchprofError(f"gpu_check: no usable metric in {layout.eval_file(Variant(), ability)}")
        return float((original[metric] - ablated[metric]) / original[metric])

    difference = abs(ais(target) - ais(source))
    detail = f"{ability} k={format_k(k)} top on its own split"
    return [Check("vllm", "AIS vllm − hf", round(difference, 4), "<= 0.05", difference <= 0.05, detail)]


def table(checks: list[Check]) -> str:
    rows = [["run", "check", "value", "limit", "ok", "detail"]]
    rows += [[c.run, c.name, str(c.value), c.limit, "ok" if c.ok else "FAIL", c.detail] for c in checks]
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[5] for row in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu_check.sh", description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=Path("gpu_check.json"), help="where the table is written as JSON")
    parser.add_argument("--workdir", type=Path, help="outputs of the runs (default: a temporary folder, removed)")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--config", type=Path, default=DEMO_CONFIG)
    parser.add_argument("--reference", type=Path, default=REFERENCE)
    parser.add_argument("--write-reference", action="store_true", help="write the reference from a CPU run of --config")
    args = parser.parse_args(argv)
    if args.write_reference:
        write_reference(args.config, args.reference)
        print(f"gpu_check: wrote {args.reference}")
        return 0
    reference = json.loads(args.reference.read_text())
    if stale := stale_inputs(reference, args.config):
        print(
            f"gpu_check: {args.reference} was written from another {args.config.name} ({', '.join(stale)} changed); "
            "write it again on a CPU: benchprof run, then --write-reference",
            file=sys.stderr,
        )
        return 2
    import torch

    if not torch.cuda.is_available():
        print(
            f"gpu_check: no CUDA device visible (torch {torch.__version__}, "
            f"CUDA build {torch.version.cuda or 'none'}); run this on a GPU node",
            file=sys.stderr,
        )
        return 2
    from benchprof import BenchprofError
    from benchprof.core.loader import load_config

    checks: list[Check] = []
    with tempfile.TemporaryDirectory(prefix="gpu_check.") as scratch:
        workdir = args.workdir or Path(scratch)
        float32_run = None
        for dtype in args.dtypes.split(","):
            try:
                config, seconds = run_pipeline(args.config, workdir, dtype, "cuda")
            except BenchprofError as err:
                checks.append(Check(dtype, "benchprof run", "failed", "exit 0", False, str(err)))
                continue
            checks.append(
                Check(dtype, "benchprof run wall s", round(seconds, 1), "", True, torch.cuda.get_device_name(0))
            )
            cfg = load_config(config)
            checks += compare(reference, summarize(cfg), dtype, TOLERANCES[dtype])
            checks += timings(cfg, dtype, "cuda")
            float32_run = config if dtype == "float32" else float32_run
        if float32_run is not None:
            checks += vllm_checks(float32_run, workdir)
            if torch.cuda.device_count() >= 2:
                checks += strategy_checks(float32_run, workdir)
    print(table(checks))
    payload = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "tolerances": {k: asdict(v) for k, v in TOLERANCES.items()},
        "checks": [asdict(c) for c in checks],
    }
    args.json.write_text(json.dumps(payload, indent=1) + "\n")
    failed = sum(not c.ok for c in checks)
    print(f"gpu_check: {len(checks) - failed} ok, {failed} failed; table written to {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
