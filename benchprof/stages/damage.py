"""Stage `damage`: zero a region's weights in place, and put them back exactly.

A region is a mask file from `extract`: for each parameter name, the sorted flat indices of the
selected weights. `apply_region` zeroes them in the loaded model and returns the values it
overwrote; `restore_region` writes those values back, so one loaded model serves every variant
(evaluate works this way). A checkpoint per variant is written only on `benchprof damage --save`.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchprof import BenchprofError
from benchprof.core.config import Config, ModelSpec
from benchprof.core.layout import Layout, Variant
from benchprof.core.regions import Region, read_region, region_metadata
from benchprof.core.selection import Selection, new_k_note, select, with_new_k

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

# What apply_region overwrote: parameter name -> (flat indices, original values), in apply order.
Saved = list[tuple[str, "torch.Tensor", "torch.Tensor"]]


def named_params(model: torch.nn.Module) -> dict[str, torch.nn.Parameter]:
    """Every parameter under every name it has (tied weights appear under each alias)."""
    return dict(model.named_parameters(remove_duplicate=False))


def check_region(
    model: torch.nn.Module, indices: Region, metadata: dict[str, str], path: Path, model_fingerprint: str | None = None
) -> None:
    """Raise a one-line BenchprofError naming `path` unless the mask fits this model.

    `model_fingerprint` is modeling.fingerprint of the *unablated* model; pass it when the model
    may already carry another region (the fingerprint samples weight values).
    """
    import torch

    from benchprof.core.modeling import fingerprint

    recorded = metadata.get("fingerprint")
    if recorded is None:
        raise BenchprofError(f"{path}: mask has no 'fingerprint' metadata; re-run `benchprof extract`")
    actual = model_fingerprint or fingerprint(model)
    if recorded != actual:
        raise BenchprofError(
            f"{path}: masks from another model (mask fingerprint {recorded}, loaded model {actual}); "
            f"re-run `benchprof finetune` and `benchprof extract` for this model"
        )
    params = named_params(model)
    for name, idx in indices.items():
        if name not in params:
            raise BenchprofError(f"{path}: masks from another model: {name!r} is not a parameter of it")
        if idx.dtype != torch.int64 or idx.dim() != 1:
            raise BenchprofError(
                f"{path}: {name}: indices must be a 1-D int64 tensor, got {idx.dtype} of shape {tuple(idx.shape)}"
            )
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= params[name].numel()):
            raise BenchprofError(
                f"{path}: masks from another model: {name} has an index outside 0..{params[name].numel() - 1}"
            )


def load_region(model: torch.nn.Module, path: Path, model_fingerprint: str | None = None) -> Region:
    """Read a mask file and check it against `model`; return its indices."""
    indices, metadata = read_region(path)
    check_region(model, indices, metadata, path, model_fingerprint)
    return indices


def apply_region(model: torch.nn.Module, indices: Region) -> Saved:
    """Zero the region's weights in place; return what was overwritten, for restore_region."""
    import torch

    params = named_params(model)
    saved: Saved = []
    with torch.no_grad():
        for name, idx in indices.items():
            if idx.numel() == 0:
                continue
            flat = params[name].data.view(-1)  # a view: writes go to the parameter itself
            on_device = idx.to(flat.device)
            saved.append((name, idx, flat[on_device]))  # advanced indexing copies
            flat[on_device] = 0
    return saved


def restore_region(model: torch.nn.Module, saved: Saved) -> None:
    """Put back the values apply_region overwrote, bit for bit."""
    import torch

    params = named_params(model)
    with torch.no_grad():
        # reverse order: a weight listed twice (tied aliases) gets the value saved before any zeroing
        for name, idx, values in reversed(saved):
            flat = params[name].data.view(-1)
            flat[idx.to(flat.device)] = values


@contextlib.contextmanager
def ablated(model: torch.nn.Module, indices: Region) -> Iterator[torch.nn.Module]:
    """`with ablated(model, region): ...` runs the block on the ablated model, then restores it."""
    saved = apply_region(model, indices)
    try:
        yield model
    finally:
        restore_region(model, saved)


def region_stats(model: torch.nn.Module, indices: Region) -> dict[str, float]:
    """How much of the model a region removes: weights zeroed and the share of the weight norm."""
    import torch

    params = dict(model.named_parameters())  # each tensor once, for the whole-model totals
    aliases = named_params(model)
    total_sq = sum(float(torch.linalg.vector_norm(p.detach(), dtype=torch.float32)) ** 2 for p in params.values())
    total = sum(p.numel() for p in params.values())
    zeroed = already_zero = 0
    removed_sq = 0.0
    with torch.no_grad():
        for name, idx in indices.items():
            values = aliases[name].data.view(-1)[idx.to(aliases[name].device)].double()
            zeroed += idx.numel()
            already_zero += int((values == 0).sum())
            removed_sq += float(values.pow(2).sum())
    return {
        "zeroed": zeroed,
        "fraction": zeroed / total,
        "already_zero": already_zero,
        "tensors": sum(1 for idx in indices.values() if idx.numel()),
        # ||theta|| after ablation, relative to before: sqrt(1 - removed / total)
        "norm_drop": 1 - math.sqrt(max(0.0, 1 - removed_sq / total_sq)) if total_sq else 0.0,
    }


