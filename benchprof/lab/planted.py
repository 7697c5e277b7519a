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
from benchprof.core.prompts import eval_prompt
from benchprof.core.regions import read_region, write_region

if TYPE_CHECKING:
    import numpy as np
    import torch
    from numpy.typing import NDArray
    from transformers import PreTrainedTokenizerBase

    from benchprof.core.regions import Region

MLP_ROWS = ("gate_proj", "up_proj")  # neuron j = row j of these ...
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


def mlp_name(layer: int, module: str) -> str:
    """The parameter name of one MLP matrix of a LlamaForCausalLM."""
    return f"model.layers.{layer}.mlp.{module}.weight"


def neuron_region(neurons: dict[int, list[int]], hidden: int, intermediate: int) -> Region:
    """The flat indices (region format) of the weights of these neurons: for neuron j of layer l,
    row j of gate_proj and up_proj (shape intermediate x hidden) and column j of down_proj
    (hidden x intermediate)."""
    import torch

    region: Region = {}
    for layer, ids in sorted(neurons.items()):
        if not ids:
            continue
        j = torch.tensor(sorted(ids), dtype=torch.int64)
        cols = torch.arange(hidden, dtype=torch.int64)
        rows = (j[:, None] * hidden + cols[None, :]).reshape(-1)
        for module in MLP_ROWS:
            region[mlp_name(layer, module)] = rows
        down = (cols[:, None] * intermediate + j[None, :]).reshape(-1)
        region[mlp_name(layer, "down_proj")] = torch.sort(down).values
    return region


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


# one multiple-choice row: (item, option, context ids, option ids, characters of " option")
McRow = tuple[int, int, list[int], list[int], int]


def mc_rows(tok: PreTrainedTokenizerBase, records: Sequence[dict[str, Any]]) -> list[McRow]:
    """Every (item, option) of the records as lm-eval builds a multiple-choice request: the prompt, then ' option'."""
    rows: list[McRow] = []
    for i, record in enumerate(records):
        ctx = tok(eval_prompt(record), add_special_tokens=False)["input_ids"]
        for j, option in enumerate(record["options"]):
            cont = tok(" " + option, add_special_tokens=False)["input_ids"]
            rows.append((i, j, ctx, cont, len(" " + option)))
    return rows


def forward_rows(model: torch.nn.Module, rows: Sequence[McRow]) -> list[list[int]]:
    """The rows `option_logliks` runs as one packed sequence each, in order: an item's rows together where the
    model's attention takes a 4D mask, one row each otherwise."""
    from benchprof.stages.prefix_scorer import PACKABLE_ATTENTION

    if getattr(model.config, "_attn_implementation", None) not in PACKABLE_ATTENTION:
        return [[r] for r in range(len(rows))]
    groups: dict[int, list[int]] = {}
    for r, row in enumerate(rows):
        groups.setdefault(row[0], []).append(r)
    return list(groups.values())


def option_logliks(model: torch.nn.Module, rows: Sequence[McRow], pad: int) -> torch.Tensor:
    """The summed log-likelihood of each row's option tokens after its context (gradients flow).

    One forward pass of the decoder over one packed row per item: the context once, each option a branch of it
    (stages.prefix_scorer's token trie; a 4D mask lets a token see its ancestors only, position ids are depths),
    so an item's context is not recomputed per option. The LM head runs only where an option token is predicted.
    A model whose attention cannot take such a mask is run on the plain right-padded rows instead."""
    import torch

    from benchprof.stages.prefix_scorer import TokenTrie

    device = next(model.parameters()).device
    packed = []
    for group in forward_rows(model, rows):
        packed.append(TokenTrie())
        for r in group:
            packed[-1].add(r, (rows[r][2] + rows[r][3])[:-1], len(rows[r][3]))
    width = max(len(t) for t in packed)
    ids = torch.full((len(packed), width), pad, dtype=torch.long)
    positions = torch.zeros((len(packed), width), dtype=torch.long)
    allowed = torch.eye(width, dtype=torch.bool).repeat(len(packed), 1, 1, 1)  # padding sees itself only
    for b, t in enumerate(packed):
        ids[b, : len(t)] = torch.tensor(t.tokens)
        positions[b, : len(t)] = torch.tensor(t.depths)
        allowed[b, 0, : len(t), : len(t)] = torch.from_numpy(t.ancestors())
    dtype = next(model.parameters()).dtype
    mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)
    row_of: list[int] = []
    at_row: list[int] = []
    at_node: list[int] = []
    token: list[int] = []
    for b, t in enumerate(packed):
        for r, nodes in t.scored:
            row_of += [r] * len(nodes)
            at_row += [b] * len(nodes)
            at_node += nodes
            token += rows[r][3]
    decoder: Any = model.base_model
    hidden = decoder(
        input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=positions.to(device), use_cache=False
    ).last_hidden_state[torch.tensor(at_row, device=device), torch.tensor(at_node, device=device)]
    head: Any = model.get_output_embeddings()  # type: ignore[operator]
    logp = torch.log_softmax(head(hidden).float(), -1)
    picked = logp[torch.arange(len(token), device=device), torch.tensor(token, device=device)]
    return torch.zeros(len(rows), device=device).index_add(0, torch.tensor(row_of, device=device), picked)


def item_scores(
    model: torch.nn.Module, tok: PreTrainedTokenizerBase, records: list[dict[str, Any]], batch_rows: int = 128
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per-item 0/1 correctness as lm-eval scores a multiple-choice task: (acc, acc_norm).

    acc: the option with the largest summed log-likelihood of ' option' after the prompt; acc_norm: the
    largest log-likelihood per character of the option text (lm-eval's normalisation); ties go to the first.
    """
    import numpy as np
    import torch

    rows = mc_rows(tok, records)
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    loglik = np.zeros(len(rows))
    with torch.no_grad():
        for start in range(0, len(rows), batch_rows):
            chunk = rows[start : start + batch_rows]
            loglik[start : start + len(chunk)] = option_logliks(model, chunk, pad).double().cpu().numpy()
    acc, acc_norm = np.zeros(len(records)), np.zeros(len(records))
    pos = 0
    for i, record in enumerate(records):
        n = len(record["options"])
        values = loglik[pos : pos + n]
        chars = np.array([rows[pos + j][4] for j in range(n)], dtype=float)
        acc[i] = float(int(np.argmax(values)) == record["label"])
        acc_norm[i] = float(int(np.argmax(values / chars)) == record["label"])
        pos += n
    return acc, acc_norm


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
