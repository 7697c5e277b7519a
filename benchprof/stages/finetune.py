"""Stage `finetune`: importance I_a(θ) = |θ · Σ_batches ∂L/∂θ| of every eligible weight (the method's step 1, README).

One pass over the ability's training split with no optimizer: gradients are summed, never applied.
L = (1/N) Σ over the split's loss tokens of −log p(token | earlier), N the split's loss-token count
(all tokens after the first, or with `loss_on: answer` the tokens of the answer text itself, see
prompts.encode_record): each batch backpropagates its token-loss sum / N, so the summed gradient is
∂L/∂θ of one loss whatever the batching, padding or number of processes. (The authors sum per-batch
means: a constant factor when batches hold equal token counts.) How gradients are summed across
batches and processes is sharding.py's job.
Output: importance.safetensors, one fp32 tensor per eligible weight of every decoder layer
(front/back_removal apply when regions are extracted), metadata fingerprint, total_params, n_layers,
scope, ability, model, dtype, loss_on, normalization, n_samples, n_loss_tokens; then manifest.json.
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from benchprof import BenchprofError
from benchprof.core.config import FP16_REFUSED, FP16_WHY, Config, FinetuneSettings, ModelSpec
from benchprof.core.layout import Layout, model_folders
from benchprof.core.selection import select
from benchprof.core.storage import clear_manifest, file_hash, is_current, save_tensors, value_hash, write_manifest

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from benchprof.stages.sharding import Batch

IGNORE = -100  # label of a token that is not in the loss (padding, or the prompt with loss_on: answer)


def encode_batches(
    tokenizer: PreTrainedTokenizerBase,
    records: list[dict[str, Any]],
    keys: list[str],
    max_length: int,
    batch_size: int,
    loss_on: str,
) -> tuple[list[Batch], int]:
    """Right-padded batches of (input_ids, attention_mask, labels), and the split's loss-token count N."""
    import torch

    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    from benchprof.core.prompts import encode_record

    batches, n_loss_tokens = [], 0
    for start in range(0, len(records), batch_size):
        encoded = [encode_record(tokenizer, r, keys, max_length) for r in records[start : start + batch_size]]
        width = max(len(ids) for ids, _, _ in encoded)
        input_ids = torch.full((len(encoded), width), pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(encoded), width), dtype=torch.long)
        labels = torch.full((len(encoded), width), IGNORE, dtype=torch.long)
        for row, (ids, answer_start, answer_end) in enumerate(encoded):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            attention_mask[row, : len(ids)] = 1
            first, last = (answer_start, answer_end) if loss_on == "answer" else (0, len(ids))
            if first < 0:
                raise BenchprofError("finetune.loss_on: answer needs a fast tokenizer (its character offsets)")
            labels[row, first:last] = input_ids[row, first:last]
        n_loss_tokens += int((labels[:, 1:] != IGNORE).sum())  # position 0 is never predicted
        batches.append({"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels})
    return batches, n_loss_tokens


def batch_loss(model: torch.nn.Module, batch: Batch, n_loss_tokens: int) -> torch.Tensor:
    """This batch's share of L = (1/N) sum over loss tokens of -log p(next token)."""
    import torch.nn.functional as F

    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    return (
        F.cross_entropy(
            logits[:, :-1].flatten(0, 1).float(), batch["labels"][:, 1:].flatten(), ignore_index=IGNORE, reduction="sum"
        )
        / n_loss_tokens
    )


def importance_score(grad_sum: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """I_a(θ_i) = |θ_i · Σ_b ∂L_b/∂θ_i| in fp32, in place over the gradient sum, moved to the CPU."""
    return grad_sum.mul_(theta).abs_().cpu()


def enable_checkpointing(model: PreTrainedModel) -> None:
    """Activation checkpointing of every decoder layer, with dropout kept off.

    transformers checkpoints a layer only while that layer module is in training mode, so only the
    layer modules themselves (not their children, which hold any dropout) are switched to training.
    """
    from transformers.modeling_layers import GradientCheckpointingLayer

    model.activation_checkpointing_enable({"use_reentrant": False})
    model.config.use_cache = False
    for module in model.modules():
        if isinstance(module, GradientCheckpointingLayer):
            module.training = True


def data_identity(cfg: Config, ability: str, records: list[dict[str, Any]]) -> dict[str, str]:
    """What the training split is: its file's hash, or a hash of the records for a hub dataset.

    Content only, not where it lives: a project moved to another folder keeps its importance.
    """
    from benchprof.core.layout import data_file
    from benchprof.stages.data import ability_folder, is_hub_id

    if not is_hub_id(cfg, ability):
        path = data_file(ability_folder(cfg, ability), "train")
        if path.is_file():
            return {"source": "file", "hash": file_hash(path)}
    return {"source": cfg.dataset(ability).path, "hash": value_hash(records)}


def importance_inputs(
    cfg: Config,
    ability: str,
    settings: FinetuneSettings,
    records: list[dict[str, Any]],
    batch_size: int,
    model_fingerprint: str | None,
    dtype: str | None,
) -> dict[str, Any]:
    """What an importance file is computed from (its manifest's inputs; `benchprof status` rebuilds them)."""
    return {
        "stage": "finetune",
        "ability": ability,
        "fingerprint": model_fingerprint,
        "data": data_identity(cfg, ability, records),
        "keys": cfg.dataset(ability).keys(),
        "scope": settings.scope,
        "loss_on": settings.loss_on,
        "max_samples": settings.max_samples,
        "n_samples": len(records),
        "batch_size": batch_size,
        "max_length": settings.max_length,
        "dtype": dtype,
        "normalization": "split_token_mean",
    }


@dataclass(frozen=True)
class Processes:
    """This process's place in the run: its rank of world_size, its device, whether it started the group."""

    rank: int
    world_size: int
    device: str
    started_group: bool


def start_processes(strategy: str) -> Processes:
    """Check the launcher, join the process group (started here for a sharded strategy) and pick the device."""
    import torch

    from benchprof.core.modeling import pick_device
    from benchprof.stages import sharding

    sharding.check_launcher(strategy, int(os.environ.get("WORLD_SIZE", "1")))
    if strategy != "ddp":
        import torch.distributed as dist

        started_group = sharding.start_process_group()
        rank, world_size = dist.get_rank(), dist.get_world_size()
    else:
        rank, world_size, started_group = sharding.distributed_context()
    device = pick_device()
    if device == "cuda":
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
        torch.cuda.set_device(device)
    return Processes(rank, world_size, device, started_group)


def widen_fp16(net: PreTrainedModel, tag: str, rank: int) -> None:
    """An fp16 checkpoint loaded with dtype auto runs in bf16 where supported, else fp32."""
    import torch

    if next(net.parameters()).dtype == torch.float16:
        bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
        wider = torch.bfloat16 if bf16 else torch.float32
        torch.nn.Module.to(net, wider)
        if rank == 0:
            print(f"finetune: {tag} is an fp16 checkpoint; importance runs in {wider} ({FP16_WHY})")


@dataclass(frozen=True)
class ModelRun:
    """One model ready for the pass, with what its importance files record about it."""

    tag: str
    layout: Layout
    tokenizer: PreTrainedTokenizerBase
    model: torch.nn.Module  # as the strategy runs it: the loaded model itself under ddp
    fingerprint: str
    n_layers: int
    n_params: int
    dtype: str
    eligible: list[str]


def load_for_importance(cfg: Config, spec: ModelSpec, processes: Processes) -> ModelRun:
    """Load, fingerprint and shard one model, refusing fp16 and a scope with no weights in it."""
    from benchprof.core.modeling import checkpoint_fingerprint, eligible_names, load_model, num_layers, total_params
    from benchprof.stages import sharding

    settings = cfg.finetune
    layout = Layout(cfg.output_root, spec.tag)
    model_dtype = settings.dtype if settings.dtype != "auto" else spec.dtype
    if model_dtype == "float16":
        raise BenchprofError(FP16_REFUSED)
    name, tokenizer_name = cfg.model_source(spec)
    sharded = settings.strategy != "ddp"
    # a sharded model is loaded on the CPU and moved to the device shard by shard
    loaded_at = time.time()
    net, tokenizer = load_model(name, tokenizer_name, dtype=model_dtype, device="cpu" if sharded else processes.device)
    widen_fp16(net, spec.tag, processes.rank)
    if settings.gradient_checkpointing:
        enable_checkpointing(net)
    # before sharding: needs every full tensor. Rank 0 alone reads and writes the folder's records of its
    # checkpoint (found again under another path) and its fingerprint; the other ranks fingerprint the weights
    # they loaded, hashing no file
    model_fingerprint = checkpoint_fingerprint(
        name, layout.model_dir if processes.rank == 0 else None, net, loaded_at=loaded_at
    )
    n_layers, n_params = num_layers(net), total_params(net)
    net_dtype = str(next(net.parameters()).dtype)
    eligible = eligible_names([n for n, _ in net.named_parameters()], settings.scope, n_layers)
    if not eligible:
        raise BenchprofError(
            f"finetune.scope: model {spec.name!r} has no {settings.scope} weights in layers named '...layers.<i>...'"
        )
    prepared = sharding.prepare(settings.strategy, net, eligible, processes.device)
    return ModelRun(spec.tag, layout, tokenizer, prepared, model_fingerprint, n_layers, n_params, net_dtype, eligible)


@dataclass
class Tally:
    """What the stage has done so far, for its closing summary line."""

    written: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    tokens: int = 0


def score_model(
    cfg: Config, spec: ModelSpec, abilities: list[str], processes: Processes, tally: Tally, force: bool
) -> None:
    """Importance of one model for every ability whose file is missing or stale (all of them with force)."""
    import torch

    from benchprof.stages.data import load_split

    settings, batch_size = cfg.finetune, cfg.settings.train_batch_size
    run = load_for_importance(cfg, spec, processes)
    for ability_name in abilities:
        records = load_split(cfg, ability_name, "train")
        records = records[: settings.max_samples] if settings.max_samples else records
        inputs = importance_inputs(cfg, ability_name, settings, records, batch_size, run.fingerprint, run.dtype)
        if not force and is_current(run.layout.importance_output(ability_name), inputs):
            tally.skipped.append(ability_name)
            continue
        tally.tokens += score_ability(cfg, run, processes, ability_name, records, inputs)
        tally.written.append(ability_name)
        if processes.world_size > 1:
            torch.distributed.barrier()


def score_ability(
    cfg: Config,
    run: ModelRun,
    processes: Processes,
    ability_name: str,
    records: list[dict[str, Any]],
    inputs: dict[str, Any],
) -> int:
    """Sum one ability's gradients, write its importance (rank 0), and return the batches' token count."""
    from benchprof.stages import sharding

    settings, rank = cfg.finetune, processes.rank
    ability_started = time.time()
    batches, n_loss_tokens = encode_batches(
        run.tokenizer,
        records,
        cfg.dataset(ability_name).keys(),
        settings.max_length,
        cfg.settings.train_batch_size,
        settings.loss_on,
    )
    if n_loss_tokens == 0:
        raise BenchprofError(
            f"{ability_name}: no loss tokens (loss_on={settings.loss_on}; is "
            "'answer' in the dataset's key, and max_length long enough?)"
        )
    loss = functools.partial(batch_loss, n_loss_tokens=n_loss_tokens)
    label = f"importance {ability_name}" if rank == 0 else ""  # one labelled bar per ability, on rank 0
    sums = sharding.gradient_sums(
        settings.strategy, run.model, batches, loss, run.eligible, rank, processes.world_size, progress=label
    )
    # every rank walks the sums (the sharded strategies gather collectively); rank 0 keeps them
    importance = {name: importance_score(g, theta) for name, g, theta in sums if rank == 0}
    tokens = sum(int(b["attention_mask"].sum()) for b in batches)
    if rank == 0:
        out_dir = run.layout.importance_dir(ability_name)
        metadata = importance_metadata(run, settings, ability_name, inputs, n_loss_tokens)
        clear_manifest(out_dir)  # no old manifest may vouch for the new file if killed below
        save_tensors(run.layout.importance_file(ability_name), importance, metadata)
        write_manifest(
            out_dir,
            inputs,
            started=ability_started,
            extra={
                "n_loss_tokens": n_loss_tokens,
                "world_size": processes.world_size,
                "strategy": settings.strategy,
                "gradient_checkpointing": settings.gradient_checkpointing,
                "eligible_tensors": len(run.eligible),
                "eligible_params": sum(t.numel() for t in importance.values()),
            },
        )
    return tokens


def importance_metadata(
    run: ModelRun, settings: FinetuneSettings, ability_name: str, inputs: dict[str, Any], n_loss_tokens: int
) -> dict[str, str]:
    """The importance file's metadata: the model, split and loss its scores come from."""
    return {
        "fingerprint": run.fingerprint,
        "total_params": str(run.n_params),
        "n_layers": str(run.n_layers),
        "scope": settings.scope,
        "ability": ability_name,
        "model": run.tag,
        "dtype": inputs["dtype"],
        "loss_on": settings.loss_on,
        "normalization": "split_token_mean",
        "n_samples": str(inputs["n_samples"]),
        "n_loss_tokens": str(n_loss_tokens),
    }


def finetune(
    cfg: Config,
    ability: str | None = None,
    model: str | None = None,
    scope: str | None = None,
    loss_on: str | None = None,
    max_samples: int | None = None,
    batch_size: int | None = None,
    max_length: int | None = None,
    dtype: str | None = None,
    gradient_checkpointing: bool | None = None,
    strategy: str | None = None,
    force: bool = False,
) -> None:
    """Importance scores I = |theta * sum over batches of dL/dtheta| for every eligible weight.

    No optimizer steps: gradients of the token-mean loss over the whole training split are summed in
    fp32. Run with `torchrun --nproc_per_node G -m benchprof finetune ...` (or accelerate launch) to
    split the batches over G processes; the result is the same as one process's. A model too large
    for one device: `--strategy fsdp` (torch FSDP2) or `--strategy deepspeed` (ZeRO-3), same launchers.

    Arguments:
        cfg: the config (on the command line: the path of config.yml).
        ability: only this ability (or a comma-separated list).
        model: only this model (name or tag).
        scope: eligible weights: mlp (default), attention or all linear weights.
        loss_on: all tokens (default, as the authors) or answer tokens only.
        max_samples: use at most this many training items (the first ones).
        batch_size: items per forward/backward; default settings.train_batch_size.
        max_length: truncate items to this many tokens.
        dtype: model dtype for the pass (auto, float32, bfloat16); gradients accumulate in fp32.
        gradient_checkpointing: trade compute for activation memory.
        strategy: ddp (a model copy per process, default), fsdp or deepspeed (parameters and gradients
            sharded over the processes); all three give the same scores.
        force: recompute even when the manifest matches.
    """
    import torch

    cfg = cfg.with_overrides(
        finetune={
            "scope": scope,
            "loss_on": loss_on,
            "max_samples": max_samples,
            "max_length": max_length,
            "dtype": dtype,
            "gradient_checkpointing": gradient_checkpointing,
            "strategy": strategy,
        },
        settings={"train_batch_size": batch_size},
    )
    abilities = select(ability, cfg.abilities(), "--ability")
    processes = start_processes(cfg.finetune.strategy)
    started = time.time()
    tally = Tally()
    try:
        for spec in cfg.selected_models(model):
            score_model(cfg, spec, abilities, processes, tally, force)
    finally:
        if processes.started_group:
            torch.distributed.destroy_process_group()
    seconds = time.time() - started
    if processes.rank == 0:
        rate = f", {tally.tokens / max(seconds, 1e-9):,.0f} tokens/s" if tally.written else ""
        print(
            f"finetune: wrote importance for {len(tally.written)} ability run(s), {len(tally.skipped)} up to date, "
            f"under {model_folders(cfg.output_root, [s.tag for s in cfg.selected_models(model)])}/<ability>/importance "
            f"in {seconds:.1f}s{rate}"
        )
