"""In-memory ablation (benchprof) against a checkpoint per variant (the authors' code), on the tiny model.

A k-sweep of 6 k x top/bottom/random = 18 variants of one ability, each scored on one local
benchmark with lm-eval (plus the original model):

  (a) benchprof: `benchprof evaluate`: one model load; per variant zero the region in place,
      evaluate, restore.
  (b) the authors' way: save a full checkpoint per variant (from one base load, as generously as
      possible), then per variant load that checkpoint from disk into a fresh lm-eval model and evaluate.

Both use the same masks, data, lm-eval settings and batch size, and write the same result files;
(b) also writes the checkpoints. Reports wall time and bytes written for each and the ratios, and
checks that both give the same per-document results.

    .venv/bin/python perf/evaluate.py [--docs 40] [--limit 40] [--hidden 64] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

for _key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_EVALUATE_OFFLINE"):
    os.environ.setdefault(_key, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ABILITY = "Spatial_Reasoning"
K_VALUES = [0.00001, 0.00004, 0.00016, 0.00064, 0.00256, 0.01024]  # the paper's sweep
REGIONS = ["top", "bottom", "random"]


def device() -> str:
    """cuda when a GPU is visible (the figures are then the GPU's), else cpu."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def write_data(folder: Path, n_test: int) -> None:
    where = ["left", "right", "above", "below"]
    things = ["cup", "box", "lamp", "book", "chair", "desk", "plant", "clock"]
    folder.mkdir(parents=True)
    for split, n in (("train", 8), ("test", n_test)):
        rng = random.Random(split)
        with open(folder / f"{split}.jsonl", "w") as f:
            for i in range(n):
                a, b = rng.sample(things, 2)
                label = rng.randrange(4)
                f.write(
                    json.dumps(
                        {
                            "id": f"{split}-{i}",
                            "ability": ABILITY,
                            "question_type": "spatial_relation",
                            "context": f"The {a} is {where[label]} of the {b}.",
                            "question": f"Where is the {a}?",
                            "options": where,
                            "answer": where[label],
                            "label": label,
                        }
                    )
                    + "\n"
                )


def write_masks(model_dir: Path, layout) -> None:
    """Regions by |w| over the MLP weights (top/bottom) or uniform (random): stand-ins for extract."""
    import torch
    from safetensors.torch import save_file

    from benchprof.core.modeling import eligible_names, fingerprint, load_model, num_layers, total_params

    model, _ = load_model(str(model_dir), dtype="float32")
    params = dict(model.named_parameters())
    names = eligible_names(params, "mlp", num_layers(model))
    scores = torch.cat([params[n].detach().abs().reshape(-1) for n in names])
    meta = {"fingerprint": fingerprint(model), "total_params": str(total_params(model)), "ability": ABILITY}
    for k in K_VALUES:
        n = int(k * total_params(model))
        for region in REGIONS:
            if region == "random":
                chosen = torch.randperm(scores.numel(), generator=torch.Generator().manual_seed(0))[:n]
            else:
                chosen = torch.topk(scores, n, largest=region == "top").indices
            chosen, offset, indices = chosen.sort().values, 0, {}
            for name in names:
                size = params[name].numel()
                indices[name] = (chosen[(chosen >= offset) & (chosen < offset + size)] - offset).to(torch.int64)
                offset += size
            path = layout.mask_file(ABILITY, k, region)
            path.parent.mkdir(parents=True, exist_ok=True)
            save_file(indices, str(path), metadata={**meta, "k": str(k), "region": region, "n": str(n)})


def tree_bytes(*folders: Path) -> int:
    return sum(p.stat().st_size for f in folders if f.exists() for p in f.rglob("*") if p.is_file())


def per_variant_checkpoints(cfg, layout, out: Path) -> None:
    """The authors' loop: load, ablate, save a checkpoint, reload it from disk, evaluate."""
    from lm_eval.models.huggingface import HFLM

    from benchprof.core.layout import Layout, Variant
    from benchprof.core.modeling import fingerprint, load_model
    from benchprof.stages import tasks
    from benchprof.stages.damage import load_region, save_checkpoint
    from benchprof.stages.eval_jobs import Job, JobInputs
    from benchprof.stages.evaluate import run_job

    spec = cfg.models[0]
    include_path, mapping = tasks.write_tasks(cfg)
    task_manager = tasks.task_manager(cfg, include_path)
    results = Layout(out, spec.tag)
    job_inputs = JobInputs(cfg, spec, layout, include_path, mapping, "hf", cfg.evals.limit)
    variants = [Variant(ABILITY, k, r) for k in K_VALUES for r in REGIONS]
    # the damage step, charitably with one base load for all variants
    base, tokenizer = load_model(*cfg.model_source(spec), dtype="float32")
    fp = fingerprint(base)
    for variant in variants:
        region = load_region(base, layout.mask_file(*variant.parts()), fp)
        save_checkpoint(base, tokenizer, region, out / "checkpoints" / variant.label(), {"variant": variant.label()})
    del base
    # the evaluation step: a fresh model from disk per variant
    for variant in [Variant()] + variants:
        path = cfg.model_source(spec)[0] if variant.is_original else out / "checkpoints" / variant.label()
        lm = HFLM(
            pretrained=str(path),
            tokenizer=str(path),
            batch_size=cfg.settings.eval_batch_size,
            device=device(),
            dtype="float32",
        )
        job = Job(variant, ABILITY)
        run_job(cfg, spec, results, job, job_inputs(job), lm, mapping, task_manager, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=40, help="test documents in the benchmark")
    parser.add_argument("--limit", type=int, default=40, help="documents scored per job")
    parser.add_argument("--hidden", type=int, default=64, help="tiny model hidden size (64: 0.25 M params)")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = parser.parse_args()

    import torch
    import yaml

    from benchprof.core.layout import Layout, Variant
    from benchprof.core.loader import load_config
    from benchprof.lab.tinymodel import make_tiny_model
    from benchprof.stages import evaluate as evaluate_module

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    work = args.keep or Path(tempfile.mkdtemp(prefix="benchprof-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    model_dir = make_tiny_model(
        work / "model", seed=0, hidden_size=args.hidden, intermediate_size=int(args.hidden * 2.6875)
    )
    write_data(work / "spatial", args.docs)
    config = work / "config.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "settings": {"k_values": K_VALUES, "eval_batch_size": 8, "output_dir": "outputs"},
                "models": [{"name": str(model_dir), "tag": "tiny", "dtype": "float32"}],
                "datasets": [{"name": ABILITY, "path": str(work / "spatial")}],
                "evals": {"benchmarks": [ABILITY], "num_fewshot": [0], "limit": args.limit, "device": device()},
            }
        )
    )
    cfg = load_config(config)
    layout = Layout(cfg.output_root, "tiny")
    write_masks(model_dir, layout)
    n_params = sum(p.stat().st_size for p in model_dir.glob("*.safetensors"))

    started = time.time()
    evaluate_module.evaluate(load_config(config), force=True)
    in_memory_s = time.time() - started
    in_memory_bytes = tree_bytes(*layout.model_dir.glob("*/eval"))

    authors = work / "authors"
    shutil.rmtree(authors, ignore_errors=True)
    started = time.time()
    per_variant_checkpoints(cfg, layout, authors)
    authors_s = time.time() - started
    authors_bytes = tree_bytes(authors)

    variants = [Variant()] + [Variant(ABILITY, k, r) for k in K_VALUES for r in REGIONS]
    mine = [layout.samples_file(v, ABILITY).read_text() for v in variants]
    theirs = [Layout(authors, "tiny").samples_file(v, ABILITY).read_text() for v in variants]
    same = sum(a == b for a, b in zip(mine, theirs))

    print(
        f"\n{len(variants) - 1} variants + original, {args.limit} docs each, tiny model "
        f"({n_params / 1e6:.2f} MB of weights), lm-eval, CPU, {torch.get_num_threads()} threads"
    )
    print(f"{'approach':<44} {'wall s':>8} {'bytes written':>14}")
    print(f"{'(a) benchprof: 1 load, apply/evaluate/restore':<44} {in_memory_s:>8.1f} {in_memory_bytes:>14,}")
    print(f"{'(b) checkpoint per variant, reload, evaluate':<44} {authors_s:>8.1f} {authors_bytes:>14,}")
    print(
        f"ratio (b)/(a): wall {authors_s / in_memory_s:.2f}x, bytes {authors_bytes / in_memory_bytes:.1f}x; "
        f"per-document results identical for {same}/{len(variants)} variants"
    )
    if not args.keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
