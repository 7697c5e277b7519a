"""Stage `finetune`: gradient importance I_a(theta) = |theta * sum over batches of dL/dtheta| (DESIGN.md 1.1).

One pass over the ability's training split, with no optimizer anywhere: gradients are accumulated,
never applied.

- Loss. L = (1/N) * sum over every loss token t of the whole split of -log p(token_t | earlier),
  N = the number of loss tokens in the split (all tokens after the first, or only the answer's
  tokens with `loss_on: answer`). Each batch backpropagates its token-loss *sum* divided by the
  split-wide N, so the accumulated gradient is dL/dtheta of one well-defined loss and does not
  depend on the batch size, the padding or the number of processes. The authors sum per-batch
  *mean* losses instead; that differs from ours by a constant factor (the number of batches)
  whenever batches hold equal token counts, so rankings agree then, and ours stays comparable
  across abilities of different sizes.
- Gradients only where needed: every non-eligible parameter has `requires_grad` off. A
  post-accumulate-grad hook adds each eligible weight's gradient into an fp32 buffer and frees it,
  so a bf16 model accumulates in fp32 (each batch's gradient is still computed in the model's dtype).
- Data parallel: launched with torchrun or `accelerate launch` (WORLD_SIZE > 1), rank r takes
  batches r, r + W, r + 2W, ... of the same global batching, accumulates locally, and the sums are
  all-reduced once at the end; rank 0 writes. The result equals a one-process run's.
- Sharded (`finetune.strategy` / `--strategy`), for a model that does not fit on one device:
  `fsdp` shards parameters and gradients with torch FSDP2 (`fully_shard`, one unit per decoder
  layer); each rank adds its gradient shard into a local fp32 shard after every backward, and the
  full sum is gathered once per tensor at the end. `deepspeed` uses ZeRO-3 with an optimizer that is
  never stepped (ZeRO-3 partitions gradients only when it has one): ZeRO-3 adds every backward's
  gradient partition into its fp32 buffer without a step (checked against deepspeed 0.19's
  stage3.partition_grads), and `safe_get_full_grad` gathers each tensor's sum once at the end.
  ZeRO-1/2 are refused: they keep only the last micro-batch's gradient unless the optimizer steps.
  Both need every rank to run the same number of forward passes, so ranks with fewer batches run
  a zero-weighted extra one.
- Output: `<ability>/importance/importance.safetensors`, one fp32 tensor per eligible weight of
  *every* decoder layer (front/back_removal apply only when regions are extracted), keyed by the
  model's parameter name, with metadata fingerprint, total_params, n_layers, scope, ability, model,
  dtype, loss_on, normalization, n_samples, n_loss_tokens; then manifest.json.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

from . import BenchprofError
from .config import Config, FinetuneSettings, load_config, select
from .layout import Layout
from .storage import clear_manifest, file_hash, is_current, save_tensors, value_hash, write_manifest

IGNORE = -100  # label of a token that is not in the loss (padding, or the prompt with loss_on: answer)


def encode_batches(
    tokenizer: Any, records: list[dict[str, Any]], keys: list[str], max_length: int, batch_size: int, loss_on: str
) -> tuple[list[dict[str, Any]], int]:
    """Right-padded batches of (input_ids, attention_mask, labels), and the split's loss-token count N."""
    import torch

    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    from .prompts import encode_record

    batches, n_loss_tokens = [], 0
    for start in range(0, len(records), batch_size):
        encoded = [encode_record(tokenizer, r, keys, max_length) for r in records[start : start + batch_size]]
        width = max(len(ids) for ids, _ in encoded)
        input_ids = torch.full((len(encoded), width), pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(encoded), width), dtype=torch.long)
        labels = torch.full((len(encoded), width), IGNORE, dtype=torch.long)
        for row, (ids, answer_start) in enumerate(encoded):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            attention_mask[row, : len(ids)] = 1
            first = answer_start if loss_on == "answer" else 0
            labels[row, first : len(ids)] = input_ids[row, first : len(ids)]
        n_loss_tokens += int((labels[:, 1:] != IGNORE).sum())  # position 0 is never predicted
        batches.append({"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels})
    return batches, n_loss_tokens


def distributed_context() -> tuple[int, int, bool]:
    """(rank, world size, whether this call started the process group) under torchrun/accelerate."""
    import torch
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size(), False
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
        return dist.get_rank(), dist.get_world_size(), True
    return 0, 1, False


STRATEGIES = ("ddp", "fsdp", "deepspeed")


def batch_loss(model: Any, batch: dict[str, Any], n_loss_tokens: int) -> Any:
    """This batch's share of L = (1/N) sum over loss tokens of -log p(next token)."""
    import torch.nn.functional as F

    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    return (
        F.cross_entropy(
            logits[:, :-1].flatten(0, 1).float(), batch["labels"][:, 1:].flatten(), ignore_index=IGNORE, reduction="sum"
        )
        / n_loss_tokens
    )


def rank_batches(batches: list[dict[str, Any]], rank: int, world_size: int) -> list[tuple[dict[str, Any], float]]:
    """(batch, weight) pairs of rank r: batches r::W, padded with zero-weighted repeats so that every
    rank runs the same number of forwards (sharded strategies gather parameters collectively)."""
    mine = [(batch, 1.0) for batch in batches[rank::world_size]]
    rounds = -(-len(batches) // world_size)
    return mine + [(batches[0], 0.0)] * (rounds - len(mine))


def check_launcher(strategy: str, world_size: int) -> None:
    """One-line errors for a strategy that cannot run here, before any model is loaded."""
    import importlib.util

    if strategy not in STRATEGIES:
        raise BenchprofError(f"--strategy: {strategy!r} is not one of {', '.join(STRATEGIES)}")
    if strategy == "deepspeed" and importlib.util.find_spec("deepspeed") is None:
        raise BenchprofError(
            "finetune.strategy: deepspeed is not installed (pip install deepspeed), or use fsdp, which needs only torch"
        )
    stage = os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE")
    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true":
        if strategy != "deepspeed":
            raise BenchprofError(
                f"accelerate launch uses DeepSpeed but finetune.strategy is {strategy}; "
                "pass --strategy deepspeed (or launch with configs/accelerate_ddp.yaml)"
            )
        if stage not in (None, "3"):
            raise BenchprofError(
                f"accelerate config: zero_stage {stage} cannot read gradients without an "
                "optimizer step; use zero_stage 3 (configs/accelerate_deepspeed.yaml)"
            )
    if os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true" and strategy != "fsdp":
        raise BenchprofError(f"accelerate launch uses FSDP but finetune.strategy is {strategy}; pass --strategy fsdp")
    if strategy != "ddp" and world_size == 1 and _cuda_count() > 1:
        raise BenchprofError(
            f"--strategy {strategy} shards the model over processes, but this is one process "
            f"on a {_cuda_count()}-GPU machine; launch with `torchrun --nproc_per_node "
            f"{_cuda_count()} -m benchprof finetune ...` or `accelerate launch`"
        )


def _cuda_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def start_process_group() -> bool:
    """A process group for the sharded strategies, also for a single process run without a launcher."""
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return False
    for key, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "127.0.0.1")):
        os.environ.setdefault(key, value)
    if "MASTER_PORT" not in os.environ:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            os.environ["MASTER_PORT"] = str(s.getsockname()[1])
    dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
    return True


def freeze_all_but(model: Any, eligible: list[str]) -> None:
    wanted = set(eligible)
    for name, p in model.named_parameters():
        p.requires_grad_(name in wanted)
        p.grad = None


def shard_fsdp(model: Any, eligible: list[str], device: str) -> Any:
    """FSDP2: one shard unit per decoder layer plus the root, on a 1-D mesh of all ranks."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from transformers.modeling_layers import GradientCheckpointingLayer

    freeze_all_but(model, eligible)
    mesh = init_device_mesh(torch.device(device).type, (dist.get_world_size(),))
    policy = MixedPrecisionPolicy(reduce_dtype=torch.float32)  # reduce-scatter in fp32 even for a bf16 model
    for module in model.modules():
        if isinstance(module, GradientCheckpointingLayer):
            fully_shard(module, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    return model


def importance_fsdp(
    model: Any,
    batches: list[dict[str, Any]],
    n_loss_tokens: int,
    eligible: list[str],
    rank: int,
    world_size: int,
    progress: bool = False,
) -> dict[str, Any]:
    """I = |theta * sum g| under FSDP2: sharded fp32 sums, each tensor gathered once at the end.

    Returns the full fp32 scores on CPU on rank 0, an empty dict on the other ranks.
    """
    import torch
    from torch.distributed.tensor import DTensor
    from tqdm import tqdm

    params = dict(model.named_parameters())
    device = params[eligible[0]].to_local().device
    shard_sums = {name: torch.zeros_like(params[name].to_local(), dtype=torch.float32) for name in eligible}
    for batch, weight in tqdm(
        rank_batches(batches, rank, world_size), desc="importance", unit="batch", disable=not progress, leave=False
    ):
        batch = {key: value.to(device) for key, value in batch.items()}
        # FSDP averages gradients over ranks; times W makes the reduce-scatter a sum
        (batch_loss(model, batch, n_loss_tokens) * (weight * world_size)).backward()
        for name in eligible:
            p = params[name]
            if p.grad is not None:
                shard_sums[name].add_(p.grad.to_local())  # this rank's shard, promoted to fp32
                p.grad = None
    importance = {}
    for name in eligible:
        p = params[name]
        grad_sum = DTensor.from_local(
            shard_sums.pop(name), p.device_mesh, p.placements, shape=p.shape, stride=p.stride()
        ).full_tensor()
        theta = p.detach().full_tensor().float()
        if rank == 0:
            importance[name] = grad_sum.mul_(theta).abs_().cpu()  # I_a(theta_i) = |theta_i * sum_b dL_b/dtheta_i|
    return importance


def deepspeed_config(dtype: Any) -> dict[str, Any]:
    """ZeRO-3, gradients accumulated and communicated in fp32, no optimizer offload, no loss scaling."""
    import torch

    return {
        "train_micro_batch_size_per_gpu": 1,  # unused: benchprof makes its own batches
        "gradient_accumulation_steps": 1,
        "zero_optimization": {"stage": 3},
        "bf16": {"enabled": dtype == torch.bfloat16},
        "data_types": {"grad_accum_dtype": "fp32"},
        "communication_data_type": "fp32",
        "zero_allow_untested_optimizer": True,
        "wall_clock_breakdown": False,
    }


def shard_deepspeed(model: Any, eligible: list[str]) -> Any:
    """A DeepSpeed ZeRO-3 engine over the model. Its SGD optimizer is never stepped: ZeRO-3 partitions
    and accumulates gradients only when it has an optimizer (without one, every rank would hold full
    gradients)."""
    import deepspeed
    import torch

    freeze_all_but(model, eligible)
    dtype = next(model.parameters()).dtype
    if dtype == torch.float16:
        raise BenchprofError(
            "--dtype float16 with --strategy deepspeed: fp16 loss scaling would leave "
            "scaled gradients; use bfloat16 or float32"
        )
    from deepspeed.accelerator import get_accelerator

    config = deepspeed_config(dtype)
    # partition the loaded model tensor by tensor: the whole model is never on one device (without
    # this, deepspeed.initialize would first move all of it to the GPU)
    deepspeed.zero.Init(module=model, config_dict_or_path=config)
    device = get_accelerator().current_device_name()
    for module in model.modules():  # buffers (rotary frequencies) are not partitioned; move them
        for name, buffer in list(module.named_buffers(recurse=False)):
            module._buffers[name] = buffer.to(device)
    params = dict(model.named_parameters())
    optimizer = torch.optim.SGD([params[name] for name in eligible], lr=0.0)
    engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
    return engine


def importance_deepspeed(
    engine: Any,
    batches: list[dict[str, Any]],
    n_loss_tokens: int,
    eligible: list[str],
    rank: int,
    world_size: int,
    progress: bool = False,
) -> dict[str, Any]:
    """I = |theta * sum g| under ZeRO-3: DeepSpeed sums each backward's gradient partition in fp32
    (no step, so nothing resets it); each tensor's sum and weight are gathered once at the end.

    Returns the full fp32 scores on CPU on rank 0, an empty dict on the other ranks.
    """
    import deepspeed
    from deepspeed.utils import safe_get_full_grad
    from tqdm import tqdm

    engine.optimizer.zero_grad()  # also resets its micro-step count: the next backward copies, later ones add
    for batch, weight in tqdm(
        rank_batches(batches, rank, world_size), desc="importance", unit="batch", disable=not progress, leave=False
    ):
        batch = {key: value.to(engine.device) for key, value in batch.items()}
        # DeepSpeed averages gradients over ranks; times W makes the reduction a sum
        engine.backward(batch_loss(engine, batch, n_loss_tokens) * (weight * world_size))
    params = dict(engine.module.named_parameters())
    importance = {}
    for name in eligible:
        grad_sum = safe_get_full_grad(params[name]).float()  # all-gather of the fp32 partitions
        with deepspeed.zero.GatheredParameters([params[name]]):
            theta = params[name].detach().float()
            if rank == 0:
                importance[name] = grad_sum.mul_(theta).abs_().cpu()  # I_a(theta_i) = |theta_i * sum_b dL_b/dtheta_i|
    engine.optimizer.zero_grad()
    return importance


def accumulate_gradients(
    model: Any,
    batches: list[dict[str, Any]],
    n_loss_tokens: int,
    eligible: list[str],
    rank: int = 0,
    world_size: int = 1,
    progress: bool = False,
) -> dict[str, Any]:
    """sum over batches of dL/dtheta (fp32) for each eligible weight; L is the split-wide token mean.

    Rank r processes batches r::world_size; with world_size > 1 the sums are all-reduced at the end
    so every rank returns the full sum. Non-eligible parameters get requires_grad off and no .grad.
    """
    import torch
    from tqdm import tqdm

    params = dict(model.named_parameters())
    wanted = set(eligible)
    for name, p in params.items():
        p.requires_grad_(name in wanted)
        p.grad = None
    device = params[eligible[0]].device
    grad_sums = {name: torch.zeros(params[name].shape, dtype=torch.float32, device=device) for name in eligible}

    def add_to(buffer: Any) -> Any:
        def hook(p: Any) -> None:
            buffer.add_(p.grad)  # in-place add promotes a bf16 gradient into the fp32 buffer
            p.grad = None  # free it at once: memory stays at one batch's gradient at most

        return hook

    handles = [params[name].register_post_accumulate_grad_hook(add_to(grad_sums[name])) for name in eligible]
    try:
        mine = batches[rank::world_size]
        for batch in tqdm(mine, desc="importance", unit="batch", disable=not progress, leave=False):
            batch = {key: value.to(device) for key, value in batch.items()}
            batch_loss(model, batch, n_loss_tokens).backward()
    finally:
        for handle in handles:
            handle.remove()
    if world_size > 1:
        import torch.distributed as dist

        for name in eligible:
            dist.all_reduce(grad_sums[name], op=dist.ReduceOp.SUM)
    return grad_sums


def importance_scores(model: Any, grad_sums: dict[str, Any]) -> dict[str, Any]:
    """I = |theta * sum g| in fp32 (in place over the gradient sums), moved to the CPU."""
    params = dict(model.named_parameters())
    out = {}
    for name in list(grad_sums):
        score = grad_sums.pop(name)
        score.mul_(params[name].detach().float()).abs_()  # I_a(theta_i) = |theta_i * sum_b dL_b/dtheta_i|
        out[name] = score.cpu()
    return out


def enable_checkpointing(model: Any) -> None:
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


def settings_from(cfg: Config, **overrides: Any) -> FinetuneSettings:
    """cfg.finetune with the command-line values that were given."""
    given = {key: value for key, value in overrides.items() if value is not None}
    settings = dataclasses.replace(cfg.finetune, **given)
    if settings.scope not in ("mlp", "attention", "all"):
        raise BenchprofError(f"--scope: {settings.scope!r} is not one of mlp, attention, all")
    if settings.loss_on not in ("all", "answer"):
        raise BenchprofError(f"--loss_on: {settings.loss_on!r} is not one of all, answer")
    if settings.dtype not in ("auto", "float32", "bfloat16", "float16"):
        raise BenchprofError(f"--dtype: {settings.dtype!r} is not one of auto, float32, bfloat16, float16")
    if settings.max_samples is not None and int(settings.max_samples) < 1:
        raise BenchprofError("--max_samples: must be >= 1")
    if int(settings.max_length) < 8:
        raise BenchprofError("--max_length: must be >= 8")
    if settings.strategy not in STRATEGIES:
        raise BenchprofError(f"--strategy: {settings.strategy!r} is not one of {', '.join(STRATEGIES)}")
    return settings


def data_identity(cfg: Config, ability: str, records: list[dict[str, Any]]) -> dict[str, str]:
    """What the training split is: its file's hash, or a hash of the records for a hub dataset.

    Content only, not where it lives: a project moved to another folder keeps its importance.
    """
    from .data import ability_folder, is_hub_id
    from .layout import data_file

    if not is_hub_id(cfg, ability):
        path = data_file(ability_folder(cfg, ability), "train")
        if path.is_file():
            return {"source": "file", "hash": file_hash(path)}
    return {"source": cfg.dataset(ability).path, "hash": value_hash(records)}


def importance_inputs(
    cfg: Config,
    model_name: str,
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
        "model": model_name,
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


def finetune(
    config: str = "config.yml",
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
        config: path of config.yml.
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

    from .data import load_split
    from .modeling import eligible_names, fingerprint, load_model, num_layers, pick_device, total_params

    cfg = load_config(config)
    settings = settings_from(
        cfg,
        scope=scope,
        loss_on=loss_on,
        max_samples=max_samples,
        max_length=max_length,
        dtype=dtype,
        gradient_checkpointing=gradient_checkpointing,
        strategy=strategy,
    )
    batch_size = int(batch_size or cfg.settings.train_batch_size)
    if batch_size < 1:
        raise BenchprofError("--batch_size: must be >= 1")
    abilities = select(ability, cfg.abilities(), "--ability")
    specs = [cfg.model(model)] if model else list(cfg.models)
    sharded = settings.strategy != "ddp"
    check_launcher(settings.strategy, int(os.environ.get("WORLD_SIZE", "1")))
    if sharded:
        import torch.distributed as dist

        started_group = start_process_group()
        rank, world_size = dist.get_rank(), dist.get_world_size()
    else:
        rank, world_size, started_group = distributed_context()
    device = pick_device()
    if device == "cuda":
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
        torch.cuda.set_device(device)

    started = time.time()
    written, skipped, tokens = [], [], 0
    try:
        for spec in specs:
            layout = Layout(cfg.output_root, spec.tag)
            model_dtype = settings.dtype if settings.dtype != "auto" else spec.dtype
            name, tokenizer_name = cfg.model_source(spec)
            # a sharded model is loaded on the CPU and moved to the device shard by shard
            net, tokenizer = load_model(name, tokenizer_name, dtype=model_dtype, device="cpu" if sharded else device)
            if settings.gradient_checkpointing:
                enable_checkpointing(net)
            model_fingerprint = fingerprint(net)  # before sharding: needs every full tensor
            n_layers, n_params = num_layers(net), total_params(net)
            net_dtype = str(next(net.parameters()).dtype)
            eligible = eligible_names([n for n, _ in net.named_parameters()], settings.scope, n_layers)
            if not eligible:
                raise BenchprofError(
                    f"finetune.scope: model {spec.name!r} has no {settings.scope} weights "
                    "in layers named '...layers.<i>...'"
                )
            if settings.strategy == "fsdp":
                net = shard_fsdp(net, eligible, device)
            elif settings.strategy == "deepspeed":
                net = shard_deepspeed(net, eligible)
            for ability_name in abilities:
                records = load_split(cfg, ability_name, "train")
                records = records[: settings.max_samples] if settings.max_samples else records
                inputs = importance_inputs(
                    cfg, spec.name, ability_name, settings, records, batch_size, model_fingerprint, net_dtype
                )
                out_dir = layout.importance_dir(ability_name)
                if not force and is_current(layout.importance_output(ability_name), inputs):
                    skipped.append(ability_name)
                    continue
                ability_started = time.time()
                batches, n_loss_tokens = encode_batches(
                    tokenizer,
                    records,
                    cfg.dataset(ability_name).keys(),
                    settings.max_length,
                    batch_size,
                    settings.loss_on,
                )
                if n_loss_tokens == 0:
                    raise BenchprofError(
                        f"{ability_name}: no loss tokens (loss_on={settings.loss_on}; is "
                        "'answer' in the dataset's key, and max_length long enough?)"
                    )
                if settings.strategy == "fsdp":
                    importance = importance_fsdp(
                        net, batches, n_loss_tokens, eligible, rank, world_size, progress=rank == 0
                    )
                elif settings.strategy == "deepspeed":
                    importance = importance_deepspeed(
                        net, batches, n_loss_tokens, eligible, rank, world_size, progress=rank == 0
                    )
                else:
                    grad_sums = accumulate_gradients(
                        net, batches, n_loss_tokens, eligible, rank, world_size, progress=rank == 0
                    )
                    importance = importance_scores(net, grad_sums) if rank == 0 else {}
                    del grad_sums
                tokens += sum(int(b["attention_mask"].sum()) for b in batches)
                if rank == 0:
                    metadata = {
                        "fingerprint": model_fingerprint,
                        "total_params": str(n_params),
                        "n_layers": str(n_layers),
                        "scope": settings.scope,
                        "ability": ability_name,
                        "model": spec.name,
                        "dtype": inputs["dtype"],
                        "loss_on": settings.loss_on,
                        "normalization": "split_token_mean",
                        "n_samples": str(len(records)),
                        "n_loss_tokens": str(n_loss_tokens),
                    }
                    clear_manifest(out_dir)  # no old manifest may vouch for the new file if killed below
                    save_tensors(layout.importance_file(ability_name), importance, metadata)
                    write_manifest(
                        out_dir,
                        inputs,
                        started=ability_started,
                        extra={
                            "n_loss_tokens": n_loss_tokens,
                            "world_size": world_size,
                            "strategy": settings.strategy,
                            "gradient_checkpointing": settings.gradient_checkpointing,
                            "eligible_tensors": len(eligible),
                            "eligible_params": sum(t.numel() for t in importance.values()),
                        },
                    )
                del importance
                written.append(ability_name)
                if world_size > 1:
                    torch.distributed.barrier()
            del net
    finally:
        if started_group:
            torch.distributed.destroy_process_group()
    seconds = time.time() - started
    if rank == 0:
        where = cfg.output_root
        rate = f", {tokens / max(seconds, 1e-9):,.0f} tokens/s" if written else ""
        print(
            f"finetune: wrote importance for {len(written)} ability run(s), {len(skipped)} up to date, "
            f"under {where}/<model>/<ability>/importance in {seconds:.1f}s{rate}"
        )
