"""Loading and saving a model and naming its eligible weights; shared by finetune, extract, damage, evaluate."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchprof import BenchprofError

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from benchprof.core.config import Config, ModelSpec

# Which linear weights each `finetune.scope` makes eligible (matched on the parameter name).
SCOPES: dict[str, tuple[str, ...]] = {
    "mlp": ("mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"),
    "attention": (
        "self_attn.q_proj.weight",
        "self_attn.k_proj.weight",
        "self_attn.v_proj.weight",
        "self_attn.o_proj.weight",
    ),
}
SCOPES["all"] = SCOPES["mlp"] + SCOPES["attention"]

_LAYER = re.compile(r"\.layers\.(\d+)\.")


HUB_PROBE_SECONDS = 3.0  # one connection attempt to the hub


def hub_offline() -> bool:
    return any(
        os.environ.get(v, "").lower() in ("1", "true", "yes", "on") for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def hub_unreachable(source: str) -> str | None:
    """Why a hub id cannot be loaded here, found within seconds: it is not in the Hugging Face cache, and the hub is
    off (HF_HUB_OFFLINE) or cannot be reached in one connection attempt. None when it can be loaded."""
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants, try_to_load_from_cache

    with contextlib.suppress(Exception):  # not a valid repo id: transformers says why
        if isinstance(try_to_load_from_cache(source, "config.json"), str):
            return None
    if hub_offline():
        return f"{source!r} not found locally and HF_HUB_OFFLINE=1"
    endpoint = urlparse(constants.ENDPOINT)
    try:
        port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
        socket.create_connection((endpoint.hostname or "", port), timeout=HUB_PROBE_SECONDS).close()
    except OSError as err:
        return (
            f"{source!r} is not a local folder nor in the Hugging Face cache ({constants.HF_HUB_CACHE}), and "
            f"{constants.ENDPOINT} cannot be reached ({err.strerror or type(err).__name__}); download it where the hub "
            "can be reached (docs/reproduce.md#a-gated-model-or-a-node-without-internet) or name a local folder"
        )
    return None


def layer_index(name: str) -> int | None:
    """Decoder layer of a parameter name ('model.layers.3.mlp.up_proj.weight' -> 3), or None."""
    m = _LAYER.search(name)
    return int(m.group(1)) if m else None


def is_eligible(name: str, scope: str, n_layers: int, front_removal: int = 0, back_removal: int = 0) -> bool:
    """Is this weight a candidate for a region: in scope, in layers front_removal <= l < L - back_removal."""
    if scope not in SCOPES:
        raise BenchprofError(f"finetune.scope: unknown scope {scope!r} (known: {', '.join(SCOPES)})")
    layer = layer_index(name)
    return layer is not None and name.endswith(SCOPES[scope]) and front_removal <= layer < n_layers - back_removal


def eligible_names(
    names: Iterable[str], scope: str, n_layers: int, front_removal: int = 0, back_removal: int = 0
) -> list[str]:
    return [n for n in names if is_eligible(n, scope, n_layers, front_removal, back_removal)]


def use_threads(threads: int) -> None:
    """Give torch (and the OpenMP / MKL pools under it) `threads` CPU threads in this process and the processes
    it starts: through the environment before torch is imported, through torch.set_num_threads after."""
    import sys

    for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[key] = str(threads)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


def torch_dtype(name: str) -> torch.dtype | str:
    """'bfloat16' -> torch.bfloat16; 'auto' stays 'auto' (the checkpoint's own dtype)."""
    import torch

    return name if name == "auto" else getattr(torch, name)


def pick_device(device: str = "auto", key: str = "evals.device") -> str:
    """evals.device (or the option `key`) made concrete: auto is cuda where CUDA is available, else cpu. A name
    torch does not know, or cuda on a machine without CUDA, is one BenchprofError line naming `key` (it was a
    65-line traceback at model load)."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        kind = torch.device(device).type
    except (RuntimeError, ValueError):
        raise BenchprofError(f"{key}: {device!r} is not a device (auto, cpu, cuda, cuda:0, ...)") from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise BenchprofError(f"{key}: {device!r}, but CUDA is not available on this machine; use auto or cpu")
    return device


def cpu_bfloat16() -> tuple[bool, str]:
    """(whether this CPU multiplies bfloat16 in hardware, its name), from torch's own probe of the CPU: AMX or
    AVX512-BF16 on x86, BF16 or SVE-BF16 on Arm. Without them torch emulates bfloat16 matrix products: 6.9x
    slower than float32 on an AMD EPYC with AVX2 (docs/research/performance.md, section 5). Unknown reads as native."""
    import torch

    probe = getattr(torch.cpu, "get_capabilities", None)
    if probe is None:
        return True, ""
    caps = probe()
    native = ("amx_bf16", "avx512_bf16", "bf16", "sve_bf16")
    return any(bool(caps.get(name)) for name in native), str(caps.get("cpu_name", ""))


def load_model(
    name: str, tokenizer: str | None = None, dtype: str = "auto", device: str = "cpu"
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """AutoModelForCausalLM and AutoTokenizer from a local folder or hub id, in eval mode."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        model = AutoModelForCausalLM.from_pretrained(name, dtype=torch_dtype(dtype))
        tok = AutoTokenizer.from_pretrained(tokenizer or name)
    except Exception as err:  # OSError, ValueError, safetensors' own errors for a truncated file: one line
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise BenchprofError(f"models.name: cannot load {name!r}: {first}") from None
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    torch.nn.Module.to(model, device)  # (PreTrainedModel.to is typed as a decorator)
    model.eval()
    return model, tok


def save_model(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, out: Path | str) -> None:
    """save_pretrained of the model and its tokenizer into `out`, without a save's terminal noise: the
    one-shard "Writing model shards" bar, and DeepSpeed's "Setting accelerator to CPU" warning (transformers
    imports DeepSpeed, where installed, to ask whether ZeRO-3 is on; without CUDA DeepSpeed picks the CPU
    anyway, so naming it keeps the choice and drops the line)."""
    import torch
    from transformers.utils import logging as hf_logging

    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def num_layers(model: PreTrainedModel) -> int:
    return int(model.config.num_hidden_layers)


def total_params(model: torch.nn.Module) -> int:
    """All parameters (tied weights counted once), the denominator of k."""
    return sum(p.numel() for p in model.parameters())


def fingerprint(model: torch.nn.Module) -> str:
    """A short hash of the model's parameter names, shapes and every value (dtype-blind).

    Masks and importance files record it, so a region is never applied to another model, and a model
    changed anywhere is told apart. Values are rounded to bf16 first, so one checkpoint loaded in fp32
    or bf16 has one fingerprint; one tensor at a time is copied to the CPU (2 bytes a weight).
    """
    import torch

    h = hashlib.blake2b(digest_size=8)
    for name, p in model.state_dict().items():
        h.update(f"{name}:{tuple(p.shape)};".encode())
        if p.is_floating_point():
            values = p.detach().to(torch.bfloat16).reshape(-1).view(torch.int16).cpu()
        else:
            values = p.detach().reshape(-1).cpu()
        h.update(values.numpy().tobytes())
    return h.hexdigest()


MODEL_FILES = "model_files.json"  # in a model's outputs folder: a content_record of each checkpoint file
# scripts/fetch_real.py's receipt in a checkpoint it built: not a file the model loads, and it holds its files' stat
# keys (inode, times), so each fetch writes other bytes; counted, it gave each fetch of a checkpoint another identity.
FETCH_RECEIPT = "FETCHED.json"


def model_signature(cfg: Config, spec: ModelSpec, update_cache: bool = True) -> dict[str, Any]:
    """A config's model's identity from its content (model_identity), hashes cached in its outputs folder."""
    from benchprof.core.layout import Layout

    return model_identity(cfg.model_source(spec)[0], Layout(cfg.output_root, spec.tag).model_dir, update_cache)


def model_identity(source: str, cache_dir: Path | None = None, update_cache: bool = True) -> dict[str, Any]:
    """What a checkpoint is, without loading it: a content hash of each file of a local folder, or the
    hub commit of a hub id. Never its path or the files' times, so a moved or copied model (or project)
    is the same model.

    Hashing a large checkpoint takes a while (about 1 GB/s), so each file's storage.content_record is kept
    in `cache_dir/model_files.json`, trusted while the file's stat_key (inode, size, mtime, ctime) is
    unchanged: a file edited in place, even with its size and mtime put back, is hashed again; a touched
    or copied one is hashed again and found unchanged. `update_cache=False` reads the records and writes
    nothing (`benchprof status`). The records also say which model a folder holds (`same_model_folder`).
    """
    from benchprof.core.storage import stat_key, write_json

    folder = Path(source)
    if not folder.is_dir():
        commit = None
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(source, "config.json")
            commit = Path(cached).parent.name if isinstance(cached, str) else None
        except Exception:  # no hub library or cache: the name alone identifies it
            pass
        return {"hub": source, "commit": commit}
    cache_file = cache_dir / MODEL_FILES if cache_dir else None
    records = read_model_files(cache_file) if cache_file is not None else {}
    files, changed = {}, False
    for path in checkpoint_files(folder):
        record = records.get(path.name)
        if not (isinstance(record, dict) and record.get("stat") is not None and record["stat"] == stat_key(path)):
            record, changed = settled_record(path), True
            records[path.name] = record
        files[path.name] = record["hash"]
    if set(records) != set(files):
        records, changed = {name: records[name] for name in files}, True
    if changed and cache_file is not None and update_cache:
        try:
            write_json(cache_file, {"files": records})
        except BenchprofError:
            pass  # a read-only outputs folder: hash again next time
    return {"files": files}


FINGERPRINTS = "fingerprints.json"  # in a model's outputs folder: fingerprint() by checkpoint identity


FINGERPRINT_KEY = "fingerprint v1"  # in each cache key: a change of fingerprint() invalidates every stored value


def checkpoint_fingerprint(
    source: str,
    cache_dir: Path | None,
    model: torch.nn.Module | Callable[[], torch.nn.Module],
    update_cache: bool = True,
    loaded_at: float | None = None,
) -> str:
    """fingerprint() of the checkpoint at `source` as loaded, kept in `cache_dir/fingerprints.json` by the
    checkpoint's identity (model_identity: the files' content records, or a hub commit). Computing it reads every
    weight (about 1 s for 135 M parameters, a minute for billions).

    `model`: the model already loaded, with `loaded_at` the time.time() its load began; or a function that loads
    it, called only when the fingerprint is not known. A value is stored only when no file of the checkpoint
    changed after the load began (else the new files' identity could be paired with the old weights), and never
    for a loaded model without `loaded_at` or for a hub id whose commit is unknown."""
    import json

    import torch

    from benchprof.core.storage import read_json, write_json

    started = time.time() if loaded_at is None else loaded_at

    def load() -> torch.nn.Module:
        return model if isinstance(model, torch.nn.Module) else model()

    if cache_dir is None:  # no cache: no identity to hash either
        return fingerprint(load())
    identity = model_identity(source, cache_dir, update_cache)
    if "hub" in identity and not identity.get("commit"):
        return fingerprint(load())
    key = hashlib.blake2b(json.dumps([FINGERPRINT_KEY, identity], sort_keys=True).encode(), digest_size=16).hexdigest()
    path = cache_dir / FINGERPRINTS
    try:
        known = read_json(path) if path.is_file() else {}
    except (OSError, ValueError):
        known = {}
    known = known if isinstance(known, dict) else {}
    if isinstance(known.get(key), str):
        return str(known[key])
    value = fingerprint(load())
    known_load = loaded_at is not None or not isinstance(model, torch.nn.Module)
    folder = Path(source)
    changed = folder.is_dir() and any(p.stat().st_ctime > started for p in checkpoint_files(folder))
    if update_cache and known_load and not changed:
        try:
            write_json(path, {**known, key: value})
        except BenchprofError:
            pass  # a read-only outputs folder: computed again next time
    return value


def checkpoint_files(folder: Path) -> list[Path]:
    """The files that make up a local checkpoint folder (not its hidden ones, nor a fetch's receipt)."""
    return sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".") and p.name != FETCH_RECEIPT)


