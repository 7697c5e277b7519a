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
- Output: `<ability>/importance/importance.safetensors`, one fp32 tensor per eligible weight of
  *every* decoder layer (front/back_removal apply only when regions are extracted), keyed by the
  model's parameter name, with metadata fingerprint, total_params, n_layers, scope, ability, model,
  dtype, loss_on, normalization, n_samples, n_loss_tokens; then manifest.json.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Optional

from . import BenchprofError
from .config import Config, FinetuneSettings, load_config, select
from .io import file_hash, is_current, save_tensors, value_hash, write_manifest
from .layout import Layout

IGNORE = -100  # label of a token that is not in the loss (padding, or the prompt with loss_on: answer)


def encode_batches(tokenizer: Any, records: list[dict[str, Any]], keys: list[str], max_length: int,
                   batch_size: int, loss_on: str) -> tuple[list[dict[str, Any]], int]:
    """Right-padded batches of (input_ids, attention_mask, labels), and the split's loss-token count N."""
    import torch

    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    from .prompts import encode_record

    batches, n_loss_tokens = [], 0
    for start in range(0, len(records), batch_size):
        encoded = [encode_record(tokenizer, r, keys, max_length) for r in records[start:start + batch_size]]
        width = max(len(ids) for ids, _ in encoded)
        input_ids = torch.full((len(encoded), width), pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(encoded), width), dtype=torch.long)
        labels = torch.full((len(encoded), width), IGNORE, dtype=torch.long)
        for row, (ids, answer_start) in enumerate(encoded):
            input_ids[row, :len(ids)] = torch.tensor(ids)
            attention_mask[row, :len(ids)] = 1
            first = answer_start if loss_on == "answer" else 0
            labels[row, first:len(ids)] = input_ids[row, first:len(ids)]
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


def accumulate_gradients(model: Any, batches: list[dict[str, Any]], n_loss_tokens: int, eligible: list[str],
                         rank: int = 0, world_size: int = 1, progress: bool = False) -> dict[str, Any]:
    """sum over batches of dL/dtheta (fp32) for each eligible weight; L is the split-wide token mean.

    Rank r processes batches r::world_size; with world_size > 1 the sums are all-reduced at the end
    so every rank returns the full sum. Non-eligible parameters get requires_grad off and no .grad.
    """
    import torch
    import torch.nn.functional as F
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
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
            # L = (1/N) sum over loss tokens of -log p(next token); this batch's share of it
            loss = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), batch["labels"][:, 1:].flatten(),
                                   ignore_index=IGNORE, reduction="sum") / n_loss_tokens
            loss.backward()
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
    if settings.strategy != "ddp":
        raise BenchprofError(f"finetune.strategy: {settings.strategy!r} is not supported yet; use ddp "
                             "(one model copy per process, launched with torchrun or accelerate launch)")
    return settings


def data_identity(cfg: Config, ability: str, records: list[dict[str, Any]]) -> dict[str, str]:
    """What the training split is: its file's hash, or a hash of the records for a hub dataset."""
    from .data import ability_folder, is_hub_id, split_path

    if not is_hub_id(cfg, ability):
        path = split_path(ability_folder(cfg, ability), "train")
        if path.is_file():
            return {"source": str(path), "hash": file_hash(path)}
    return {"source": cfg.dataset(ability).path, "hash": value_hash(records)}


