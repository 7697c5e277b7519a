"""evaluate's worker processes, really spawned: two CPU workers give the results of one process.

evaluate starts one worker per device when it sees several GPUs, and `evals.cpu_workers` workers on the
CPU. In the first case the parent is told CUDA is there (the only thing replaced) and
`cuda_visible_devices: "0,1"`; in the second nothing is replaced. Either way it spawns two real
`python -m benchprof evaluate --shard=i/2` processes, which evaluate on this machine's CPU.
Each worker loads the model, writes the task files, takes jobs from the queue the workers share (the next
whose lock no other holds), applies each job's variant in place and writes its result. Every job's scores and
per-document rows must equal a one-process run of the same project: a worker that applied another job's mask,
skipped a job or wrote into another's file would differ.
"""

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from test_damage import write_project
from test_evaluate import LIMIT, read_samples

from benchprof.core.layout import Layout
from benchprof.core.loader import load_config
from benchprof.stages import evaluate as evaluate_module
from benchprof.stages.evaluate import evaluate, job_list, worker_commands

KS = (0.01, 0.2)
COMPARED = ("benchmark", "primary_task", "results", "n_samples", "variant", "model_fingerprint", "inputs_hash")


def results_of(config: Path) -> dict[str, dict]:
    """Every job's JSON (the fields that do not depend on when or where it ran) and its samples."""
    cfg = load_config(config)
    layout = Layout(cfg.output_root, "tiny")
    out = {}
    for job in job_list(cfg):
        payload = json.loads(layout.eval_file(job.variant, job.benchmark).read_text())
        payload = {key: payload[key] for key in COMPARED}
        payload["samples"] = read_samples(layout.samples_file(job.variant, job.benchmark))
        out[job.variant.label()] = payload
    return out


@pytest.mark.parametrize("how", ["gpus", "cpu_workers"])
def test_two_spawned_workers_give_the_results_of_one_process(tiny_model_dir, tmp_path, monkeypatch, capfd, how):
    one = write_project(tmp_path / "one", tiny_model_dir, ks=KS, limit=LIMIT)
    shutil.copytree(tmp_path / "one", tmp_path / "two")  # the same mask files, byte for byte
    two = tmp_path / "two" / one.name
    # a CPU worker runs torch on its share of the cores, and a sum over another thread count rounds
    # differently in the last bits: the one process runs on the threads each worker will have
    threads = torch.get_num_threads()
    torch.set_num_threads(load_config(one).settings.thread_count(2 if how == "cpu_workers" else 1))
    try:
        evaluate(load_config(one))
    finally:
        torch.set_num_threads(threads)
    assert "1 model load(s)" in capfd.readouterr().out

    raw = yaml.safe_load(two.read_text())
    if how == "gpus":  # two listed GPUs, CUDA said to be there: one worker per GPU
        raw["settings"]["cuda_visible_devices"] = "0,1"
        monkeypatch.setattr(evaluate_module, "cuda_available", lambda: True)
    else:  # nothing replaced: two CPU workers, as the demo runs
        raw["evals"]["cpu_workers"] = 2  # the project evaluates on the CPU (evals.device: cpu)
    two.write_text(yaml.safe_dump(raw))
    log = Layout(load_config(two).output_root, "tiny").log_file("evaluate")
    evaluate(load_config(two))
    terminal = capfd.readouterr()  # the workers inherit the test's stdout and stderr
    printed = log.read_text()  # a worker's own summary goes to the stage's log: the terminal gets the parent's total
    assert "taken by the other workers" not in terminal.out and "worker 0/2" not in terminal.out
    assert terminal.err.count(" 0/7 ") == 1, terminal.err  # one bar (worker 0's), counting every job

    jobs = job_list(load_config(two))
    assert len(jobs) == 7  # the original and 2 k x 3 regions, one benchmark
    # the workers share one queue: each job run by exactly one of them (which one is a race: on tiny jobs the worker
    # that loads its model first may take them all), each worker with its own single model load, and each worker
    # accounts for every job, run by itself or taken by the other
    lines = re.findall(
        r"evaluate: (\d+) jobs run, 0 skipped \(finished\)(?:, (\d+) taken by the other workers)?", printed
    )
    ran = [int(run) for run, _ in lines]
    assert len(ran) == 2 and sum(ran) == 7, printed
    assert all(int(run) + int(taken or 0) == 7 for run, taken in lines), printed
    for i in range(2):
        assert f"1 model load(s), worker {i}/2" in printed
    assert (
        f"evaluate: 2 workers ({'GPUs 0 | 1' if how == 'gpus' else 'CPU'}) ran 7 jobs, 0 skipped (finished)"
        in terminal.out
    )

    single, workers = results_of(one), results_of(two)
    assert workers.keys() == single.keys() and len(single) == 7
    for label, payload in single.items():
        assert workers[label] == payload, label
        assert len(payload["samples"]) == LIMIT
    if how == "cpu_workers":  # --force: every job scored again, each once, though both workers walk every job
        evaluate(load_config(two), force=True)
        ran = [int(n) for n in re.findall(r"evaluate: (\d+) jobs run, 0 skipped", log.read_text()[len(printed) :])]
        assert len(ran) == 2 and sum(ran) == 7
    # the variants differ from each other, so a worker scoring the wrong one would show
    assert len({json.dumps(p["samples"], sort_keys=True) for p in single.values()}) == 7