_SETTLED: dict[str, dict[str, Any]] = {}  # settled_record's records in this process, by path


def settled_record(path: Path) -> dict[str, Any]:
    """storage.content_record of a checkpoint file, its stat_key kept only if the file is settled: an edit
    within the file system's clock tick of the last one keeps the key (git's "racy clean"), so a file
    written in the last two seconds is hashed again next time. A settled record is reused within the process
    while the file's stat_key holds, by the rule model_files.json is trusted by (`status`, which writes no
    model_files.json, hashed a 540 MB checkpoint once per ability otherwise)."""
    from benchprof.core.storage import content_record, stat_key

    known = _SETTLED.get(str(path))
    if known is not None and known["stat"] == stat_key(path):
        return dict(known)
    record = content_record(path)
    if time.time_ns() - path.stat().st_ctime_ns <= 2_000_000_000:
        record.pop("stat", None)
    if record.get("stat") is not None:
        _SETTLED[str(path)] = dict(record)
    return record


def read_model_files(path: Path) -> dict[str, dict[str, Any]]:
    """A model_files.json's records by file name ({} when missing or unreadable). Older versions wrote
    {"<name>|<stat_key>": hash}; those are read as records, so a large checkpoint is not hashed again."""
    from benchprof.core.storage import read_json

    try:
        data = read_json(path) if path.is_file() else {}
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    if isinstance(data.get("files"), dict):
        return {str(k): v for k, v in data["files"].items() if isinstance(v, dict) and "hash" in v}
    records = {}
    for key, digest in data.items():
        name, _, stat = str(key).partition("|")
        if stat.count(":") == 3 and isinstance(digest, str):
            records[name] = {"size": int(stat.split(":")[1]), "hash": digest, "stat": stat}
    return records


