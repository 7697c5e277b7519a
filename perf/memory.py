"""Peak memory (RSS) and wall time of importance, extract, damage and evaluate as the model grows.

For each size, a randomly initialised Llama (benchprof.lab.tinymodel, vocabulary 1,000, so nearly every
parameter sits in the decoder layers, MLP share 2/3 as in Llama-3) is saved in fp32, and each stage
runs in a fresh process of its own on the CPU:

  importance  benchprof finetune: 8 items of <= 64 tokens in batches of 4 (mlp scope, fp32)
  extract     benchprof extract: top, bottom and random regions at k = 0.01
  damage      load the model, then for each region: read it, zero it in place, restore it
              (what evaluate does per variant; `benchprof damage` without --save does less)
  evaluate    benchprof evaluate: the original and the top region, one local benchmark, 8 documents

Each process records its resident set after its imports (baseline), then resets and reads its peak
(VmHWM) around the stage; a stage's own memory is peak - baseline, reported per parameter. For
damage the peak after the model is loaded is recorded apart (the regions' own memory). RSS counts file pages a process
maps and touches (safetensors reads by mmap), so reading a file counts as much as copying it.

    .venv/bin/python perf/memory.py [--sizes 20M,80M,300M] [--threads 2] [--json out.json]
    .venv/bin/python perf/memory.py --model real/SmolLM2-135M-Instruct   # a real model folder instead
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

for _key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_EVALUATE_OFFLINE"):
    os.environ.setdefault(_key, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# (hidden, intermediate, layers): about the named number of parameters with a 1,000-token vocabulary
SIZES = {
    "20M": (512, 1376, 6),
    "80M": (768, 2048, 11),
    "300M": (1024, 2816, 24),
    "800M": (1536, 4096, 27),
}
STAGES = ("importance", "extract", "damage", "evaluate")
ABILITY = "Spatial_Reasoning"


def device() -> str:
    """cuda when a GPU is visible (the figures are then the GPU's), else cpu."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def status_kib(field: str) -> int:
    """VmRSS (resident now) or VmHWM (peak since start or the last reset) of this process, KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


class AnonymousPeak:
    """The peak of RssAnon (heap and tensors, not file pages) sampled every 5 ms in a thread."""

    def __init__(self) -> None:
        import threading

        self.peak = status_kib("RssAnon")
        self.running = True
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()

    def sample(self) -> None:
        while self.running:
            self.peak = max(self.peak, status_kib("RssAnon"))
            time.sleep(0.005)

    def stop(self) -> int:
        self.running = False
        self.thread.join()
        return max(self.peak, status_kib("RssAnon"))


def reset_peak() -> None:
    """Start VmHWM over from the current RSS (Linux >= 4.0), so a peak belongs to what follows."""
    Path("/proc/self/clear_refs").write_text("5")


def write_project(folder: Path, model_dir: Path) -> Path:
    """A config over the model and a local spatial dataset (train 8, test 8)."""
    import yaml

    where = ["left", "right", "above", "below"]
    things = ["cup", "box", "lamp", "book", "chair", "desk", "plant", "clock"]
    data = folder / "spatial"
    data.mkdir(parents=True, exist_ok=True)
    for split in ("train", "test"):
        rows = []
        for i in range(8):
            a, b = things[i % 8], things[(i + 3) % 8]
            label = i % 4
            rows.append(
                {
                    "id": f"{split}-{i}",
                    "ability": ABILITY,
                    "question_type": "spatial_relation",
                    "context": f"The {a} is {where[label]} of the {b}." + " The room is quiet." * (i % 3),
                    "question": f"Where is the {a}?",
                    "options": where,
                    "answer": where[label],
                    "label": label,
                }
            )
        (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = folder / "config.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "settings": {"k_values": [0.01], "train_batch_size": 4, "eval_batch_size": 8, "output_dir": "outputs"},
                "models": [{"name": str(model_dir), "tag": "m", "dtype": "float32"}],
                "datasets": [{"name": ABILITY, "path": str(data)}],
                "finetune": {"max_samples": 8, "max_length": 64, "dtype": "float32"},
                "extract": {"regions": ["top", "bottom", "random"]},
                "evals": {"benchmarks": [ABILITY], "num_fewshot": [0], "limit": 8, "device": device()},
            }
        )
    )
    return config


def run_stage(stage: str, config: Path) -> dict:
    """One stage in this process (called in a fresh child): baseline, peak and wall time."""
    import torch  # noqa: F401  (imported before the baseline, as every stage needs it)
    import transformers  # noqa: F401

    from benchprof.core.loader import load_config

    if stage == "evaluate":
        import lm_eval  # noqa: F401
    cfg = load_config(config)
    baseline, anon_baseline = status_kib("VmRSS"), status_kib("RssAnon")
    reset_peak()
    anon = AnonymousPeak()
    extra = {}
    started = time.perf_counter()
    if stage == "importance":
        from benchprof.stages.finetune import finetune

        finetune(cfg)
    elif stage == "extract":
        from benchprof.stages.extract import extract

        extract(cfg)
    elif stage == "damage":
        from benchprof.core.layout import Layout
        from benchprof.core.modeling import fingerprint, load_model
        from benchprof.stages.damage import ablated, load_region

        model, _ = load_model(*cfg.model_source(cfg.models[0]), dtype="float32")
        fp = fingerprint(model)
        layout = Layout(cfg.output_root, "m")
        extra["load_peak_kib"] = status_kib("VmHWM")
        extra["model_kib"] = status_kib("VmRSS")  # loaded: the regions' own memory is measured from here
        reset_peak()
        for region in cfg.extract.region_names():
            with ablated(model, load_region(model, layout.mask_file(ABILITY, 0.01, region), fp)):
                pass
    elif stage == "evaluate":
        from benchprof.stages.evaluate import evaluate

        evaluate(cfg, region="top")
    wall = time.perf_counter() - started
    peak = status_kib("VmHWM")
    extra.update(anon_baseline_kib=anon_baseline, anon_peak_kib=anon.stop())
    if "model_kib" in extra:
        extra["regions_peak_kib"], peak = peak, max(peak, extra["load_peak_kib"])
    return {"baseline_kib": baseline, "peak_kib": peak, "wall_s": wall, **extra}


def measure(size: str, folder: Path, threads: int, model: Path | None = None) -> dict:
    """Build the model of `size` (or take the model folder `model`, named `size`), then every stage in its own
    process; one row per stage."""
    from benchprof.lab.tinymodel import make_tiny_model

    started = time.perf_counter()
    if model is None:
        hidden, intermediate, layers = SIZES[size]
        model_dir = make_tiny_model(
            folder / "model",
            hidden_size=hidden,
            intermediate_size=intermediate,
            num_layers=layers,
            num_heads=hidden // 64,
        )
    else:
        model_dir = model.resolve()
        shape = json.loads((model_dir / "config.json").read_text())
        hidden, intermediate, layers = shape["hidden_size"], shape["intermediate_size"], shape["num_hidden_layers"]
    build_s = time.perf_counter() - started
    config = write_project(folder, model_dir)
    from safetensors import safe_open

    with safe_open(str(model_dir / "model.safetensors"), "pt") as f:
        params = sum(math.prod(f.get_slice(name).get_shape()) for name in f.keys())  # tied weights once
    mlp = 3 * hidden * intermediate * layers
    rows = {}
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "CUDA_VISIBLE_DEVICES": ""}
    for stage in STAGES:
        done = subprocess.run(
            [sys.executable, __file__, "--stage", stage, "--config", str(config)],
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(f"{size} {stage} failed:\n{done.stderr[-3000:]}")
        rows[stage] = json.loads(done.stdout.strip().splitlines()[-1])
    importance_bytes = (folder / "outputs" / "m" / ABILITY / "importance" / "importance.safetensors").stat().st_size
    mask_bytes = sum(p.stat().st_size for p in (folder / "outputs" / "m" / ABILITY / "masks").rglob("*.safetensors"))
    return {
        "size": size,
        "params": params,
        "mlp_params": mlp,
        "hidden": hidden,
        "intermediate": intermediate,
        "layers": layers,
        "model_bytes": (model_dir / "model.safetensors").stat().st_size,
        "importance_bytes": importance_bytes,
        "mask_bytes": mask_bytes,
        "build_s": build_s,
        "stages": rows,
    }


def report(results: list[dict]) -> str:
    """The markdown table: each stage's peak above its process's baseline, in MB and bytes per parameter."""
    lines = [
        "| model | params | fp32 weights MB | stage | wall s | peak RSS above baseline MB | bytes / param "
        "| anonymous only MB | bytes / param |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        for stage, row in r["stages"].items():
            kib, anon = stage_kib(r, stage), row["anon_peak_kib"] - row["anon_baseline_kib"]
            lines.append(
                f"| {r['size']} | {r['params'] / 1e6:.1f} M | {r['model_bytes'] / 1e6:,.0f} | {stage} | "
                f"{row['wall_s']:.1f} | {kib / 1024:,.0f} | {kib * 1024 / r['params']:.2f} | "
                f"{anon / 1024:,.0f} | {anon * 1024 / r['params']:.2f} |"
            )
            if stage == "damage":
                kib = stage_kib(r, "damage: regions only")
                lines.append(
                    f"| {r['size']} | | | damage: regions only, above the loaded model | | {kib / 1024:,.0f} "
                    f"| {kib * 1024 / r['params']:.2f} | | |"
                )
    if len(results) > 1:  # the growth per parameter between sizes, free of fixed costs (imports, buffers)
        lines += [
            "",
            "| stage | " + " | ".join(f"{a['size']} → {b['size']}" for a, b in zip(results, results[1:])) + " |",
        ]
        lines.append("|---|" + "---:|" * (len(results) - 1))
        stages = [*STAGES[:3], "damage: regions only", STAGES[3]]
        for stage in stages:
            cells = []
            for a, b in zip(results, results[1:]):
                growth = stage_kib(b, stage) - stage_kib(a, stage)
                cells.append(f"{growth * 1024 / (b['params'] - a['params']):.2f} B/param")
            lines.append(f"| {stage} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def stage_kib(result: dict, stage: str) -> int:
    """A stage's peak above its baseline; for "damage: regions only", above the loaded model."""
    if stage == "damage: regions only":
        damage = result["stages"]["damage"]
        return damage["regions_peak_kib"] - damage["model_kib"]
    row = result["stages"][stage]
    return row["peak_kib"] - row["baseline_kib"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20M,80M,300M", help=f"comma-separated, of {', '.join(SIZES)}")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--model", type=Path, help="measure this model folder (safetensors) instead of --sizes")
    parser.add_argument("--stage", choices=STAGES, help=argparse.SUPPRESS)  # a child process's one stage
    parser.add_argument("--config", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stage:
        import torch

        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
        print(json.dumps(run_stage(args.stage, args.config)))
        return
    import torch

    print(f"torch {torch.__version__}, {args.threads} threads, CPU, fp32")
    results = []
    for size in [args.model.name] if args.model else args.sizes.split(","):
        with tempfile.TemporaryDirectory(prefix=f"benchprof_memory_{size}_") as folder:
            result = measure(size, Path(folder), args.threads, args.model)
        results.append(result)
        print(
            f"{size}: {result['params']:,} params ({result['mlp_params']:,} MLP), built in {result['build_s']:.0f}s; "
            + ", ".join(
                f"{stage} {row['wall_s']:.1f}s +{(row['peak_kib'] - row['baseline_kib']) / 1024:,.0f} MB"
                for stage, row in result["stages"].items()
            ),
            flush=True,
        )
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
