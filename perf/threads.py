"""settings.threads on a CPU: the importance pass and an evaluation at 1 and 2 threads, alone and with a second
identical job beside them, on the demo model; and the start-up of the small commands.

Each figure is the wall time of a whole `benchprof` command (subprocess, fresh outputs folder, the demo's data
generated once beforehand), the median of `--repeats` runs:

  importance: `benchprof finetune` (one ability, `--max_samples` items);
  evaluation: `benchprof evaluate --original_only` (one ability's test split);
  beside: the same command twice at once, in two folders (the time of the slower).

With 2 cores, "2 threads beside another 2-thread job" is the oversubscribed case settings.threads' default
avoids (its automatic value gives each of two processes one core). Then the start-up: `--help`, `status` on the
demo (done), and a config naming an unknown benchmark (its error), each the median of `--repeats` runs.

    .venv/bin/python perf/threads.py [--repeats 3] [--max_samples 64]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BENCHPROF = [sys.executable, "-m", "benchprof"]
ABILITY = "Long_Term_Knowledge"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_EVALUATE_OFFLINE": "1"}


def config(folder: Path, data: Path, threads: int, max_samples: int) -> Path:
    """A one-ability demo project in `folder` reading the shared `data`."""
    raw = {
        "settings": {"k_values": [0.01], "output_dir": str(folder / "out"), "threads": threads, "train_batch_size": 16},
        "models": [{"name": str(ROOT / "benchprof" / "assets" / "demo-model"), "tag": "demo", "dtype": "float32"}],
        "datasets": [{"name": ABILITY}, {"name": "Commonsense_Causal"}],
        "data": {"dir": str(data), "train_size": 300, "test_size": 200},
        "evals": {"benchmarks": [ABILITY], "device": "cpu"},
        "finetune": {"max_samples": max_samples},
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.yml"
    path.write_text(yaml.safe_dump(raw))
    return path


def timed(commands: list[list[str]], expect: int = 0) -> float:
    """Seconds until the slowest of `commands`, started together, has finished; each must exit with `expect`."""
    started = time.perf_counter()
    procs = [subprocess.Popen(c, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for c in commands]
    for proc in procs:
        _, err = proc.communicate()
        if proc.returncode != expect:
            raise SystemExit(f"exit {proc.returncode}, expected {expect}: {err.decode()[-400:]}")
    return time.perf_counter() - started


def stage_time(work: Path, data: Path, stage: list[str], threads: int, beside: bool, args: argparse.Namespace) -> float:
    times = []
    for _ in range(args.repeats):
        shutil.rmtree(work, ignore_errors=True)
        jobs = [config(work / f"job{i}", data, threads, args.max_samples) for i in range(2 if beside else 1)]
        times.append(timed([[*BENCHPROF, *stage, str(c)] for c in jobs]))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max_samples", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work, data = Path(tmp) / "work", Path(tmp) / "data"
        first = config(Path(tmp) / "data-config", data, 1, args.max_samples)
        subprocess.run([*BENCHPROF, "data", str(first)], env=ENV, check=True, stdout=subprocess.DEVNULL)
        cores = len(os.sched_getaffinity(0))
        print(f"usable cores: {cores}; wall seconds, median of {args.repeats} (each a whole command)")
        print("| stage | threads | alone | beside a second job | slowdown beside |")
        print("|---|---|---|---|---|")
        for name, stage in (
            ("importance", ["finetune", "--ability", ABILITY]),
            ("evaluation", ["evaluate", "--original_only"]),
        ):
            for threads in (1, 2):
                alone = stage_time(work, data, stage, threads, False, args)
                beside = stage_time(work, data, stage, threads, True, args)
                print(f"| {name} | {threads} | {alone:.1f} | {beside:.1f} | {beside / alone:.2f}x |")
        # start-up: --help, status on a finished-looking plan (the data only), an unknown benchmark
        unknown = config(Path(tmp) / "unknown", data, 1, args.max_samples)
        raw = yaml.safe_load(unknown.read_text())
        raw["evals"]["benchmarks"] = ["no_such_benchmark"]
        unknown.write_text(yaml.safe_dump(raw))
        print("\n| command | seconds |\n|---|---|")
        for label, command, expect in (
            ("benchprof --help", [*BENCHPROF, "--help"], 0),
            ("benchprof status (demo)", [*BENCHPROF, "status", str(ROOT / "configs" / "demo.yml")], 0),
            ("benchprof run, unknown benchmark", [*BENCHPROF, "run", str(unknown)], 2),  # its one-line error
        ):
            seconds = statistics.median(timed([command], expect) for _ in range(args.repeats))
            print(f"| {label} | {seconds:.2f} |")


if __name__ == "__main__":
    main()
