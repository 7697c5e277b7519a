"""How the importance pass sums gradients over batches and processes, per `finetune.strategy`.

Each strategy runs the backward passes of a rank's batches and then yields, one eligible tensor at a
time, (name, Σ_batches ∂L/∂θ in fp32, θ in fp32), full-sized, on every rank (the sharded strategies
gather collectively, so every rank must walk the whole iterator); finetune.py applies the formula.
- `ddp`: a model copy per process; rank r takes batches r::W, a post-accumulate-grad hook adds
  each gradient into an fp32 buffer and frees it, and the buffers are all-reduced once at the end.
- `fsdp`: torch FSDP2, one shard unit per decoder layer; each rank adds its gradient shard into an
  fp32 shard after every backward; each tensor's sum is gathered once at the end.
- `deepspeed`: ZeRO-3 with an SGD optimizer that never steps (ZeRO-3 partitions gradients only with
  one); it adds every backward's partition into its fp32 buffer (deepspeed 0.19 stage3), and
  `safe_get_full_grad` gathers each sum once. ZeRO-1/2 keep only the last micro-batch: refused.
The sharded strategies need the same number of forwards on every rank: short ranks run a
zero-weighted extra batch (`rank_batches`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from benchprof import BenchprofError

if TYPE_CHECKING:
    import torch
    from deepspeed import DeepSpeedEngine
    from torch.distributed.tensor import DTensor

Batch = dict[str, "torch.Tensor"]
Loss = Callable[["torch.nn.Module", Batch], "torch.Tensor"]  # a batch's share of the split's loss
GradientSums = Iterator[tuple[str, "torch.Tensor", "torch.Tensor"]]  # (name, Σ ∂L/∂θ, θ), fp32
STRATEGIES = ("ddp", "fsdp", "deepspeed")


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


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def parent_death_signal(sig: int = 15) -> Callable[[], None] | None:
    """A Popen preexec_fn that has Linux send `sig` (SIGTERM) to the child when the thread that started it
    ends (this process's main thread: when this process dies), or None off Linux: a `kill -9` of
    `benchprof run` must not leave torchrun, its ranks or evaluate's workers running, where a rerun would
    find the lock free and do their work twice.

    prctl is looked up here, before the fork, so the child only makes the one system call and exits if
    its parent was already gone."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError, TypeError):
        return None
    parent = os.getpid()

    def in_child() -> None:
        prctl(PR_SET_PDEATHSIG, sig)
        if os.getppid() != parent:  # it died before the request took effect
            os._exit(1)

    return in_child


def die_with_launcher() -> None:
    """In a rank torchrun started (call it first): SIGTERM to this process when torchrun dies, as its
    children must. Linux only; elsewhere torchrun's own shutdown is all there is."""
    import ctypes
    import signal
    import sys

    if "TORCHELASTIC_RUN_ID" not in os.environ or not sys.platform.startswith("linux"):
        return
    launcher = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))
    except (OSError, AttributeError, TypeError):
        return
    if os.getppid() != launcher:  # torchrun was gone before the request took effect
        os._exit(1)


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
    gpus = cuda_count()
    if strategy != "ddp" and world_size == 1 and gpus > 1:
        raise BenchprofError(
            f"--strategy {strategy} shards the model over processes, but this is one process "
            f"on a {gpus}-GPU machine; launch with `torchrun --nproc_per_node "
            f"{gpus} -m benchprof finetune ...` or `accelerate launch`"
        )


def cuda_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def freeze_all_but(model: torch.nn.Module, eligible: list[str]) -> None:
    """Gradients only where needed: every non-eligible parameter gets requires_grad off."""
    wanted = set(eligible)
    for name, p in model.named_parameters():
        p.requires_grad_(name in wanted)
        p.grad = None


