"""A planted model: a small Llama whose abilities live in known MLP neurons, by construction.

This module: which neurons each ability owns (R_a, `neuron_sets`) and their weights in benchprof's region format,
the planted folder's files, a model's per-item scores on an ability's test items (as lm-eval scores a multiple-choice
task), and the own check (each R_a zeroed, against random regions of its size). How a plant is trained: realplant.py.

The planted sets are saved beside the model: `planted/<ability>.safetensors` in benchprof's region
format (sorted flat indices per parameter; regions.read_region reads them) and `planted.json`
(neuron ids per ability and layer, the build settings and the own check).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchprof import BenchprofError
from benchprof.core.regions import read_region, write_region
from benchprof.stages.choices import item_scores
from benchprof.stages.neurons import neuron_region

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase

    from benchprof.core.regions import Region

MLP_COLUMNS = ("down_proj",)  # ... and column j of this


@dataclass
class PlantSettings:
    """How the planted model is built; stored in planted.json."""

    abilities: list[str]
    layers: list[int]  # decoder layers holding the reserved neurons
    neurons_per_layer: int  # reserved neurons per ability and layer
    hidden: int = 64
    intermediate: int = 384
    num_layers: int = 4
    heads: int = 4
    train_size: int = 2000  # items per ability generated for training (data.train_size of the validate config)
    test_size: int = 200  # the test split (never trained on)
    data_seed: int = 1234
    base_steps: int = 1000
    plant_steps: int = 500
    batch_size: int = 32
    base_lr: float = 5e-3
    plant_lr: float = 1e-2
    plant_init_std: float = 0.1  # std of the fresh gate/up rows of the reserved neurons
    answer_weight: float = 4.0
    max_len: int = 128
    seed: int = 0
    threads: int = 1
    plant_answer_only: bool = True  # planting's loss on the answer tokens only
    silence: float = 1.0  # weight of the penalty on other abilities' neurons firing (train_planted)
    echo: bool = True  # base also learns to echo words of the prompt (echo_answers)
    tokenizer: str = ""  # folder of the tokenizer reused (the demo model's)
    extra: dict[str, Any] = field(default_factory=dict)


def neuron_sets(settings: PlantSettings) -> dict[str, dict[int, list[int]]]:
    """Disjoint reserved neurons: ability -> layer -> sorted neuron ids, drawn at random from `settings.seed`."""
    total = len(settings.abilities) * settings.neurons_per_layer
    if total > settings.intermediate:
        raise BenchprofError(f"{total} reserved neurons per layer exceed the MLP's {settings.intermediate}")
    rng = random.Random(settings.seed + 17)
    out: dict[str, dict[int, list[int]]] = {a: {} for a in settings.abilities}
    for layer in settings.layers:
        chosen = rng.sample(range(settings.intermediate), total)
        for i, ability in enumerate(settings.abilities):
            n = settings.neurons_per_layer
            out[ability][layer] = sorted(chosen[i * n : (i + 1) * n])
    return out


def region_size(region: Region) -> int:
    """Weights in a region."""
    return sum(int(v.numel()) for v in region.values())


def region_masks(model: torch.nn.Module, regions: Sequence[Region]) -> dict[str, torch.Tensor]:
    """Boolean masks (parameter shape) of the union of `regions`, for the parameters they touch."""
    import torch

    params = dict(model.named_parameters())
    masks: dict[str, torch.Tensor] = {}
    for region in regions:
        for name, idx in region.items():
            if name not in masks:
                masks[name] = torch.zeros(params[name].numel(), dtype=torch.bool)
            masks[name][idx] = True
    return {name: m.view(params[name].shape) for name, m in masks.items()}


def planted_json_file(folder: Path) -> Path:
    """planted.json of a planted model folder: neuron ids per ability and layer, build settings, own check."""
    return Path(folder) / "planted.json"


def planted_region_file(folder: Path, ability: str) -> Path:
    """R_a of a planted model folder in benchprof's region format: planted/<ability>.safetensors."""
    return Path(folder) / "planted" / f"{ability}.safetensors"


def save_planted(folder: Path, regions: dict[str, Region], info: dict[str, Any], fingerprint: str) -> None:
    """planted/<ability>.safetensors (region format) and planted.json into the model folder."""
    folder = Path(folder)
    total = int(info["total_params"])
    for ability, region in regions.items():
        metadata = {
            "fingerprint": fingerprint,
            "total_params": str(total),
            "n": str(region_size(region)),
            "k": repr(region_size(region) / total),
            "region": "planted",
            "ability": ability,
            "model": folder.name,
            "selection": "planted",
            "selected": str(region_size(region)),
            "eligible": str(info["eligible"]),
            "scope": "mlp",
            "n_layers": str(info["settings"]["num_layers"]),
            "front_removal": "0",
            "back_removal": "0",
            "order": "planted neurons: rows of gate_proj/up_proj, columns of down_proj",
        }
        write_region(planted_region_file(folder, ability), region, metadata)
    planted_json_file(folder).write_text(json.dumps(info, indent=2) + "\n")