def eval_dtype(cfg: Config, spec: ModelSpec) -> str:
    """The dtype damage and evaluate load a model in: evals.dtype, else the model entry's dtype."""
    return cfg.evals.dtype if cfg.evals.dtype != "auto" else spec.dtype


def eval_dtype_key(cfg: Config, i: int) -> str:
    """The config key that sets model i's eval_dtype: evals.dtype, else the model entry's dtype."""
    return "evals.dtype" if cfg.evals.dtype != "auto" else f"models[{i}].dtype"


def variants(cfg: Config, ability: Selection = None, k: Selection = None, region: Selection = None) -> list[Variant]:
    """Every (ability, k, region) of the config, narrowed by command-line values, in config order."""
    abilities = select(ability, cfg.abilities(), "--ability")
    ks = select(k, cfg.settings.k_values, "--k", float)
    regions = select(region, cfg.extract.region_names(), "--region")
    return [Variant(a, kv, r) for a in abilities for kv in ks for r in regions]


def missing_masks(layout: Layout, todo: list[Variant]) -> list[Path]:
    return [p for v in todo if not (p := layout.mask_file(*v.parts())).is_file()]


def require_masks(layout: Layout, todo: list[Variant]) -> None:
    missing = missing_masks(layout, todo)
    if missing:
        raise BenchprofError(
            f"{len(missing)} mask file(s) missing, e.g. {missing[0]} "
            f"(run `benchprof extract`, or narrow with --ability/--k/--region)"
        )


def checkpoint_inputs(layout: Layout, variant: Variant, model_fingerprint: str, dtype: str) -> dict[str, Any]:
    from benchprof.core.storage import file_hash

    mask = layout.mask_file(*variant.parts())
    return {"variant": variant.label(), "mask": file_hash(mask), "model_fingerprint": model_fingerprint, "dtype": dtype}


def save_checkpoint(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, region: Region, out_dir: Path, inputs: dict[str, Any]
) -> None:
    """Write the ablated model (and tokenizer) as a full HF checkpoint; the folder appears whole or not at all."""
    from benchprof import BenchprofError
    from benchprof.core.modeling import save_model
    from benchprof.core.storage import (
        WRITE_ERRORS,
        remove_temps,
        shared_mode,
        temp_affixes,
        write_error,
        write_manifest,
    )

    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    remove_temps(out_dir.parent, out_dir.name)  # a killed run's checkpoint-sized leftovers
    prefix, suffix = temp_affixes(out_dir)
    tmp = Path(tempfile.mkdtemp(prefix=prefix, suffix=suffix, dir=out_dir.parent))
    started = time.time()
    try:
        os.chmod(tmp, shared_mode(directory=True))  # mkdtemp makes 0700
        with ablated(model, region):
            save_model(model, tokenizer, tmp)
        for path in tmp.rglob("*"):  # transformers writes model.safetensors 0600 too
            os.chmod(path, shared_mode(directory=path.is_dir()))
        write_manifest(tmp, inputs, started=started)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    except BenchprofError:
        raise
    except OSError as err:
        if err.errno in WRITE_ERRORS:
            raise write_error(out_dir, err) from err
        raise
    except Exception as err:  # safetensors reports a full disk as its own error type
        if "No space left" in str(err) or "Disk quota" in str(err):
            raise write_error(out_dir, err) from err
        raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def ensure_checkpoints(
    cfg: Config,
    spec: ModelSpec,
    todo: list[Variant],
    force: bool = False,
    model: PreTrainedModel | None = None,
    tokenizer: PreTrainedTokenizerBase | None = None,
) -> tuple[int, int]:
    """Write the checkpoint of every variant in `todo` that is missing or stale; return (written, skipped).

    A checkpoint is current when its manifest matches the mask, the model and the dtype and every file
    it recorded is still the file it wrote (a truncated or deleted model.safetensors is rewritten).
    Loads the model only if something has to be written (or uses the one given). Under the model
    folder's lock it also removes the temporary folders that killed saves left.
    """
    from benchprof.core.console import progress
    from benchprof.core.locks import holds_folder_lock
    from benchprof.core.modeling import checkpoint_fingerprint, load_model
    from benchprof.core.storage import is_current, remove_temps

    layout = Layout(cfg.output_root, spec.tag)
    require_masks(layout, todo)
    dtype = eval_dtype(cfg, spec)
    for v in todo if holds_folder_lock(layout.model_dir) else []:  # a shard must not remove another's save
        out_dir = layout.damaged_dir(*v.parts())  # a killed save's checkpoint-sized temporary folder
        if out_dir.parent.is_dir():
            remove_temps(out_dir.parent, out_dir.name)

    def stale(v: Variant, fp: str) -> bool:
        out = layout.checkpoint_output(*v.parts())
        return force or not is_current(out, checkpoint_inputs(layout, v, fp, dtype))

    # the mask records the fingerprint of its model, so a current checkpoint is found without a load
    pending = [v for v in todo if stale(v, region_metadata(layout.mask_file(*v.parts())).get("fingerprint", ""))]
    if not pending:
        return 0, len(todo)
    loaded_at = None  # a model handed in: its load time is unknown, so its fingerprint is not stored
    if model is None or tokenizer is None:
        loaded_at = time.time()
        model, tokenizer = load_model(*cfg.model_source(spec), dtype=dtype, device="cpu")
    fp = checkpoint_fingerprint(cfg.model_source(spec)[0], layout.model_dir, model, loaded_at=loaded_at)
    for v in progress(pending, desc=f"damage --save {spec.tag}", unit="variant"):
        path = layout.mask_file(*v.parts())
        save_checkpoint(
            model,
            tokenizer,
            load_region(model, path, fp),
            layout.damaged_dir(*v.parts()),
            checkpoint_inputs(layout, v, fp, dtype),
        )
    return len(pending), len(todo) - len(pending)


