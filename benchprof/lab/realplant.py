"""A ground truth inside a real LLM: abilities planted into reserved MLP neurons of a pretrained model.

A from-scratch model could be planted by construction; here the base is a pretrained model
whose own abilities come from training it never saw planted (SmolLM2-135M-Instruct from scripts/fetch_real.py,
or benchprof's own 3.4 M demo model for the small planted model, assets/demo-plant), and the planted abilities
are ones it cannot have (invented.py). The build:

1. **Reserved neurons**: in each of the chosen layers, the neurons whose largest effect on general text is
   smallest are taken from the base, and dealt out at random to the abilities, the same number to each:
   neuron j of layer l is row j of gate_proj and up_proj and column j of down_proj. General text: prompts of
   benchprof's ten abilities and natural text from benchmarks the checks never score (OpenBookQA,
   WinoGrande, BoolQ, from scripts/fetch_real.py's local copies). A neuron's effect on a token is
   |activation| × the norm of its down column; the *largest* over the tokens, not the mean, because some
   neurons are silent on almost every token and huge on a few (the first token of a sequence): chosen by
   mean activation, such neurons cost ARC-Easy 0.500 → 0.425 when zeroed, chosen by the largest effect
   0.500 → 0.495 (200 documents each).
2. **Planting**: those neurons get fresh gate/up rows (random directions with the norm of the layer's
   median base row) and a zero down column; only they are trained. Each step takes one batch of every
   ability's `plant` split (lm-eval's prompt and the importance pass's chat format; loss on the answer
   tokens), whose gradient reaches that ability's neurons only, plus a penalty on the mean squared
   activation of the *other* abilities' neurons on that batch and of *every* reserved neuron on general
   text (each reaching only the neurons it penalises), so that a neuron fires for its own ability alone.
   After every step each weight outside the reserved neurons is written back from the base (bit-identical),
   and each reserved gate row is scaled back to the median base norm.
3. **Magnitude**: at the end each reserved neuron's up row and down column are rescaled by c and 1/c (the
   neuron's output is unchanged, silu(g·x)·(c·u·x)·(d/c)) so that their norms sit at the layer's base
   medians: the planted weights are no larger than the base's, and magnitude alone cannot find them.

Only the layers from the lowest reserved one up are trained, so the inputs of that layer are computed
once per example and cached (the layers below never change), and the loss reads logits at the answer
positions alone.

The result ships as a **patch** (`benchprof/assets/smollm2-plant/`; its format, its sha256 check against
the base and the planted model folder it writes are plantpatch.py's).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchprof import BenchprofError
from benchprof.abilities.invented import INVENTED, invented_splits
from benchprof.lab.planted import random_neuron_region, region_size
from benchprof.lab.plantpatch import PATCH_DIR, apply_patch, load_base, neuron_regions, save_patch, tensor_sha256
from benchprof.stages.neurons import mlp_name
from benchprof.stats.multitest import holm

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from benchprof.core.regions import Region

MODULES = ("gate_proj", "up_proj", "down_proj")
Cached = tuple[list[int], int, "torch.Tensor"]


@dataclass
class RealPlantSettings:
    """How a pretrained model is planted; stored in plant.json."""

    abilities: list[str] = field(default_factory=lambda: list(INVENTED))
    layers: list[int] = field(default_factory=lambda: [24, 25, 26, 27, 28, 29])
    neurons_per_layer: int = 24  # reserved neurons per ability and layer
    steps: int = 320
    batch_size: int = 16
    lr: float = 1e-2
    silence: float = 1.0  # weight of the penalties on reserved neurons firing where they should not
    general_per_ability: int = 40  # items of each of benchprof's ten abilities: the general text
    natural_sources: list[str] = field(default_factory=lambda: ["openbookqa", "winogrande", "boolq"])
    natural_per_source: int = 200  # documents of each source's validation copy: natural general text
    natural_max_tokens: int = 192
    data_seed: int = 0
    seed: int = 0
    threads: int = 2
    device: str = "cpu"  # where planting and the own check run (cuda on a GPU); the patch is the same format
    cap_norms: bool = False  # up rows and down columns held at most at the layer's median base norms each step


def general_records(per_ability: int, seed: int) -> list[dict[str, Any]]:
    """Prompts of benchprof's ten abilities: text on which no reserved neuron should fire."""
    from benchprof.abilities import ABILITIES, generate

    return [r for a in ABILITIES for r in generate(a, per_ability, 0, seed + 7)[0]]