def rank_batches(batches: list[Batch], rank: int, world_size: int) -> list[tuple[Batch, float]]:
    """(batch, weight) pairs of rank r: batches r::W, padded with zero-weighted repeats so that every
    rank runs the same number of forwards (sharded strategies gather parameters collectively)."""
    mine = [(batch, 1.0) for batch in batches[rank::world_size]]
    rounds = -(-len(batches) // world_size)
    return mine + [(batches[0], 0.0)] * (rounds - len(mine))


def lockstep_batches(
    batches: list[Batch], rank: int, world_size: int, device: str | torch.device, progress: str
) -> Iterator[tuple[Batch, float]]:
    """This rank's (batch on `device`, weight) pairs of `rank_batches`, with a progress bar labelled `progress` (none
    where it is "")."""
    from benchprof.core.console import progress as progress_bar

    pairs = rank_batches(batches, rank, world_size)
    for batch, weight in progress_bar(pairs, desc=progress, unit="batch", disable=not progress, leave=False):
        yield {key: value.to(device) for key, value in batch.items()}, weight


def launch(config: Path, processes: int, devices: list[str], args: list[str]) -> None:
    """`benchprof finetune` in `processes` processes (torchrun, one per device), from `benchprof run`.

    Each rank sees the configured GPUs (or none on a CPU machine, where the ranks talk over gloo);
    rank 0 writes, under the lock the calling `run` holds (the ranks inherit it).
    """
    import socket
    import subprocess
    import sys

    from benchprof.core.console import terminal_fd
    from benchprof.core.loader import load_config

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=",".join(devices))
    # each rank's share of the cores (settings.threads), not torchrun's default of one thread
    threads = str(load_config(config).settings.thread_count(processes))
    env.update(OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(processes)]
    command += ["--master_addr", "127.0.0.1", "--master_port", str(port), "-m", "benchprof", "finetune", str(config)]
    # the ranks' bars and errors show; torchrun (and through die_with_launcher its ranks) dies with this process
    done = subprocess.run(command + args, env=env, stderr=terminal_fd(), preexec_fn=parent_death_signal())
    if done.returncode != 0:
        raise BenchprofError(
            f"finetune: {processes} importance processes failed (exit {done.returncode}; each rank's error is "
            "printed above); rerun the same command to resume"
        )


def prepare(strategy: str, model: torch.nn.Module, eligible: list[str], device: str) -> torch.nn.Module:
    """The model as the strategy runs it: itself (ddp), FSDP2-sharded, or a DeepSpeed ZeRO-3 engine."""
    if strategy == "fsdp":
        return shard_fsdp(model, eligible, device)
    if strategy == "deepspeed":
        return shard_deepspeed(model, eligible)
    return model


def gradient_sums(
    strategy: str,
    model: torch.nn.Module,
    batches: list[Batch],
    loss: Loss,
    eligible: list[str],
    rank: int = 0,
    world_size: int = 1,
    progress: str = "",
) -> GradientSums:
    """Σ over the split's batches of ∂L/∂θ and θ, per eligible tensor, under `strategy` (see module doc)."""
    if strategy == "fsdp":
        return fsdp_sums(model, batches, loss, eligible, rank, world_size, progress)
    if strategy == "deepspeed":
        return deepspeed_sums(model, batches, loss, eligible, rank, world_size, progress)
    return ddp_sums(model, batches, loss, eligible, rank, world_size, progress)


def accumulate_gradients(
    model: torch.nn.Module,
    batches: list[Batch],
    loss: Loss,
    eligible: list[str],
    rank: int = 0,
    world_size: int = 1,
    progress: str = "",
) -> dict[str, torch.Tensor]:
    """Σ over batches of ∂L/∂θ (fp32) for each eligible weight, all-reduced over the ranks.

    Rank r processes batches r::world_size. Non-eligible parameters get requires_grad off and no .grad.
    """
    import torch

    from benchprof.core.console import progress as progress_bar

    freeze_all_but(model, eligible)
    params = dict(model.named_parameters())
    device = params[eligible[0]].device
    sums = {name: torch.zeros(params[name].shape, dtype=torch.float32, device=device) for name in eligible}

    def add_to(buffer: torch.Tensor) -> Callable[[torch.Tensor], None]:
        def hook(p: torch.Tensor) -> None:
            assert p.grad is not None  # the hook runs after the gradient was accumulated
            buffer.add_(p.grad)  # in-place add promotes a bf16 gradient into the fp32 buffer
            p.grad = None  # free it at once: memory stays at one batch's gradient at most

        return hook

    handles = [params[name].register_post_accumulate_grad_hook(add_to(sums[name])) for name in eligible]
    try:
        mine = batches[rank::world_size]
        for batch in progress_bar(mine, desc=progress, unit="batch", disable=not progress, leave=False):
            loss(model, {key: value.to(device) for key, value in batch.items()}).backward()
    finally:
        for handle in handles:
            handle.remove()
    if world_size > 1:
        import torch.distributed as dist

        for name in eligible:
            dist.all_reduce(sums[name], op=dist.ReduceOp.SUM)
    return sums


