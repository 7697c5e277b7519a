"""End to end, one benchmark: `benchprof evaluate --original_only` against lm-eval's own command line on the same
model, task YAML (the one benchprof writes for a local copy) and documents, as a user runs each.

Per benchmark, each figure the wall time of a whole command (subprocess, start-up and model load included):

  benchprof, cold: a fresh outputs folder (the model's fingerprint is computed and recorded there);
  benchprof, warm: the same folder again with --force (the fingerprint read back, the job rerun);
  lm-eval: `python -m lm_eval run --model hf ... --tasks <benchprof's task> --include_path <its folder>`.

In each repeat: benchprof cold (it writes the task folder lm-eval then reads), lm-eval, benchprof warm. The
per-document acc of both must be the same (the script stops otherwise). Threads: every usable core in both
(torch's default; benchprof's settings.threads automatic).

    .venv/bin/python perf/against_cli.py [real/SmolLM2-135M-Instruct] [--benchmarks piqa,arc_easy,winogrande]
        [--limit 100] [--repeats 2] [--batch-size 16]
"""

from __future__ import annotations

import argparse
import json
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
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_EVALUATE_OFFLINE": "1"}


def config(folder: Path, model: Path, benchmark: str, limit: int, batch_size: int) -> Path:
    """A project that scores one real benchmark, read from its local copy, on the unablated model."""
    raw = {
        "settings": {"output_dir": str(folder / "out"), "eval_batch_size": batch_size},
        "models": [{"name": str(model), "tag": "model", "dtype": "float32"}],
        "datasets": [{"name": "Long_Term_Knowledge"}],
        "evals": {
            "benchmarks": [{"name": benchmark, "limit": limit}],
            "device": "cpu",
            "dataset_paths": {benchmark: str(ROOT / "real" / "benchmarks" / benchmark)},
        },
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.yml"
    path.write_text(yaml.safe_dump(raw))
    return path


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])}...: exit {done.returncode}: {done.stderr[-600:]}")
    return time.perf_counter() - started


def per_document_acc(folder: Path, pattern: str) -> list[tuple[int, float]]:
    """(doc_id, acc) of each document in doc_id order, from the one samples file under `folder` matching
    `pattern`: the ids too, so that two runs scoring other documents cannot look equal."""
    [path] = list(folder.rglob(pattern))
    samples = [json.loads(line) for line in path.read_text().splitlines()]
    return [(int(s["doc_id"]), float(s["acc"])) for s in sorted(samples, key=lambda s: s["doc_id"])]


def one_benchmark(model: Path, benchmark: str, args: argparse.Namespace, work: Path) -> tuple[float, float, float]:
    """(benchprof cold, benchprof warm, lm-eval) median wall seconds over args.repeats."""
    cold, warm, cli = [], [], []
    for repeat in range(args.repeats):
        folder = work / f"{benchmark}-{repeat}"
        shutil.rmtree(folder, ignore_errors=True)
        path = config(folder, model, benchmark, args.limit, args.batch_size)
        ours = [sys.executable, "-m", "benchprof", "evaluate", str(path), "--original_only"]

        cold.append(timed(ours))  # first: its task folder is what lm-eval reads
        [tasks] = list((folder / "out" / "tasks").iterdir())
        command = [sys.executable, "-m", "lm_eval", "run", "--model", "hf"]
        command += ["--model_args", f"pretrained={model},dtype=float32", "--device", "cpu"]
        command += ["--tasks", f"benchprof_local_{benchmark}", "--include_path", str(tasks)]
        command += ["--limit", str(args.limit), "--batch_size", str(args.batch_size), "--log_samples"]
        cli.append(timed([*command, "--output_path", str(folder / "cli")]))
        warm.append(timed([*ours, "--force"]))
        mine = per_document_acc(folder / "out", f"{benchmark}.samples.jsonl")
        theirs = per_document_acc(folder / "cli", f"samples_benchprof_local_{benchmark}_*.jsonl")
        if mine != theirs:
            raise SystemExit(f"{benchmark}: per-document acc differs between benchprof and lm-eval")
    return statistics.median(cold), statistics.median(warm), statistics.median(cli)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default=str(ROOT / "real" / "SmolLM2-135M-Instruct"))
    parser.add_argument("--benchmarks", default="piqa,arc_easy,winogrande")
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    model = Path(args.model).resolve()
    print(f"{model.name}, {args.limit} documents, batch_size {args.batch_size}; median of {args.repeats} commands")
    print("| benchmark | benchprof, cold s | benchprof, warm s | lm-eval CLI s | lm-eval / benchprof cold | / warm |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for benchmark in args.benchmarks.split(","):
            cold, warm, cli = one_benchmark(model, benchmark, args, Path(tmp))
            print(f"| {benchmark} | {cold:.1f} | {warm:.1f} | {cli:.1f} | {cli / cold:.2f}x | {cli / warm:.2f}x |")


if __name__ == "__main__":
    main()
