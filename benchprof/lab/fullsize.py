"""The full-size path on a GPU (`scripts/gpu_fullsize.sh`): a recommended profile on the full validation sets, one
benchmark through both backends, every stage timed.

    scripts/gpu_fullsize.sh [--config configs/smollm2-power.yml] [--out outputs-fullsize] [--limit N]
                            [--device cuda] [--parity arc_easy]

1. The config's pipeline (data, finetune where its score needs one, extract, evaluate, aggregate) with every
   benchmark's limit removed, so each real benchmark is scored on its whole validation set (`--limit N` scores the
   first N documents of each instead: the CPU check), on `--device`, into `--out`; each stage's wall time.
2. The original model on one benchmark (`--parity`) through the vllm backend beside hf's documents from step 1:
   per-document acc equal or not, and the largest log-likelihood difference. Where vllm does not import, it says
   why in the figures instead.
3. `<out>/fullsize.json` and one table: stage times, documents and variants scored, seconds per document and per
   variant (what docs/research/performance.md sets beside the paper's scale).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from benchprof.core.config import Config

ROOT = Path(__file__).resolve().parents[2]


def full_config(config: str | Path, out: Path, limit: int | None, device: str) -> Config:
    """The config with every benchmark's limit removed (or set to `limit`), evaluated on `device` into `out`."""
    from benchprof.core.loader import load_config

    cfg = load_config(config)
    limits = {b: limit for b in cfg.evals.benchmarks} if limit else {}
    settings: dict[str, Any] = {"output_dir": str(out.resolve())}
    if device == "cuda":
        settings["cuda_visible_devices"] = "0"
    cfg = cfg.with_overrides(settings=settings, evals={"device": device, "limits": limits})
    cfg.evals.limit = None
    return cfg


def timed_stages(cfg: Config) -> dict[str, float]:
    """Each stage of the pipeline run in turn, as `benchprof run` runs them (its own log each), timed."""
    from benchprof.core.config import NEURON_SCORES
    from benchprof.core.console import quiet
    from benchprof.core.layout import Layout
    from benchprof.stages.aggregate import aggregate
    from benchprof.stages.data import write_data
    from benchprof.stages.evaluate import evaluate
    from benchprof.stages.extract import extract
    from benchprof.stages.finetune import finetune
    from benchprof.stages.preflight import needed_abilities

    stages = {
        "data": lambda: write_data(cfg, needed_abilities(cfg)),
        "finetune": (lambda: finetune(cfg)) if cfg.extract.score not in NEURON_SCORES else None,
        "extract": lambda: extract(cfg),
        "evaluate": lambda: evaluate(cfg),
        "aggregate": lambda: aggregate(cfg),
    }
    seconds = {}
    for name, work in stages.items():
        if work is None:
            continue
        started = time.time()
        with quiet(name, [Layout(cfg.output_root, spec.tag).log_file(name) for spec in cfg.models]):
            work()
        seconds[name] = round(time.time() - started, 1)
    return seconds


def scored(cfg: Config) -> tuple[int, int]:
    """(documents scored, variants scored, the original model included) over the config's evaluation jobs."""
    from benchprof.core.layout import Layout
    from benchprof.core.results import iter_samples
    from benchprof.stages.eval_jobs import job_list

    layout = Layout(cfg.output_root, cfg.models[0].tag)
    jobs = job_list(cfg)
    documents = sum(sum(1 for _ in iter_samples(layout.samples_file(j.variant, j.benchmark))) for j in jobs)
    return documents, len({j.variant for j in jobs})


def backend_parity(cfg: Config, benchmark: str, out: Path) -> dict[str, Any]:
    """The original model on `benchmark` through the vllm backend against hf's samples (from the profile): per
    document, the same acc, and the largest log-likelihood difference. {"vllm": why} where vllm does not import."""
    try:
        import vllm  # noqa: F401
    except Exception as err:  # ImportError, or a CUDA/driver error at import
        return {"vllm": f"not usable here: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"}
    from benchprof.core.layout import Layout, Variant
    from benchprof.core.results import iter_samples
    from benchprof.stages.evaluate import evaluate

    vllm_cfg = cfg.with_overrides(settings={"output_dir": str((out / "vllm").resolve())}, evals={"backend": "vllm"})
    started = time.time()
    evaluate(vllm_cfg, benchmark=benchmark, original_only=True)
    seconds = round(time.time() - started, 1)
    spec = cfg.models[0]

    def rows(config: Config) -> list[dict[str, Any]]:
        path = Layout(config.output_root, spec.tag).samples_file(Variant(), benchmark)
        return sorted((row for _, row in iter_samples(path)), key=lambda r: r["doc_id"])

    hf, vl = rows(cfg), rows(vllm_cfg)
    differences = [
        max((abs(a - b) for a, b in zip(h["loglikelihoods"], v["loglikelihoods"], strict=True)), default=0.0)
        for h, v in zip(hf, vl, strict=True)
    ]
    return {
        "benchmark": benchmark, "documents": len(hf), "vllm_seconds": seconds,
        "acc_equal": sum(h["acc"] == v["acc"] for h, v in zip(hf, vl, strict=True)),
        "max_loglik_difference": max(differences, default=0.0),
    }  # fmt: skip


def full_size(
    config: str = str(ROOT / "configs" / "smollm2-power.yml"),
    out: str = "outputs-fullsize",
    limit: int | None = None,
    device: str = "cuda",
    parity: str = "arc_easy",
) -> dict[str, Any]:
    """Run the config's profile on the full validation sets, one benchmark through both backends, and time it
    (module docstring); writes <out>/fullsize.json and prints one table.

    Arguments:
        config: the profile's config (default configs/smollm2-power.yml, the recommended one on SmolLM2).
        out: the outputs folder (every result of this run, and fullsize.json).
        limit: score the first N documents of each benchmark instead of the whole set (a quick check).
        device: cuda, or cpu for the check on a machine without a GPU.
        parity: the benchmark scored through both backends.
    """
    folder = Path(out)
    cfg = full_config(config, folder, limit, device)
    started = time.time()
    seconds = timed_stages(cfg)
    documents, variants = scored(cfg)
    figures = {
        "config": Path(config).name, "device": device, "limit": limit, "stage_seconds": seconds,
        "total_seconds": round(time.time() - started, 1), "documents": documents, "variants": variants,
        "seconds_per_document": seconds["evaluate"] / documents if documents else None,
        "seconds_per_variant": seconds["evaluate"] / variants if variants else None,
        "parity": backend_parity(cfg, parity, folder),
    }  # fmt: skip
    (folder / "fullsize.json").write_text(json.dumps(figures, indent=1) + "\n")
    print("| stage | seconds |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in seconds.items()))
    print(f"{documents} documents over {variants} variants; parity: {figures['parity']}; {folder / 'fullsize.json'}")
    return figures
