"""SharedPrefixLM against lm-eval's HFLM on a real model and real benchmark copies; and one ablated variant
evaluated in place (benchprof) against through a saved and reloaded checkpoint (the authors' way).

Part 1 also replays, per benchmark, the batches SharedPrefixLM fed the model as plain forward passes (the
decoder's own causal mask, the last position's logits only, nothing else): the physical limit for a scorer that
runs those tokens once. Printed: seconds, tokens/s and ms per document of each, and their ratio.

Part 1. For each benchmark (lm-eval's own task, read from its copy under real/benchmarks through benchprof's
evals.dataset_paths YAMLs), lm-eval builds the loglikelihood requests once; the same requests are then scored by
HFLM and by benchprof's SharedPrefixLM over one model object. Printed per benchmark: wall and CPU seconds of
each, the speed-up, the largest per-request log-likelihood difference and greedy flags that differ, the tokens
each fed the model (padding included) and the positions it computed logits for, and each one's peak resident
memory above what the process held before it (sampled every 10 ms). The two run in alternating order from one
benchmark to the next, so a drift in the machine's load favours neither. SharedPrefixLM's one-time check
against HFLM's path runs before the timings (on the first benchmark's first requests).

A copy with only the scored split (ARC-Easy, HellaSwag, PIQA: validation) gets a few-shot split for k-shot
runs: the first 100 rows become `train` and the rest is scored, written to the work folder.

Part 2. One random region (k = 0.01024 of all parameters, among the MLP weights) on one benchmark:
(a) benchprof: zero the region in place, score with SharedPrefixLM, restore;
(b) the authors' way: save the ablated model with save_pretrained, reload it with from_pretrained (HFLM given
the path, as lm-eval loads a checkpoint), score with HFLM. Printed: each step's wall seconds, bytes written,
and the largest difference between the two variants' log-likelihoods.

    .venv/bin/python perf/scoring.py [real/SmolLM2-135M-Instruct] [--benchmarks arc_easy:0,arc_easy:5,...]
        [--limit 20] [--mmlu-subjects astronomy,high_school_geography] [--batch-size 8] [--skip-authors]
        [--dtype bfloat16] [--skip-hflm]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

for _key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_EVALUATE_OFFLINE"):
    os.environ.setdefault(_key, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = "arc_easy:0,arc_easy:5,hellaswag:0,piqa:0,mmlu:5"
FEWSHOT_ROWS = 100  # rows of a validation-only copy that become its train split for k-shot runs
K = 0.01024  # the paper's largest k


def return_freed_memory() -> None:
    """glibc: serve every allocation above 128 KiB by mmap, so freed tensors leave the resident set at once and a
    later block's peak is its own (by default the threshold grows and freed memory stays in the heap)."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):  # not glibc: peaks may then include memory an earlier block freed
        pass


class PeakMemory:
    """Peak resident memory of this process while the block runs, above its resident memory at the start."""

    def __init__(self) -> None:
        import psutil

        self.process = psutil.Process()
        self.peak = self.start = 0
        self.running = False

    def sample(self) -> None:
        while self.running:
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.01)

    def __enter__(self) -> PeakMemory:
        self.start = self.peak = self.process.memory_info().rss
        self.running = True
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.running = False
        self.thread.join()

    @property
    def mib(self) -> float:
        return (self.peak - self.start) / 2**20


class Work:
    """Tokens fed to the model (padding included), positions whose logits it computed, and the shape of every
    forward's input_ids, over all forwards."""

    def __init__(self, model: Any) -> None:
        self.tokens = self.logits = 0
        self.shapes: list[tuple[int, ...]] = []
        model.register_forward_pre_hook(self.before, with_kwargs=True)
        model.register_forward_hook(self.after)

    def before(self, module: Any, args: tuple, kwargs: dict) -> None:
        ids: Any = kwargs.get("input_ids", args[0] if args else None)
        self.tokens += ids.numel()
        self.shapes.append(tuple(ids.shape))

    def after(self, module: Any, args: tuple, output: Any) -> None:
        self.logits += output.logits.shape[:-1].numel()


