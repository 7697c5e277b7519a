"""The patch that plants abilities into a fetched base model (built by realplant.py).

`benchprof/assets/smollm2-plant/` holds `plant.safetensors` (per reserved layer l: `layers.<l>.neurons`, the
neuron ids, and the rows of gate_proj and up_proj and the columns of down_proj at those ids) and
`plant.json` (the format, the sha256 of every base tensor the patch touches, the neurons of each ability,
the build's settings and checks). This module owns that format: writing it, reading it, applying it to
the base it was built on (and refusing any other), and writing a planted model folder.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchprof import BenchprofError
from benchprof.stages.neurons import neuron_region

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from benchprof.core.regions import Region

PATCH_FORMAT = 1
PATCH_DIR = Path(__file__).parents[1] / "assets" / "smollm2-plant"


def tensor_sha256(tensor: torch.Tensor) -> str:
    """sha256 of a tensor's dtype, shape and exact bytes."""
    h = hashlib.sha256(f"{tensor.dtype}:{tuple(tensor.shape)};".encode())
    h.update(tensor.detach().cpu().contiguous().reshape(-1).view(-1).numpy().tobytes())
    return h.hexdigest()


def neuron_regions(neurons: dict[str, dict[int, list[int]]], hidden: int, intermediate: int) -> dict[str, Region]:
    """Each ability's reserved neurons as a benchprof region."""
    return {a: neuron_region(per, hidden, intermediate) for a, per in neurons.items()}


def save_patch(
    folder: Path,
    model: PreTrainedModel,
    base_hashes: dict[str, str],
    neurons: dict[str, dict[int, list[int]]],
    info: dict[str, Any],
) -> None:
    """plant.safetensors (the reserved rows and columns per layer, their ids) and plant.json into `folder`."""
    import torch
    from safetensors.torch import save_file

    layers = sorted({layer for per in neurons.values() for layer in per})
    tensors: dict[str, torch.Tensor] = {}
    for layer in layers:
        ids = sorted(j for per in neurons.values() for j in per[layer])
        mlp = model.model.layers[layer].mlp
        index = torch.tensor(ids, dtype=torch.long)
        tensors[f"layers.{layer}.neurons"] = index
        tensors[f"layers.{layer}.gate_proj"] = mlp.gate_proj.weight.detach()[index].contiguous()
        tensors[f"layers.{layer}.up_proj"] = mlp.up_proj.weight.detach()[index].contiguous()
        tensors[f"layers.{layer}.down_proj"] = mlp.down_proj.weight.detach()[:, index].contiguous()
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "plant.safetensors"))
    content = {
        "format": PATCH_FORMAT,
        "base_tensors": base_hashes,
        "neurons": {a: {str(layer): ids for layer, ids in per.items()} for a, per in neurons.items()},
        **info,
    }
    (folder / "plant.json").write_text(json.dumps(content, indent=2) + "\n")


def load_patch(folder: Path = PATCH_DIR) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """plant.json and the tensors of plant.safetensors."""
    from safetensors.torch import load_file

    path = Path(folder) / "plant.json"
    if not path.is_file():
        raise BenchprofError(f"{path}: not found; build the patch with scripts/plant_real.py build")
    info = json.loads(path.read_text())
    if info.get("format") != PATCH_FORMAT:
        raise BenchprofError(f"{path}: patch format {info.get('format')!r}, this benchprof reads {PATCH_FORMAT}")
    return info, load_file(str(Path(folder) / "plant.safetensors"))


def patch_neurons(info: dict[str, Any]) -> dict[str, dict[int, list[int]]]:
    return {a: {int(layer): ids for layer, ids in per.items()} for a, per in info["neurons"].items()}


def apply_patch(model: PreTrainedModel, folder: Path = PATCH_DIR) -> dict[str, Region]:
    """Write the patch's rows and columns into `model` (in place); returns each planted ability's region.

    Refuses, before writing anything, a model whose touched tensors are not the ones the patch was built
    on (their sha256 is in plant.json): the patch would otherwise land on the wrong weights."""
    import torch

    info, tensors = load_patch(folder)
    params = dict(model.named_parameters())
    for name, digest in info["base_tensors"].items():
        if name not in params:
            raise BenchprofError(f"{folder}/plant.json: the model has no tensor {name}; the patch is for another model")
        if tensor_sha256(params[name]) != digest:
            raise BenchprofError(
                f"{folder}/plant.json: {name} differs from the base the patch was built on (sha256); "
                "apply it to the model scripts/fetch_real.py builds"
            )
    with torch.no_grad():
        for key, index in tensors.items():
            if not key.endswith(".neurons"):
                continue
            layer = int(key.split(".")[1])
            mlp = model.model.layers[layer].mlp
            mlp.gate_proj.weight[index] = tensors[f"layers.{layer}.gate_proj"]
            mlp.up_proj.weight[index] = tensors[f"layers.{layer}.up_proj"]
            mlp.down_proj.weight[:, index] = tensors[f"layers.{layer}.down_proj"]
    return neuron_regions(patch_neurons(info), model.config.hidden_size, model.config.intermediate_size)


def load_base(folder: Path, threads: int) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The fetched base model (float32, eval mode) and its tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    torch.set_num_threads(threads)
    hf_logging.disable_progress_bar()
    if not (Path(folder) / "config.json").is_file():
        raise BenchprofError(f"{folder}: no model here; run scripts/fetch_real.py first")
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    model.eval()
    return model, tok


def write_planted_model(base_folder: Path, out: Path, patch: Path = PATCH_DIR) -> Path:
    """The fetched base with the patch applied, saved as a model folder `out` with its planted regions
    (planted/<ability>.safetensors and planted.json, as planted.py writes them) beside it."""
    from benchprof.abilities.invented import invented_splits
    from benchprof.core.modeling import fingerprint, save_model
    from benchprof.lab.planted import save_planted

    model, tok = load_base(base_folder, threads=2)
    regions = apply_patch(model, patch)
    info, _ = load_patch(patch)
    eligible = sum(p.numel() for n, p in model.named_parameters() if ".mlp." in n and n.endswith("_proj.weight"))
    settings = info["settings"]
    splits = [invented_splits(a, settings["data_seed"]) for a in settings["abilities"]]
    planted_info = {
        # train/test sizes as `benchprof data` reads them for an invented ability: every probe and test item
        "settings": {
            **settings,
            "num_layers": model.config.num_hidden_layers,
            "train_size": max(len(s["probe"]) for s in splits),
            "test_size": max(len(s["test"]) for s in splits),
        },
        "total_params": sum(p.numel() for p in model.parameters()),
        "eligible": eligible,
        "neurons": info["neurons"],
        "patch": str(patch),
    }
    out.mkdir(parents=True, exist_ok=True)
    save_model(model, tok, out)
    save_planted(out, regions, planted_info, fingerprint(model))
    return out


# (token ids, first answer position, cached input of the first trained layer)