def ddp_sums(
    model: torch.nn.Module,
    batches: list[Batch],
    loss: Loss,
    eligible: list[str],
    rank: int,
    world_size: int,
    progress: str,
) -> GradientSums:
    sums = accumulate_gradients(model, batches, loss, eligible, rank, world_size, progress)
    params = dict(model.named_parameters())
    for name in eligible:
        yield name, sums.pop(name), params[name].detach().float()


def shard_fsdp(model: torch.nn.Module, eligible: list[str], device: str) -> torch.nn.Module:
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


def fsdp_sums(
    model: torch.nn.Module,
    batches: list[Batch],
    loss: Loss,
    eligible: list[str],
    rank: int,
    world_size: int,
    progress: str,
) -> GradientSums:
    """Sharded fp32 sums under FSDP2, each tensor (and its weight) gathered once at the end."""
    import torch
    from torch.distributed.tensor import DTensor

    params = cast("dict[str, DTensor]", dict(model.named_parameters()))  # FSDP2 parameters are DTensors
    device = params[eligible[0]].to_local().device
    shard_sums = {name: torch.zeros_like(params[name].to_local(), dtype=torch.float32) for name in eligible}
    for batch, weight in lockstep_batches(batches, rank, world_size, device, progress):
        # FSDP averages gradients over ranks; times W makes the reduce-scatter a sum
        (loss(model, batch) * (weight * world_size)).backward()
        for name in eligible:
            p = params[name]
            if p.grad is not None:
                shard_sums[name].add_(cast("DTensor", p.grad).to_local())  # this rank's shard, promoted to fp32
                p.grad = None
    for name in eligible:
        p = params[name]
        grad_sum = DTensor.from_local(
            shard_sums.pop(name), p.device_mesh, p.placements, shape=p.shape, stride=p.stride()
        ).full_tensor()
        yield name, grad_sum, cast("DTensor", p.detach()).full_tensor().float()


def deepspeed_config(dtype: torch.dtype) -> dict[str, Any]:
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


def shard_deepspeed(model: torch.nn.Module, eligible: list[str]) -> DeepSpeedEngine:
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


def deepspeed_sums(
    engine: DeepSpeedEngine,
    batches: list[Batch],
    loss: Loss,
    eligible: list[str],
    rank: int,
    world_size: int,
    progress: str,
) -> GradientSums:
    """DeepSpeed sums each backward's gradient partition in fp32 (no step, so nothing resets it);
    each tensor's sum and weight are gathered once at the end."""
    import deepspeed
    from deepspeed.utils import safe_get_full_grad

    engine.optimizer.zero_grad()  # also resets its micro-step count: the next backward copies, later ones add
    for batch, weight in lockstep_batches(batches, rank, world_size, engine.device, progress):
        # DeepSpeed averages gradients over ranks; times W makes the reduction a sum
        engine.backward(loss(engine, batch) * (weight * world_size))
    params = dict(engine.module.named_parameters())
    for name in eligible:
        grad_sum = safe_get_full_grad(params[name]).float()  # all-gather of the fp32 partitions
        with deepspeed.zero.GatheredParameters([params[name]]):
            yield name, grad_sum, params[name].detach().float()  # θ is whole only inside this block
    engine.optimizer.zero_grad()