def damage(
    cfg: Config,
    ability: str | None = None,
    k: Selection = None,
    region: str | None = None,
    model: str | None = None,
    save: bool = False,
    force: bool = False,
) -> None:
    """Check each region against the model and report what it zeroes; with --save, write checkpoints.

    `benchprof evaluate` applies regions in memory by itself (zero, evaluate, restore on one loaded
    model), so this stage is optional. Without --save it loads the model once, checks every selected
    mask against it (a mask from another model fails here, before a long evaluation) and prints per
    variant the weights zeroed, their share of all parameters and the relative drop of the weight
    norm. With --save it writes each ablated model as a full Hugging Face checkpoint (weights and
    tokenizer) under <ability>/damaged/k<k>/<region>/, for vLLM or for sharing; a checkpoint whose
    manifest matches its mask and model is kept unless --force.

    Arguments:
        cfg: the config (on the command line: the path of config.yml).
        ability: only this ability (or a comma-separated list).
        k: only these k values; a k that settings.k_values does not list is added to this run's.
        region: only this region (top, bottom, random).
        model: only this model (name or tag).
        save: write checkpoints under <ability>/damaged/k<k>/<region>/ (zero ablation only: damage.ablation).
        force: rewrite checkpoints that exist.
    """
    from benchprof.core.modeling import checkpoint_fingerprint, load_model, pick_device

    started = time.time()
    if save and cfg.damage.ablation == "mean":
        raise BenchprofError("--save: damage.ablation mean holds neurons with hooks, which no checkpoint can hold")
    cfg, new_k = with_new_k(cfg, k)
    todo = variants(cfg, ability, k, region)
    for spec in cfg.selected_models(model):
        layout = Layout(cfg.output_root, spec.tag)
        require_masks(layout, todo)
        if save:
            written, skipped = ensure_checkpoints(cfg, spec, todo, force=force)
            print(
                f"damage: {written} checkpoint(s) written, {skipped} current kept, for {spec.tag} "
                f"under {layout.model_dir}/<ability>/damaged/ in {time.time() - started:.0f}s"
            )
            continue
        loaded_at = time.time()
        net, _ = load_model(*cfg.model_source(spec), dtype=eval_dtype(cfg, spec), device=pick_device(cfg.evals.device))
        fp = checkpoint_fingerprint(cfg.model_source(spec)[0], layout.model_dir, net, loaded_at=loaded_at)
        print(f"{'variant':<48} {'zeroed':>12} {'of params':>10} {'norm drop':>10} {'were 0':>8}")
        for v in todo:
            stats = region_stats(net, load_region(net, layout.mask_file(*v.parts()), fp))
            print(
                f"{v.label():<48} {stats['zeroed']:>12,} {stats['fraction']:>10.3%} "
                f"{stats['norm_drop']:>10.3%} {stats['already_zero']:>8,}"
            )
        print(
            f"damage: {len(todo)} region(s) checked against {spec.tag} in {time.time() - started:.0f}s "
            f"(nothing written; --save writes checkpoints)"
        )
    if new_k:
        print(new_k_note("damage", cfg, new_k))