def finetune(config: str = "config.yml", ability: Optional[str] = None, model: Optional[str] = None,
             scope: Optional[str] = None, loss_on: Optional[str] = None, max_samples: Optional[int] = None,
             batch_size: Optional[int] = None, max_length: Optional[int] = None, dtype: Optional[str] = None,
             gradient_checkpointing: Optional[bool] = None, force: bool = False) -> None:
    """Importance scores I = |theta * sum over batches of dL/dtheta| for every eligible weight.

    No optimizer steps: gradients of the token-mean loss over the whole training split are summed in
    fp32. Run with `torchrun --nproc_per_node G -m benchprof finetune ...` (or accelerate launch) to
    split the batches over G processes; the result is the same as one process's.

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
        force: recompute even when the manifest matches.
    """
    import torch

    from .data import load_split
    from .modeling import eligible_names, fingerprint, load_model, num_layers, pick_device, total_params

    cfg = load_config(config)
    settings = settings_from(cfg, scope=scope, loss_on=loss_on, max_samples=max_samples, max_length=max_length,
                             dtype=dtype, gradient_checkpointing=gradient_checkpointing)
    batch_size = int(batch_size or cfg.settings.train_batch_size)
    if batch_size < 1:
        raise BenchprofError("--batch_size: must be >= 1")
    abilities = select(ability, cfg.abilities(), "--ability")
    specs = [cfg.model(model)] if model else list(cfg.models)
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
            net, tokenizer = load_model(name, tokenizer_name, dtype=model_dtype, device=device)
            if settings.gradient_checkpointing:
                enable_checkpointing(net)
            model_fingerprint = fingerprint(net)
            n_layers = num_layers(net)
            eligible = eligible_names([n for n, _ in net.named_parameters()], settings.scope, n_layers)
            if not eligible:
                raise BenchprofError(f"finetune.scope: model {spec.name!r} has no {settings.scope} weights "
                                     "in layers named '...layers.<i>...'")
            for ability_name in abilities:
                records = load_split(cfg, ability_name, "train")
                records = records[: settings.max_samples] if settings.max_samples else records
                inputs = {
                    "stage": "finetune", "ability": ability_name, "model": spec.name,
                    "fingerprint": model_fingerprint, "data": data_identity(cfg, ability_name, records),
                    "keys": cfg.dataset(ability_name).keys(), "scope": settings.scope, "loss_on": settings.loss_on,
                    "max_samples": settings.max_samples, "n_samples": len(records), "batch_size": batch_size,
                    "max_length": settings.max_length, "dtype": str(next(net.parameters()).dtype),
                    "normalization": "split_token_mean",
                }
                out_dir = layout.importance_dir(ability_name)
                if not force and is_current(out_dir, inputs) and layout.importance_file(ability_name).is_file():
                    skipped.append(ability_name)
                    continue
                ability_started = time.time()
                batches, n_loss_tokens = encode_batches(tokenizer, records, cfg.dataset(ability_name).keys(),
                                                        settings.max_length, batch_size, settings.loss_on)
                if n_loss_tokens == 0:
                    raise BenchprofError(f"{ability_name}: no loss tokens (loss_on={settings.loss_on}; is "
                                         "'answer' in the dataset's key, and max_length long enough?)")
                grad_sums = accumulate_gradients(net, batches, n_loss_tokens, eligible, rank, world_size,
                                                 progress=rank == 0)
                tokens += sum(int(b["attention_mask"].sum()) for b in batches)
                if rank == 0:
                    importance = importance_scores(net, grad_sums)
                    metadata = {
                        "fingerprint": model_fingerprint, "total_params": str(total_params(net)),
                        "n_layers": str(n_layers), "scope": settings.scope, "ability": ability_name,
                        "model": spec.name, "dtype": inputs["dtype"], "loss_on": settings.loss_on,
                        "normalization": "split_token_mean", "n_samples": str(len(records)),
                        "n_loss_tokens": str(n_loss_tokens),
                    }
                    save_tensors(layout.importance_file(ability_name), importance, metadata)
                    write_manifest(out_dir, inputs, started=ability_started, extra={
                        "n_loss_tokens": n_loss_tokens, "world_size": world_size,
                        "gradient_checkpointing": settings.gradient_checkpointing,
                        "eligible_tensors": len(eligible),
                        "eligible_params": sum(t.numel() for t in importance.values()),
                    })
                del grad_sums
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
        print(f"finetune: wrote importance for {len(written)} ability run(s), {len(skipped)} up to date, "
              f"under {where}/<model>/<ability>/importance in {seconds:.1f}s{rate}")