def load_planted(folder: Path) -> tuple[dict[str, Region], dict[str, Any]]:
    """The planted regions ({ability: region}) and planted.json of a planted model folder."""
    folder = Path(folder)
    path = planted_json_file(folder)
    if not path.is_file():
        raise BenchprofError(
            f"{path}: not found; {folder} is not a planted model (scripts/plant_real.py apply writes one)"
        )
    info = json.loads(path.read_text())
    regions = {a: read_region(planted_region_file(folder, a))[0] for a in info["settings"]["abilities"]}
    return regions, info


def settings_dict(settings: PlantSettings) -> dict[str, Any]:
    """The settings as JSON-ready values."""
    return asdict(settings)


def state_hash(model: torch.nn.Module) -> str:
    """sha256 of every parameter's name, shape and exact bytes (tied weights once)."""
    import hashlib

    h = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        h.update(f"{name}:{tuple(p.shape)}:{p.dtype};".encode())
        h.update(p.detach().cpu().contiguous().reshape(-1).view(-1).numpy().tobytes())
    return h.hexdigest()


def random_weight_region(model: torch.nn.Module, size: int, seed: int) -> Region:
    """`size` MLP weights drawn uniformly without replacement from every layer's gate/up/down (benchprof's
    random region: eligible weights of scope mlp)."""
    import torch

    names = sorted(
        n for n, _ in model.named_parameters() if n.endswith(("gate_proj.weight", "up_proj.weight", "down_proj.weight"))
    )
    params = dict(model.named_parameters())
    numels = [params[n].numel() for n in names]
    offsets = [0]
    for n in numels:
        offsets.append(offsets[-1] + n)
    gen = torch.Generator().manual_seed(seed)
    positions = torch.sort(torch.randperm(offsets[-1], generator=gen)[:size]).values
    region: Region = {}
    for i, name in enumerate(names):
        inside = positions[(positions >= offsets[i]) & (positions < offsets[i + 1])] - offsets[i]
        if inside.numel():
            region[name] = inside
    return region


def random_neuron_region(
    neurons: dict[str, dict[int, list[int]]], ability: str, hidden: int, intermediate: int, seed: int
) -> Region:
    """As many neurons as R_a holds, in the same layers, drawn from the neurons no ability reserved
    (base neurons): the structural twin of R_a."""
    rng = random.Random(seed)
    chosen: dict[int, list[int]] = {}
    for layer, ids in neurons[ability].items():
        reserved = {j for a in neurons for j in neurons[a][layer]}
        free = [j for j in range(intermediate) if j not in reserved]
        chosen[layer] = sorted(rng.sample(free, len(ids)))
    return neuron_region(chosen, hidden, intermediate)


def own_check(
    model: torch.nn.Module,
    tok: PreTrainedTokenizerBase,
    tests: dict[str, list[dict[str, Any]]],
    variants: dict[str, Region],
    bootstrap: int = 1000,
    seed: int = 0,
    metric: str = "acc_norm",
) -> list[dict[str, Any]]:
    """Per (variant, benchmark): accuracy before and after zeroing the variant's region, its 95% interval,
    AIS with its 95% paired bootstrap interval, and the exact McNemar test of the paired items.

    `variants`: name -> region ('all' zeroes every planted set: the base model).
    """
    import numpy as np

    from benchprof.stages.damage import ablated
    from benchprof.stats.impact import impact_score
    from benchprof.stats.paired import mcnemar_exact
    from benchprof.stats.resampling import bootstrap_ais, percentile_ci

    which = 1 if metric == "acc_norm" else 0
    original = {b: item_scores(model, tok, recs)[which] for b, recs in tests.items()}
    rows: list[dict[str, Any]] = []
    for name, region in variants.items():
        with ablated(model, region):
            after = {b: item_scores(model, tok, recs)[which] for b, recs in tests.items()}
        for b in tests:
            rng = np.random.default_rng([seed, len(rows)])
            samples = bootstrap_ais(original[b], after[b][None, :], bootstrap, rng)[0]
            idx = np.random.default_rng([seed, len(rows), 1]).integers(0, len(after[b]), (bootstrap, len(after[b])))
            lost, gained, p = mcnemar_exact(original[b], after[b])
            rows.append(
                {
                    "variant": name,
                    "benchmark": b,
                    "n": len(after[b]),
                    "original": float(original[b].mean()),
                    "ablated": float(after[b].mean()),
                    "ablated_ci": percentile_ci(after[b][idx].mean(1)),
                    "ais": float(impact_score(original[b].mean(), after[b].mean())),
                    "ais_ci": percentile_ci(samples),
                    "lost": lost,
                    "gained": gained,
                    "mcnemar_p": p,
                }
            )
    return rows


def own_check_table(rows: list[dict[str, Any]], metric: str = "acc_norm") -> str:
    """Markdown table of `own_check` rows."""
    lines = [
        f"| zeroed | benchmark | {metric} original → zeroed [95% CI] | AIS [95% CI] | lost / gained | McNemar p |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lo, hi = r["ablated_ci"]
        alo, ahi = r["ais_ci"]
        lines.append(
            f"| {r['variant']} | {r['benchmark']} | {r['original']:.3f} → {r['ablated']:.3f} [{lo:.3f}, {hi:.3f}] | "
            f"{r['ais']:+.3f} [{alo:+.3f}, {ahi:+.3f}] | {r['lost']} / {r['gained']} | {r['mcnemar_p']:.2g} |"
        )
    return "\n".join(lines)