def padded(batch: Sequence[tuple[list[int], int]], pad: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded ids, a mask of the answer positions (targets) and of the real tokens."""
    import torch

    length = max(len(ids) for ids, _ in batch)
    ids_t = torch.full((len(batch), length), pad, dtype=torch.long)
    answer = torch.zeros((len(batch), length), dtype=torch.bool)
    valid = torch.zeros((len(batch), length), dtype=torch.bool)
    for i, (ids, start) in enumerate(batch):
        ids_t[i, : len(ids)] = torch.tensor(ids)
        answer[i, max(1, start) : len(ids)] = True
        valid[i, : len(ids)] = True
    return ids_t, answer, valid


def run_layers(model: PreTrainedModel, hidden: torch.Tensor, first: int, last: int) -> torch.Tensor:
    """Decoder layers first..last-1 on `hidden` (right padding only: causal attention keeps every real
    position exact), as LlamaModel.forward runs them."""
    import torch

    positions = torch.arange(hidden.shape[1], device=hidden.device)[None]
    rotary = model.model.rotary_emb(hidden, positions)
    for layer in model.model.layers[first:last]:
        hidden = layer(hidden, attention_mask=None, position_embeddings=rotary, position_ids=positions)
    return hidden


def cache_inputs(
    model: PreTrainedModel, examples: list[tuple[list[int], int]], layer: int, pad: int, batch: int = 32
) -> list[Cached]:
    """Each example with the input of decoder layer `layer` (the layers below are frozen: computed once)."""
    import torch

    order = sorted(range(len(examples)), key=lambda i: len(examples[i][0]))
    out: dict[int, Cached] = {}
    with torch.no_grad():
        for start in range(0, len(order), batch):
            chunk = order[start : start + batch]
            ids, _, _ = padded([examples[i] for i in chunk], pad)
            hidden = run_layers(model, model.model.embed_tokens(ids.to(model.device)), 0, layer)
            for row, i in enumerate(chunk):
                tokens, first = examples[i]
                out[i] = (tokens, first, hidden[row, : len(tokens)].clone())
    return [out[i] for i in range(len(examples))]


def natural_examples(
    tok: PreTrainedTokenizerBase, folder: Path, sources: Sequence[str], per_source: int, max_tokens: int
) -> list[tuple[list[int], int]]:
    """Natural English from the local benchmark copies in `folder` (scripts/fetch_real.py's real/benchmarks):
    per source the first `per_source` validation documents as plain text (an OpenBookQA question with its right
    answer, a WinoGrande sentence with its blank filled, a BoolQ passage with its question), at most `max_tokens`
    tokens each; none of them is a document the checks score."""
    from datasets import load_from_disk

    def text(source: str, doc: dict[str, Any]) -> str:
        if source == "openbookqa":
            return f"{doc['question_stem']} {doc['choices']['text'][doc['choices']['label'].index(doc['answerKey'])]}"
        if source == "winogrande":
            return str(doc["sentence"]).replace("_", str(doc["option" + str(doc["answer"])]))
        if source == "boolq":
            return f"{doc['passage']}\nQuestion: {doc['question']}?\nAnswer: {'yes' if doc['answer'] else 'no'}"
        raise BenchprofError(f"realplant natural_sources: no text rule for {source!r}")

    out = []
    for source in sources:
        path = Path(folder) / source / "validation"
        if not path.is_dir():
            raise BenchprofError(f"{path}: no local copy of {source}; run scripts/fetch_real.py first")
        docs = load_from_disk(str(path))
        for doc in docs.select(range(min(per_source, len(docs)))):
            ids = tok(text(source, doc), add_special_tokens=False)["input_ids"][:max_tokens]
            out.append((ids, len(ids)))
    return out


def least_effect_neurons(
    model: PreTrainedModel, general: list[Cached], layers: list[int], first: int, count: int
) -> dict[int, list[int]]:
    """Per layer, the `count` neurons whose largest effect on the general text is smallest: effect of neuron j
    on a token = |activation_j| × ‖down_proj[:, j]‖, its largest over the real (unpadded) tokens."""
    import torch

    largest = {layer: torch.zeros(model.config.intermediate_size, device=model.device) for layer in layers}
    current: dict[str, torch.Tensor] = {}  # the real-token mask of the chunk running

    def record(layer: int, activation: torch.Tensor) -> None:
        masked = activation.abs() * current["valid"][..., None]
        torch.maximum(largest[layer], masked.amax((0, 1)), out=largest[layer])

    hooks = [
        model.model.layers[layer].mlp.down_proj.register_forward_pre_hook(
            lambda _m, inputs, layer=layer: record(layer, inputs[0])
        )
        for layer in layers
    ]
    try:
        with torch.no_grad():
            for start in range(0, len(general), 32):
                chunk = general[start : start + 32]
                current["valid"] = padded([(ids, len(ids)) for ids, _, _ in chunk], 0)[2].float().to(model.device)
                run_layers(model, stack_hidden(chunk), first, len(model.model.layers))
    finally:
        for hook in hooks:
            hook.remove()
    out = {}
    for layer in layers:
        effect = largest[layer] * model.model.layers[layer].mlp.down_proj.weight.detach().norm(dim=0)
        out[layer] = torch.argsort(effect.cpu())[:count].tolist()
    return out


def stack_hidden(batch: Sequence[Cached]) -> torch.Tensor:
    """The cached inputs of a batch, right-padded with zeros."""
    import torch

    length = max(len(ids) for ids, _, _ in batch)
    hidden = torch.zeros((len(batch), length, batch[0][2].shape[-1]), device=batch[0][2].device)
    for i, (ids, _, h) in enumerate(batch):
        hidden[i, : len(ids)] = h
    return hidden


def deal_neurons(
    quiet: dict[int, list[int]], abilities: list[str], per: int, seed: int
) -> dict[str, dict[int, list[int]]]:
    """The quiet neurons of each layer dealt out at random: ability -> layer -> sorted ids, disjoint."""
    rng = random.Random(seed + 17)
    out: dict[str, dict[int, list[int]]] = {a: {} for a in abilities}
    for layer, ids in quiet.items():
        ids = list(ids)
        rng.shuffle(ids)
        for i, ability in enumerate(abilities):
            out[ability][layer] = sorted(ids[i * per : (i + 1) * per])
    return out


def median_norms(model: PreTrainedModel, layer: int, exclude: list[int]) -> dict[str, float]:
    """The layer's median base norm of gate rows, up rows and down columns, over neurons not reserved."""
    import torch

    mlp = model.model.layers[layer].mlp
    keep = torch.ones(model.config.intermediate_size, dtype=torch.bool)
    keep[exclude] = False
    with torch.no_grad():  # a read of the weights, whether or not they are being trained
        return {
            "gate_proj": float(mlp.gate_proj.weight[keep].norm(dim=1).median()),
            "up_proj": float(mlp.up_proj.weight[keep].norm(dim=1).median()),
            "down_proj": float(mlp.down_proj.weight[:, keep].norm(dim=0).median()),
        }


def plant(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    settings: RealPlantSettings,
    natural_folder: Path,
    log: Callable[[str], None] = print,
) -> tuple[dict[str, dict[int, list[int]]], dict[str, Any]]:
    """Plant the abilities into `model` in place (module docstring); returns (neurons, build figures)."""
    import torch
    import torch.nn.functional as F

    from benchprof.lab.training import Batches, cosine_schedule, encode_examples

    started = time.time()
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    first = min(settings.layers)
    for p in model.parameters():
        p.requires_grad_(False)
    splits = {a: invented_splits(a, settings.data_seed) for a in settings.abilities}
    cached = {a: cache_inputs(model, encode_examples(tok, splits[a]["plant"]), first, pad) for a in settings.abilities}
    prompts = encode_examples(tok, general_records(settings.general_per_ability, settings.data_seed))
    natural = natural_examples(
        tok, natural_folder, settings.natural_sources, settings.natural_per_source, settings.natural_max_tokens
    )
    general = cache_inputs(model, prompts + natural, first, pad)
    cache_seconds = time.time() - started
    quiet = least_effect_neurons(
        model, general, settings.layers, first, settings.neurons_per_layer * len(settings.abilities)
    )
    neurons = deal_neurons(quiet, settings.abilities, settings.neurons_per_layer, settings.seed)
    reserved = {layer: sorted(j for a in settings.abilities for j in neurons[a][layer]) for layer in settings.layers}
    norms = {layer: median_norms(model, layer, reserved[layer]) for layer in settings.layers}

    params = {
        (layer, m): getattr(model.model.layers[layer].mlp, m).weight for layer in settings.layers for m in MODULES
    }
    base = {key: p.detach().clone() for key, p in params.items()}

    def mask_of(layer: int, module: str, ids: list[int]) -> torch.Tensor:
        mask = torch.zeros_like(base[(layer, module)], dtype=torch.bool)
        if module == "down_proj":
            mask[:, ids] = True
        else:
            mask[ids] = True
        return mask

    masks = {a: {key: mask_of(*key, neurons[a][key[0]]) for key in params} for a in settings.abilities}
    union = {key: mask_of(*key, reserved[key[0]]) for key in params}
    others_masks = {a: {key: union[key] & ~masks[a][key] for key in params} for a in settings.abilities}
    gen = torch.Generator().manual_seed(settings.seed + 1)
    with torch.no_grad():
        for (layer, module), p in params.items():
            ids = reserved[layer]
            if module == "down_proj":
                p[:, ids] = 0.0
            else:
                fresh = torch.randn((len(ids), p.shape[1]), generator=gen).to(p.device)  # the CPU's draws
                p[ids] = fresh / fresh.norm(dim=1, keepdim=True) * norms[layer][module]
            p.requires_grad_(True)

    activations: dict[int, torch.Tensor] = {}
    hooks = [
        model.model.layers[layer].mlp.down_proj.register_forward_pre_hook(
            lambda _m, inputs, layer=layer: activations.__setitem__(layer, inputs[0])
        )
        for layer in settings.layers
    ]

    def forward(batch: list[Cached]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        ids, answer, valid = (t.to(model.device) for t in padded([(t, s) for t, s, _ in batch], pad))
        hidden = model.model.norm(run_layers(model, stack_hidden(batch), first, len(model.model.layers)))
        return hidden, ids, answer, valid

    def answer_loss(hidden: torch.Tensor, ids: torch.Tensor, answer: torch.Tensor) -> torch.Tensor:
        targets = answer[:, 1:]
        logits = model.lm_head(hidden[:, :-1][targets])
        return F.cross_entropy(logits.float(), ids[:, 1:][targets])

    def firing(valid: torch.Tensor, who: list[str]) -> torch.Tensor:
        terms = []
        for layer in settings.layers:
            ids = [j for a in who for j in neurons[a][layer]]
            terms.append((activations[layer][valid][:, ids] ** 2).mean())
        return settings.silence * torch.stack(terms).mean()

    def collect(
        loss: torch.Tensor, into: dict[Any, torch.Tensor], where: dict[Any, torch.Tensor], retain: bool
    ) -> None:
        loss.backward(retain_graph=retain)
        for key, p in params.items():
            if p.grad is not None:
                into[key] += p.grad * where[key]
            p.grad = None

    rng = random.Random(settings.seed)
    streams = {a: Batches(cached[a], settings.batch_size, rng) for a in settings.abilities}
    general_stream = Batches(general, settings.batch_size, rng)
    opt = torch.optim.AdamW(list(params.values()), lr=settings.lr, weight_decay=0.0, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, cosine_schedule(settings.steps))
    train_started = time.time()
    try:
        for step in range(settings.steps):
            grads = {key: torch.zeros_like(p) for key, p in params.items()}
            losses = []
            for ability in settings.abilities:
                hidden, tokens, answer, valid = forward(streams[ability].next())
                others = [b for b in settings.abilities if b != ability]
                loss = answer_loss(hidden, tokens, answer)
                losses.append(loss.item())
                collect(loss, grads, masks[ability], retain=True)
                collect(firing(valid, others), grads, others_masks[ability], retain=False)
            _, _, _, valid = forward(general_stream.next())
            noise = firing(valid, settings.abilities)
            collect(noise, grads, union, retain=False)
            for key, p in params.items():
                p.grad = grads[key]
            torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            with torch.no_grad():
                for (layer, module), p in params.items():
                    p.copy_(torch.where(union[(layer, module)], p, base[(layer, module)]))
                    if module == "gate_proj":
                        rows = p[reserved[layer]]
                        p[reserved[layer]] = rows / rows.norm(dim=1, keepdim=True) * norms[layer][module]
                    elif settings.cap_norms:  # no planted up row or down column larger than the base's median
                        dim = 0 if module == "down_proj" else 1
                        part = p[:, reserved[layer]] if module == "down_proj" else p[reserved[layer]]
                        size = part.norm(dim=dim, keepdim=True).clamp_min(1e-12)
                        capped = part * (norms[layer][module] / size).clamp(max=1.0)
                        if module == "down_proj":
                            p[:, reserved[layer]] = capped
                        else:
                            p[reserved[layer]] = capped
            if step % 25 == 0 or step == settings.steps - 1:
                shown = " ".join(f"{v:.3f}" for v in losses)
                log(
                    f"plant step {step:4d}  losses {shown}  general {noise.item():.4f}  "
                    f"{time.time() - train_started:.0f}s"
                )
    finally:
        for hook in hooks:
            hook.remove()
        for p in model.parameters():
            p.requires_grad_(True)
    with torch.no_grad():  # the neurons' outputs unchanged, their up rows and down columns at base norms
        for layer in settings.layers:
            mlp = model.model.layers[layer].mlp
            ids = reserved[layer]
            up, down = mlp.up_proj.weight[ids], mlp.down_proj.weight[:, ids]
            scale = norms[layer]["up_proj"] / up.norm(dim=1).clamp_min(1e-12)
            mlp.up_proj.weight[ids] = up * scale[:, None]
            mlp.down_proj.weight[:, ids] = down / scale[None, :]
    figures = {
        "seconds": {"cache": round(cache_seconds), "train": round(time.time() - train_started)},
        "median_norms": {str(layer): norms[layer] for layer in settings.layers},
    }
    return neurons, figures


def own_check_real(
    model: PreTrainedModel,
    tok: PreTrainedTokenizerBase,
    neurons: dict[str, dict[int, list[int]]],
    random_draws: int = 3,
    seed: int = 0,
    data_seed: int = 0,
) -> list[dict[str, Any]]:
    """The planted model's own check on the abilities' test splits: each ability's set zeroed, the other
    abilities' sets, random MLP weights of the same size (`random_draws`) and as many random unreserved
    neurons in the same layers. Rows as planted.own_check, plus Holm-adjusted McNemar p-values: over the
    own rows (the claim that R_a removes a) and over the control rows (a control that removes something)."""
    from benchprof.lab.planted import own_check, random_weight_region

    hidden, intermediate = model.config.hidden_size, model.config.intermediate_size
    regions = neuron_regions(neurons, hidden, intermediate)
    tests = {a: invented_splits(a, data_seed)["test"] for a in neurons}
    variants: dict[str, Region] = {f"R[{a}]": r for a, r in regions.items()}
    size = region_size(next(iter(regions.values())))
    for d in range(random_draws):
        variants[f"random weights #{d + 1}"] = random_weight_region(model, size, seed + 100 + d)
    for i, a in enumerate(neurons):
        variants[f"random neurons ({a} layers)"] = random_neuron_region(
            neurons, a, hidden, intermediate, seed + 200 + i
        )
    rows = own_check(model, tok, tests, variants, bootstrap=1000, seed=seed, metric="acc")
    own = [i for i, r in enumerate(rows) if r["variant"] == f"R[{r['benchmark']}]"]
    control = [i for i in range(len(rows)) if i not in own]
    for family, members in (("own", own), ("control", control)):
        for i, p in zip(members, holm([rows[i]["mcnemar_p"] for i in members]), strict=True):
            rows[i]["family"], rows[i]["holm_p"] = family, float(p)
    return rows


def accuracy(
    model: PreTrainedModel, tok: PreTrainedTokenizerBase, data_seed: int, abilities: Sequence[str]
) -> dict[str, float]:
    """acc (summed log-likelihood, as lm-eval's `acc`) on each invented ability's test split."""
    from benchprof.stages.choices import item_scores

    return {a: float(item_scores(model, tok, invented_splits(a, data_seed)["test"])[0].mean()) for a in abilities}


def build(
    settings: RealPlantSettings,
    base_folder: Path,
    out: Path = PATCH_DIR,
    log: Callable[[str], None] = print,
    natural_folder: Path | None = None,
) -> dict[str, Any]:
    """Plant `settings.abilities` into the fetched base in `base_folder`, own-check it, write the patch to `out`.
    natural_folder: the local benchmark copies the general text is read from (default: `benchmarks` beside the
    base, where scripts/fetch_real.py puts them)."""
    import torch

    from benchprof.core.modeling import FETCH_RECEIPT, pick_device

    device = pick_device(settings.device, "realplant device (--device)")  # one line before any heavy work
    started = time.time()
    model, tok = load_base(base_folder, settings.threads)
    touched = [mlp_name(layer, m) for layer in settings.layers for m in MODULES]
    params = dict(model.named_parameters())
    base_hashes = {name: tensor_sha256(params[name]) for name in touched}
    torch.nn.Module.to(model, device)  # (PreTrainedModel.to is typed as a decorator)
    before = accuracy(model, tok, settings.data_seed, settings.abilities)
    log("base: " + "  ".join(f"{a} {v:.3f}" for a, v in before.items()))
    natural = natural_folder if natural_folder is not None else Path(base_folder).parent / "benchmarks"
    neurons, figures = plant(model, tok, settings, natural, log)
    after = accuracy(model, tok, settings.data_seed, settings.abilities)
    log("planted: " + "  ".join(f"{a} {v:.3f}" for a, v in after.items()))
    rows = own_check_real(model, tok, neurons, seed=settings.seed, data_seed=settings.data_seed)
    torch.nn.Module.to(model, "cpu")
    regions = neuron_regions(neurons, model.config.hidden_size, model.config.intermediate_size)
    fetched = Path(base_folder) / FETCH_RECEIPT
    info = {
        "settings": asdict(settings),
        "base_source": json.loads(fetched.read_text()) if fetched.is_file() else Path(base_folder).name,
        "planted_weights": {a: region_size(r) for a, r in regions.items()},
        "total_params": sum(p.numel() for p in model.parameters()),
        "test_accuracy": {"base": before, "planted": after},
        "own_check": rows,
        "seconds": {**figures["seconds"], "total": round(time.time() - started)},
        "median_norms": figures["median_norms"],
    }
    save_patch(out, model, base_hashes, neurons, info)
    log(f"patch written to {os.path.relpath(out)} in {time.time() - started:.0f}s")  # no machine path in a kept log
    return info


def benchmark_check(
    base_folder: Path,
    config: Path,
    benchmarks: Sequence[str],
    patch: Path = PATCH_DIR,
    limit: int = 200,
) -> list[dict[str, Any]]:
    """The base against the patched base on real benchmarks (the config's local copies and tasks), scored by
    lm-eval through benchprof's scorer: per benchmark the mean of its primary metric before and after, the
    documents lost and gained, the exact McNemar p and its Holm adjustment over the benchmarks."""

    from benchprof.core.loader import load_config
    from benchprof.stages.evaluate import document_scores
    from benchprof.stages.prefix_scorer import SharedPrefixLM
    from benchprof.stages.tasks import benchmark_tasks
    from benchprof.stats.paired import mcnemar_exact

    cfg = load_config(config)
    tasks, manager = benchmark_tasks(cfg, list(benchmarks), str(config))
    model, tok = load_base(base_folder, threads=2)
    lm = SharedPrefixLM(pretrained=model, tokenizer=tok, batch_size=16)
    before = document_scores(lm, tasks, limit, manager, cfg.settings.seed)
    apply_patch(model, patch)
    after = document_scores(lm, tasks, limit, manager, cfg.settings.seed)
    rows: list[dict[str, Any]] = []
    for benchmark in benchmarks:
        lost, gained, p = mcnemar_exact(before[benchmark], after[benchmark])
        rows.append(
            {
                "benchmark": benchmark,
                "n": len(before[benchmark]),
                "base_acc": float(before[benchmark].mean()),
                "patched_acc": float(after[benchmark].mean()),
                "lost": lost,
                "gained": gained,
                "mcnemar_p": p,
            }
        )
    for row, adjusted in zip(rows, holm([float(r["mcnemar_p"]) for r in rows]), strict=True):
        row["holm_p"] = float(adjusted)
    return rows


def magnitude_precision(model: PreTrainedModel, regions: dict[str, Region]) -> dict[str, float]:
    """Per ability: the share of its planted weights among the |R_a| largest-|θ| MLP weights of the model (what
    magnitude alone would find; chance is |R_a| / MLP weights)."""
    import torch

    names = sorted(n for n, _ in model.named_parameters() if ".mlp." in n and n.endswith("_proj.weight"))
    params = dict(model.named_parameters())
    flat = torch.cat([params[n].detach().abs().reshape(-1) for n in names])
    offsets, start = {}, 0
    for n in names:
        offsets[n], start = start, start + params[n].numel()
    out = {}
    for ability, region in regions.items():
        size = region_size(region)
        top = torch.zeros(flat.numel(), dtype=torch.bool)
        top[torch.topk(flat, size).indices] = True
        hits = sum(int(top[offsets[n] + idx.long()].sum()) for n, idx in region.items())
        out[ability] = hits / size
    return out