@dataclass
class Timing:
    answers: list[tuple[float, bool]]
    wall_s: float
    cpu_s: float
    tokens: int
    logits: int
    peak_mib: float
    shapes: list[tuple[int, ...]]  # every forward's input_ids


def timed(lm: Any, requests: list, work: Work) -> Timing:
    tokens, logits, forwards = work.tokens, work.logits, len(work.shapes)
    with PeakMemory() as memory:
        wall, cpu = time.perf_counter(), time.process_time()
        answers = lm.loglikelihood(requests, disable_tqdm=True)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    shapes = work.shapes[forwards:]
    return Timing(answers, wall, cpu, work.tokens - tokens, work.logits - logits, memory.mib, shapes)


def plain_forwards(model: Any, shapes: list[tuple[int, ...]]) -> float:
    """Wall seconds of plain forward passes over batches of these shapes: the decoder with its own causal mask,
    no 4D mask, no position ids, the logits of the last position only, no tokenising and no request handling.
    What a scorer that feeds the model exactly these tokens cannot beat; token values do not change the time."""
    import torch

    generator = torch.Generator().manual_seed(0)
    batches = [torch.randint(100, 1000, shape, generator=generator) for shape in shapes]
    started = time.perf_counter()
    with torch.no_grad():
        for ids in batches:
            model(input_ids=ids, logits_to_keep=1)
    return time.perf_counter() - started


def benchmark_copy(name: str, shots: int, work: Path) -> Path:
    """The local copy of `name` to evaluate from: real/benchmarks/<name>, or for a k-shot run of a copy with only
    its scored split, that split cut into train (the first FEWSHOT_ROWS rows) and validation (the rest)."""
    import datasets

    source = ROOT / "real" / "benchmarks" / name
    splits = [p.name for p in source.iterdir() if p.is_dir()]
    if shots == 0 or name == "mmlu" or splits != ["validation"]:
        return source
    target = work / f"{name}-fewshot"
    if not target.exists():
        scored = datasets.load_from_disk(str(source / "validation"))
        datasets.DatasetDict(
            {
                "train": scored.select(range(FEWSHOT_ROWS)),
                "validation": scored.select(range(FEWSHOT_ROWS, len(scored))),
            }
        ).save_to_disk(str(target))
    return target