def same_model_folder(source: str, output_root: Path) -> str | None:
    """The name of the folder under `output_root` whose model_files.json records exactly the files of the
    local checkpoint `source`, or None: how a model reached under another name (a symlink, a renamed or
    copied folder, a hub snapshot path) finds its results. A renamed folder or a symlink keeps every
    file's stat_key, so nothing is read; otherwise the files are hashed once, and only when some folder
    records files of the same names and sizes."""
    from benchprof.core.storage import file_hash, stat_key

    folder = Path(source)
    if not folder.is_dir() or not output_root.is_dir():
        return None
    paths = checkpoint_files(folder)
    if not paths:
        return None
    sizes = {p.name: p.stat().st_size for p in paths}
    candidates = []
    for model_dir in sorted(p for p in output_root.iterdir() if p.is_dir()):
        records = read_model_files(model_dir / MODEL_FILES)
        if set(records) != set(sizes) or any(records[n].get("size") != size for n, size in sizes.items()):
            continue
        if all(records[p.name].get("stat") == stat_key(p) for p in paths):
            return model_dir.name
        candidates.append((model_dir.name, records))
    if candidates:
        hashes = {p.name: file_hash(p) for p in paths}
        for name, records in candidates:
            if all(records[n]["hash"] == digest for n, digest in hashes.items()):
                return name
    return None


def link_results(source: Path, target: Path) -> int:
    """Give a new model folder `target` the results of `source`, a folder of the same checkpoint, as hard links
    (copies across file systems): no result depends on the folder's name (its tag), so they are current there
    and nothing is redone. Locks, logs, temporary files and the profile (whose tables print the tag; it is
    recomputed in seconds) are left out. Returns the number of files linked."""
    import os
    import shutil

    linked = 0
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if not path.is_file() or path.is_symlink() or relative.parts[0] in ("logs", "profile"):
            continue
        if path.name.startswith(".") and (path.name.endswith(".lock") or path.name.endswith(".tmp")):
            continue
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, destination)
        except OSError:
            shutil.copy2(path, destination)
        linked += 1
    return linked


def whole_safetensors(path: Path) -> bool:
    """Whether a safetensors file is as long as its header says (8 bytes of header size, the header, then the data
    up to the largest end offset of its tensors): a file cut short is not."""
    import json

    try:
        with open(path, "rb") as f:
            size = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(size))
        ends = [int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"]
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return False
    return path.stat().st_size == 8 + size + max(ends, default=0)