def test_cpu_workers_divide_the_cores_and_see_no_gpu():
    from benchprof.core.config import Settings

    commands = worker_commands("c.yml", [], 1, {"k": [0.01, 0.03]}, cpu_workers=3)
    assert [env["CUDA_VISIBLE_DEVICES"] for _, env in commands] == ["", "", ""]
    assert [argv[-2:] for argv, _ in commands] == [[f"--shard={i}/3", "--k=0.01,0.03"] for i in range(3)]
    assert all(env["LOCAL_WORLD_SIZE"] == "3" for _, env in commands)  # what thread_count divides by
    assert Settings().thread_count(3) == max(1, len(os.sched_getaffinity(0)) // 3)


def test_a_workers_io_failure_is_one_line_from_it_and_one_from_the_parent(tiny_model_dir, tmp_path):
    """A job's samples path is a folder (a user's, or a copy gone wrong): the worker that scores it says so in one
    line naming the path, the parent names the worker, and no traceback reaches the terminal."""
    import subprocess
    import sys

    from benchprof.core.layout import Variant

    config = write_project(tmp_path, tiny_model_dir, ks=KS, limit=LIMIT)
    raw = yaml.safe_load(config.read_text())
    raw["evals"]["cpu_workers"] = 2
    config.write_text(yaml.safe_dump(raw))
    cfg = load_config(config)
    blocked = Layout(cfg.output_root, "tiny").samples_file(Variant(), cfg.evals.benchmarks[0])
    blocked.mkdir(parents=True)
    done = subprocess.run([sys.executable, "-m", "benchprof", "evaluate", str(config)], capture_output=True, text=True)
    # worker 0's progress bar shares the terminal: an error line may follow its last frame on the same line
    errors = re.findall(r"benchprof: error: [^\r\n]*", done.stderr)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    worker = (
        f"benchprof: error: {blocked}: cannot write ({blocked} is a folder, not a file); no partial file left; rerun "
        "to resume"
    )
    # the queue's worker that took the job fails on it, and the others are stopped unless done already (one that
    # took the job up after the first let go fails alike, each in its line)
    assert errors[0] == worker and set(errors[:-1]) == {worker}
    assert re.fullmatch(
        r"benchprof: error: evaluate: (1 worker\(s\) failed: shard [01]/2 \(CPU, exit 2\)(; 1 other\(s\) stopped)?|"
        r"2 worker\(s\) failed: shard 0/2 \(CPU, exit 2\); shard 1/2 \(CPU, exit 2\)); rerun the same command to "
        r"resume",
        errors[-1],
    ), errors


def test_cpu_workers_are_capped_at_the_cores_and_the_pending_jobs(tiny_model_dir, tmp_path, capfd):
    """evals.cpu_workers 4096 with one job left to score: no worker process is started for nothing; the job is
    scored in this process (one model load) and the cap is said in one line."""
    config = write_project(tmp_path, tiny_model_dir, ks=KS, limit=LIMIT)
    evaluate(load_config(config))
    cfg = load_config(config)
    job = job_list(cfg)[3]
    Layout(cfg.output_root, "tiny").eval_file(job.variant, job.benchmark).unlink()  # one job pending again
    raw = yaml.safe_load(config.read_text())
    raw["evals"]["cpu_workers"] = 4096
    config.write_text(yaml.safe_dump(raw))
    capfd.readouterr()
    evaluate(load_config(config))
    printed = capfd.readouterr().out
    cores = len(os.sched_getaffinity(0))
    assert f"evaluate: evals.cpu_workers 4096 capped at 1 ({cores} usable cores, 1 pending jobs)\n" in printed
    assert "evaluate: 1 jobs run, 6 skipped (finished)" in printed and "1 model load(s)" in printed
    assert "workers (CPU) ran" not in printed


def test_the_shared_queue_takes_the_longest_jobs_first_and_keeps_a_variants_jobs_together():
    """longest_first puts the original's jobs first, then orders the pending jobs by their documents (no limit: the
    longest), job order among equals; variant_runs applies each run of one variant once; only the queue's workers
    are told to share it."""
    from benchprof.core.layout import Variant
    from benchprof.stages.eval_jobs import Job
    from benchprof.stages.evaluate import JOB_QUEUE, longest_first, variant_runs

    a, b = Variant("A", 0.1, "top"), Variant("B", 0.1, "top")
    limits = {"short": 10, "long": 200, "whole": None}
    pending = [(Job(v, bench), {"limit": limits[bench]}) for v in (Variant(), a, b) for bench in limits]
    ordered = longest_first(pending)
    order = ("whole", "long", "short")
    assert [(j.variant, j.benchmark) for j, _ in ordered] == [(Variant(), bench) for bench in order] + [
        (v, bench) for bench in order for v in (a, b)
    ]
    assert [(v, len(run)) for v, run in variant_runs(ordered)] == [(Variant(), 3)] + [(a, 1), (b, 1)] * 3
    assert [(v, len(run)) for v, run in variant_runs(pending)] == [(Variant(), 3), (a, 3), (b, 3)]
    shared = worker_commands("c.yml", [], 1, {}, cpu_workers=2, queue=True)
    since = {env[JOB_QUEUE] for _, env in shared}  # when the queue began: a --force worker skips what is newer
    assert len(since) == 1 and since.pop().isdigit()
    assert all(JOB_QUEUE not in env for _, env in worker_commands("c.yml", ["0", "1"], 1, {}))
