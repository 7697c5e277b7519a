"""Importance throughput (tokens/s) of benchprof's pass against a plain forward + backward.

One tiny Llama (built here, random weights) and one set of padded batches of spatial items; every
method runs the same forwards and backwards over them:

  plain-all       loss.backward() with every parameter trainable, gradients left summing in .grad
                  (what a training step costs before its optimizer)
  plain-eligible  the same with only the eligible (MLP) weights trainable, summing in .grad
  benchprof-ddp   benchprof.stages.sharding's ddp sums: eligible weights only, a post-accumulate-grad
                  hook adds each gradient into an fp32 buffer and frees it; then |theta * sum g|
  benchprof-fsdp  the fsdp strategy in a one-process gloo group (FSDP2 bookkeeping, no real sharding)
  benchprof-deepspeed  the deepspeed strategy (ZeRO-3) in the same one-process group

Each method: one warm-up pass over the batches, then --repeats timed passes; the median is reported
(tokens = non-padding tokens, as `benchprof finetune` counts them). Time is compared with
plain-all and with plain-eligible (the latter isolates the hooks, fp32 buffers and the final
|theta * sum g|). `--dtype bfloat16` runs the model in bf16 (the fp32 accumulation is then a real cast).
On a machine with a GPU the model and batches go to cuda:0 (timings synchronised) and the fsdp and deepspeed
rows are left out: their one-process set-up here is the CPU's (gloo); gpu_check.sh runs them on 2 GPUs.

    .venv/bin/python perf/importance.py [--hidden 256] [--layers 4] [--items 64] [--batch 8]
        [--repeats 3] [--threads 2] [--dtype float32] [--skip fsdp,deepspeed]
        [--model real/SmolLM2-135M-Instruct --ability Long_Term_Knowledge]

`--model` times a real checkpoint (its own tokenizer and chat template) instead of the tiny one, and
`--ability` uses that ability's generated training items (benchprof's generator, seed 1234) instead of
the spatial ones. The padding waste (padded positions / all positions of the batches) is printed: the
forward and backward run over padded positions too, so it is time every method spends alike.
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

for _key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_EVALUATE_OFFLINE"):
    os.environ.setdefault(_key, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("DS_ACCELERATOR", "cpu")


def items(n: int) -> list[dict]:
    where = ["left", "right", "above", "below"]
    things = ["cup", "box", "lamp", "book", "chair", "desk", "plant", "clock"]
    rng = random.Random(0)
    out = []
    for i in range(n):
        a, b = rng.sample(things, 2)
        label = rng.randrange(4)
        filler = " The room is quiet and the window is open." * rng.randrange(4)
        out.append(
            {
                "id": str(i),
                "context": f"The {a} is {where[label]} of the {b}.{filler}",
                "question": f"Where is the {a}?",
                "options": where,
                "answer": where[label],
                "label": label,
            }
        )
    return out


def timed(run, batches: list[dict], repeats: int) -> float:
    """Median seconds of `run(batches)` over `repeats` passes, after one warm-up pass (GPU work waited for)."""
    import torch

    def sync() -> None:
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    run(batches)
    seconds = []
    for _ in range(repeats):
        sync()
        started = time.perf_counter()
        run(batches)
        sync()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--items", type=int, default=64)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--skip", default="", help="comma-separated: fsdp, deepspeed")
    parser.add_argument("--model", default="", help="a real checkpoint folder instead of the tiny model")
    parser.add_argument("--ability", default="", help="this ability's generated train items")
    args = parser.parse_args()

    import torch

    from benchprof.abilities import generate
    from benchprof.core.modeling import eligible_names, load_model, num_layers
    from benchprof.lab.tinymodel import make_tiny_model
    from benchprof.stages.finetune import batch_loss, encode_batches, importance_score
    from benchprof.stages.sharding import gradient_sums, shard_deepspeed, shard_fsdp, start_process_group

    torch.set_num_threads(args.threads)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        skip |= {"fsdp", "deepspeed"}
    if args.model:
        model_dir = Path(args.model)
    else:
        model_dir = make_tiny_model(
            Path(tempfile.mkdtemp(prefix="benchprof_importance_")) / "model",
            hidden_size=args.hidden,
            num_layers=args.layers,
            intermediate_size=int(args.hidden * 2.6875),
            seed=0,
        )
    model, tok = load_model(str(model_dir), dtype=args.dtype, device=device)
    names = [n for n, _ in model.named_parameters()]
    eligible = eligible_names(names, "mlp", num_layers(model))
    if args.ability:
        records = generate(args.ability, args.items, 0, 1234)[0]
    else:
        records = items(args.items)
    batches, n_loss_tokens = encode_batches(tok, records, ["context", "question", "answer"], 256, args.batch, "all")
    batches = [{key: value.to(device) for key, value in batch.items()} for batch in batches]
    tokens = sum(int(b["attention_mask"].sum()) for b in batches)
    positions = sum(b["attention_mask"].numel() for b in batches)
    n_params = sum(p.numel() for p in model.parameters())
    n_eligible = sum(p.numel() for n, p in model.named_parameters() if n in set(eligible))
    print(
        f"model: {model_dir.name if args.model else 'tiny'}, hidden {model.config.hidden_size}, "
        f"{num_layers(model)} layers, {n_params / 1e6:.2f} M params "
        f"({n_eligible / 1e6:.2f} M eligible MLP), {args.dtype}; {len(batches)} batches of {args.batch}, "
        f"{tokens} tokens per pass, padding waste {1 - tokens / positions:.1%}; torch {torch.__version__}, "
        + (torch.cuda.get_device_name(0) if device == "cuda" else f"{args.threads} threads, CPU")
    )

    def plain(trainable: set[str]):
        net = copy.deepcopy(model)
        for name, p in net.named_parameters():
            p.requires_grad_(name in trainable)

        def run(batches: list[dict]) -> None:
            net.zero_grad(set_to_none=True)
            for batch in batches:
                batch_loss(net, batch, n_loss_tokens).backward()  # .grad sums in the model's dtype

        return run

    loss = functools.partial(batch_loss, n_loss_tokens=n_loss_tokens)

    def importance(strategy: str, net) -> Callable[[list[dict]], None]:
        def run(batches: list[dict]) -> None:
            for _, grad_sum, theta in gradient_sums(strategy, net, batches, loss, eligible):
                importance_score(grad_sum, theta)

        return run

    methods = {
        "plain-all": plain(set(names)),
        "plain-eligible": plain(set(eligible)),
        "benchprof-ddp": importance("ddp", copy.deepcopy(model)),
    }
    if skip != {"fsdp", "deepspeed"}:
        start_process_group()
    if "fsdp" not in skip:
        fsdp_net = shard_fsdp(copy.deepcopy(model), eligible, "cpu")
        methods["benchprof-fsdp"] = importance("fsdp", fsdp_net)
    if "deepspeed" not in skip:
        import sys

        import deepspeed.comm.torch  # noqa: F401  (`deepspeed.comm.torch` the attribute is torch itself)

        # a JIT-compiled CPU shared-memory kernel that only inference_all_reduce uses
        sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None  # type: ignore[attr-defined]
        engine = shard_deepspeed(copy.deepcopy(model), eligible)
        methods["benchprof-deepspeed"] = importance("deepspeed", engine)

    results = {}
    for name, run in methods.items():
        seconds = timed(run, batches, args.repeats)
        results[name] = {"seconds": seconds, "tokens_per_s": tokens / seconds}
    base, eligible_only = results["plain-all"]["seconds"], results["plain-eligible"]["seconds"]
    print(f"\n{'method':<22}{'s/pass':>9}{'tokens/s':>11}{'time vs plain-all':>19}{'vs plain-eligible':>19}")
    for name, r in results.items():
        print(
            f"{name:<22}{r['seconds']:>9.3f}{r['tokens_per_s']:>11,.0f}{(r['seconds'] / base - 1) * 100:>+18.1f}%"
            f"{(r['seconds'] / eligible_only - 1) * 100:>+18.1f}%"
        )
    summary = {"args": vars(args), "tokens_per_pass": tokens, "padded_positions": positions, "results": results}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