def build_requests(name: str, shots: int, limit: int, subjects: list[str], work: Path) -> tuple[list, int]:
    """(loglikelihood requests, documents) lm-eval builds for benchmark `name` read from its local copy;
    mmlu: `subjects` only, `limit` documents over them."""
    from lm_eval.tasks import TaskManager

    from benchprof.core.loader import parse_config
    from benchprof.stages import tasks

    folder = work / f"{name}-{shots}shot"
    raw = {
        "settings": {"output_dir": str(folder)},
        "models": [{"name": "m"}],
        "datasets": [{"name": "Spatial_Reasoning"}],
        "evals": {
            "benchmarks": [{"name": name, "num_fewshot": shots}],
            "dataset_paths": {name: str(benchmark_copy(name, shots, work))},
        },
    }
    include_path, mapping = tasks.write_tasks(parse_config(raw, folder / "config.yml"))
    task = mapping[name]
    names = [f"{task}__mmlu_{s}" for s in subjects] if name == "mmlu" else [task]
    per_task = [limit // len(names) + (i < limit % len(names)) for i in range(len(names))]
    loaded = TaskManager(include_path=str(include_path), include_defaults=False).load(names)["tasks"]
    requests, docs = [], 0
    for lm_task, n in zip([loaded[n] for n in names], per_task):
        lm_task.set_config(key="num_fewshot", value=shots)
        lm_task.set_fewshot_seed(seed=1234)
        lm_task.build_all_requests(limit=n, rank=0, world_size=1)
        requests += lm_task.instances
        docs += len({i.doc_id for i in lm_task.instances})
    return requests, docs


def max_difference(a: list[tuple[float, bool]], b: list[tuple[float, bool]]) -> tuple[float, int]:
    return max(abs(x[0] - y[0]) for x, y in zip(a, b)), sum(x[1] != y[1] for x, y in zip(a, b))


def random_region(model: Any, k: float) -> dict[str, Any]:
    """floor(k x all parameters) uniform draws among the MLP weights, seed 0: name -> sorted flat indices."""
    import torch

    from benchprof.core.modeling import eligible_names, num_layers, total_params

    params = dict(model.named_parameters())
    names = eligible_names(params, "mlp", num_layers(model))
    sizes = [params[n].numel() for n in names]
    n = int(k * total_params(model))
    chosen = torch.randperm(sum(sizes), generator=torch.Generator().manual_seed(0))[:n].sort().values
    region, offset = {}, 0
    for name, size in zip(names, sizes):
        region[name] = chosen[(chosen >= offset) & (chosen < offset + size)] - offset
        offset += size
    return region


def authors_way(model: Any, tokenizer: Any, packed: Any, requests: list, batch_size: int, work: Path) -> None:
    from lm_eval.models.huggingface import HFLM

    from benchprof.stages.damage import ablated

    region = random_region(model, K)
    zeroed = sum(int(v.numel()) for v in region.values())
    packed.encoded.clear()  # part 1's tokens: the in-place path tokenises again, as the reloaded HFLM does
    started = time.perf_counter()
    with ablated(model, region):
        in_place = packed.loglikelihood(requests, disable_tqdm=True)
    in_place_s = time.perf_counter() - started
    started = time.perf_counter()
    with ablated(model, region):
        pass
    apply_restore_s = time.perf_counter() - started

    checkpoint = work / "checkpoint"
    started = time.perf_counter()
    with ablated(model, region):
        model.save_pretrained(checkpoint)
    tokenizer.save_pretrained(checkpoint)
    save_s = time.perf_counter() - started
    written = sum(p.stat().st_size for p in checkpoint.rglob("*") if p.is_file())
    started = time.perf_counter()
    reloaded = HFLM(
        pretrained=str(checkpoint), tokenizer=str(checkpoint), batch_size=batch_size, device="cpu", dtype="float32"
    )
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    from_disk = reloaded.loglikelihood(requests, disable_tqdm=True)
    eval_s = time.perf_counter() - started
    del reloaded
    shutil.rmtree(checkpoint)
    difference, flags = max_difference(in_place, from_disk)
    authors_s = save_s + load_s + eval_s
    print(f"\none ablated variant (random region, k={K}: {zeroed:,} MLP weights zeroed), {len(requests)} requests:")
    print(
        f"  (a) benchprof, in place: zero + SharedPrefixLM + restore = {in_place_s:7.1f} s "
        f"(zero + restore alone {apply_restore_s:.2f} s), 0 bytes written"
    )
    print(
        f"  (b) authors' way: save_pretrained {save_s:.1f} s + from_pretrained {load_s:.1f} s "
        f"+ HFLM {eval_s:.1f} s = {authors_s:7.1f} s, {written / 2**20:.0f} MiB written"
    )
    print(
        f"  (b)/(a) {authors_s / in_place_s:.2f}x; max |log-likelihood difference| {difference:.1e}, "
        f"{flags} greedy flags differ"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default=str(ROOT / "real" / "SmolLM2-135M-Instruct"))
    parser.add_argument("--benchmarks", default=BENCHMARKS, help="name:shots, comma-separated")
    parser.add_argument("--limit", type=int, default=20, help="documents per benchmark")
    parser.add_argument("--mmlu-subjects", default="astronomy,high_school_geography")
    parser.add_argument("--batch-size", type=int, default=8, help="HFLM's batch_size, given to both")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: see docs/research/performance.md)")
    parser.add_argument("--skip-authors", action="store_true", help="leave out part 2")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"), help="the model's weights")
    parser.add_argument("--skip-hflm", action="store_true", help="only SharedPrefixLM against plain forward passes")
    args = parser.parse_args()

    import torch
    from lm_eval.models.huggingface import HFLM

    from benchprof.core.console import drop_model_object_warning
    from benchprof.core.modeling import load_model
    from benchprof.stages.prefix_scorer import SharedPrefixLM

    torch.set_num_threads(args.threads)
    return_freed_memory()
    work = Path(tempfile.mkdtemp(prefix="benchprof-scoring-"))
    started = time.perf_counter()
    model, tokenizer = load_model(args.model, dtype=args.dtype)
    drop_model_object_warning()
    hflm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=args.batch_size)
    packed = SharedPrefixLM(pretrained=model, tokenizer=tokenizer, batch_size=args.batch_size)
    work_done = Work(model)
    subjects = args.mmlu_subjects.split(",")
    runs = []
    for spec in args.benchmarks.split(","):
        name, shots = spec.split(":")
        requests, docs = build_requests(name, int(shots), args.limit, subjects, work)
        runs.append((f"{name} {shots}-shot", requests, docs))
    packed.loglikelihood(runs[0][1][:8], disable_tqdm=True)  # its one-time check, outside the timings
    packed.encoded.clear()  # the timed runs tokenise every request, as HFLM does

    print(
        f"\n{Path(args.model).name}, {args.dtype}, CPU, {torch.get_num_threads()} threads, batch_size "
        f"{args.batch_size}; same requests through "
        + ("SharedPrefixLM alone" if args.skip_hflm else "HFLM and SharedPrefixLM")
    )
    header = (
        f"{'benchmark':<16} {'docs':>4} {'reqs':>5} {'HFLM s':>7} {'SP s':>6} {'speed-up':>8} {'(CPU)':>6} "
        f"{'max |dLL|':>9} {'greedy':>6} {'tokens HFLM/SP':>15} {'logit rows HFLM/SP':>19} {'peak MiB HFLM/SP':>17}"
    )
    if not args.skip_hflm:
        print(header)
    limits = []
    for i, (label, requests, docs) in enumerate(runs):
        if args.skip_hflm:
            ours = timed(packed, requests, work_done)
            limits.append((label, docs, ours, plain_forwards(model, ours.shapes)))
            continue
        if i % 2 == 0:
            theirs, ours = timed(hflm, requests, work_done), timed(packed, requests, work_done)
        else:
            ours, theirs = timed(packed, requests, work_done), timed(hflm, requests, work_done)
        difference, flags = max_difference(theirs.answers, ours.answers)
        print(
            f"{label:<16} {docs:>4} {len(requests):>5} {theirs.wall_s:>7.1f} {ours.wall_s:>6.1f} "
            f"{theirs.wall_s / ours.wall_s:>7.2f}x {theirs.cpu_s / ours.cpu_s:>5.2f}x {difference:>9.1e} {flags:>6} "
            f"{f'{theirs.tokens}/{ours.tokens}':>15} {f'{theirs.logits}/{ours.logits}':>19} "
            f"{f'{theirs.peak_mib:.0f}/{ours.peak_mib:.0f}':>17}"
        )
        limits.append((label, docs, ours, plain_forwards(model, ours.shapes)))
    print(
        "\nSharedPrefixLM against plain forward passes over the batches it fed (the limit for a scorer that runs "
        "these tokens once)"
    )
    print(f"{'benchmark':<16} {'tokens':>7} {'SP s':>6} {'plain s':>7} {'SP/plain':>8} {'SP tok/s':>8} "
          f"{'plain tok/s':>11} {'SP ms/doc':>9} {'plain ms/doc':>12}")  # fmt: skip
    for label, docs, ours, plain_s in limits:
        print(
            f"{label:<16} {ours.tokens:>7} {ours.wall_s:>6.1f} {plain_s:>7.1f} {ours.wall_s / plain_s:>7.2f}x "
            f"{ours.tokens / ours.wall_s:>8.0f} {ours.tokens / plain_s:>11.0f} {1000 * ours.wall_s / docs:>9.0f} "
            f"{1000 * plain_s / docs:>12.0f}"
        )
    if not args.skip_authors:
        authors_way(model, tokenizer, packed, runs[0][1], args.batch_size, work)
    shutil.rmtree(work)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
