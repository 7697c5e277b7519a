"""A planted model: a small Llama whose abilities live in known MLP neurons, by construction (issue 19).

Build (scripts/build_planted_model.py):
1. **Base**: a Llama trained on the chosen abilities' prompts (lm-eval format and chat format) with
   each answer replaced by the answer of a random other item of the same ability and question type,
   so it learns the format and the answers' vocabulary but stays at chance on every ability. During
   this phase the reserved neurons are held at zero: the base model does not use them.
2. **Planting**: every ability a owns a disjoint set R_a of MLP neurons (neuron j of layer l: row j of
   gate_proj and up_proj, column j of down_proj) in the chosen layers. Those neurons get a fresh
   init (gate/up rows random, down column zero, so the model is unchanged at the start), and only
   they are trained, on a's real data (round robin over the abilities, each ability's loss reaching
   only its own neurons through a gradient mask). After every optimizer step every weight outside
   the union of the R_a is put back to its base value, so it stays bit-identical.
Everything the model knows above chance about ability a then sits in R_a; zeroing every R_a gives
back the base model exactly.

The planted sets are saved beside the model: `planted/<ability>.safetensors` in benchprof's region
format (sorted flat indices per parameter; regions.read_region reads them) and `planted.json`
(neuron ids per ability and layer, the build settings and the own check).
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import BenchprofError
from .prompts import chat_messages, eval_prompt
from .regions import read_region, write_region

if TYPE_CHECKING:
    import numpy as np
    import torch
    from numpy.typing import NDArray
    from transformers import PreTrainedTokenizerBase

    from .regions import Region

MLP_ROWS = ("gate_proj", "up_proj")  # neuron j = row j of these ...
MLP_COLUMNS = ("down_proj",)  # ... and column j of this
# (token ids, first loss position) of one training example
Example = tuple[list[int], int]


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


def shuffled_answers(records: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """The records with each answer replaced by the answer of a random record of the same question type:
    the answer is independent of the question (no leak of the ability), its vocabulary unchanged."""
    pools: dict[str, list[str]] = {}
    for r in records:
        pools.setdefault(r["question_type"], []).append(r["answer"])
    out = []
    for r in records:
        answer = rng.choice(pools[r["question_type"]])
        out.append({**r, "answer": answer})
    return out


def echo_answers(records: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """The records with each answer replaced by a random span of one to three words of their own context
    and question: teaches the base to carry what the prompt says to the answer position (generic reading,
    as copying heads do in real models) without teaching any ability's mapping from question to answer."""
    out = []
    for r in records:
        words = [w.strip(".,?!;:'\"") for w in f"{r['context']} {r['question']}".split()]
        words = [w for w in words if w]
        length = min(len(words), rng.randint(1, 3))
        start = rng.randrange(len(words) - length + 1)
        out.append({**r, "answer": " ".join(words[start : start + length])})
    return out


def encode_examples(tok: PreTrainedTokenizerBase, records: list[dict[str, Any]]) -> list[Example]:
    """Each record in both formats the pipeline uses: the lm-eval prompt + ' answer' + eos, and the
    chat format of the importance pass; the loss-weighted answer starts at the returned position."""
    examples: list[Example] = []
    for record in records:
        p_ids = tok(eval_prompt(record), add_special_tokens=False)["input_ids"]
        a_ids = tok(" " + record["answer"], add_special_tokens=False)["input_ids"]
        examples.append((p_ids + a_ids + [tok.eos_token_id], len(p_ids)))
        messages = chat_messages(record)
        full = str(tok.apply_chat_template(messages, tokenize=False))
        head = str(tok.apply_chat_template(messages[:-1], tokenize=False, add_generation_prompt=True))
        ids = tok(full, add_special_tokens=False)["input_ids"]
        examples.append((ids, len(tok(head, add_special_tokens=False)["input_ids"])))
    return examples


def batch_tensors(
    batch: Sequence[Example], pad_id: int, max_len: int, answer_weight: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded input ids and per-position loss weights (answer tokens weigh `answer_weight`)."""
    import torch

    length = min(max_len, max(len(ids) for ids, _ in batch))
    input_ids = torch.full((len(batch), length), pad_id, dtype=torch.long)
    weights = torch.zeros((len(batch), length))
    for i, (ids, start) in enumerate(batch):
        ids = ids[:length]
        input_ids[i, : len(ids)] = torch.tensor(ids)
        weights[i, 1 : len(ids)] = 1.0
        weights[i, max(1, start) : len(ids)] = answer_weight
    return input_ids, weights


def weighted_loss(model: torch.nn.Module, input_ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Weighted mean next-token cross-entropy."""
    import torch.nn.functional as F

    logits = model(input_ids=input_ids).logits[:, :-1]
    token_loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), input_ids[:, 1:].reshape(-1), reduction="none")
    w = weights[:, 1:].reshape(-1)
    return (token_loss * w).sum() / w.sum()


class Batches:
    """An endless stream of shuffled batches over one list of examples."""

    def __init__(self, examples: list[Example], batch_size: int, rng: random.Random) -> None:
        self.examples, self.batch_size, self.rng, self.pos = list(examples), batch_size, rng, len(examples)

    def next(self) -> list[Example]:
        if self.pos + self.batch_size > len(self.examples):
            self.rng.shuffle(self.examples)
            self.pos = 0
        self.pos += self.batch_size
        return self.examples[self.pos - self.batch_size : self.pos]


def cosine_schedule(steps: int) -> Callable[[int], float]:
    """Linear warm-up over 5% of the steps, then cosine decay to 0."""
    warmup = max(1, steps // 20)
    return lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / steps)))


def train_base(
    model: torch.nn.Module,
    examples: list[Example],
    reserved: dict[str, torch.Tensor],
    settings: PlantSettings,
    pad_id: int,
    log: Callable[[str], None] = print,
) -> None:
    """Train every weight on the shuffled-answer examples, holding the reserved neurons at zero."""
    import torch

    with torch.no_grad():
        params = dict(model.named_parameters())
        for name, mask in reserved.items():
            params[name][mask] = 0.0
    opt = torch.optim.AdamW(model.parameters(), lr=settings.base_lr, weight_decay=0.0, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, cosine_schedule(settings.base_steps))
    batches = Batches(examples, settings.batch_size, random.Random(settings.seed))
    model.train()
    started = time.time()
    for step in range(settings.base_steps):
        ids, w = batch_tensors(batches.next(), pad_id, settings.max_len, settings.answer_weight)
        loss = weighted_loss(model, ids, w)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            for name, mask in reserved.items():
                params[name][mask] = 0.0
        if step % 200 == 0 or step == settings.base_steps - 1:
            log(f"base step {step:5d}  loss {loss.item():.3f}  {time.time() - started:.0f}s")
    model.eval()


def train_planted(
    model: torch.nn.Module,
    examples: dict[str, list[Example]],
    masks: dict[str, dict[str, torch.Tensor]],
    settings: PlantSettings,
    pad_id: int,
    log: Callable[[str], None] = print,
    neurons: dict[str, dict[int, list[int]]] | None = None,
) -> None:
    """Train only the reserved neurons: each step one batch of every ability's real data, whose loss
    gradient reaches only that ability's neurons; then every other weight is reset to its value before
    planting, so it stays bit-identical.

    With `neurons` (ability -> layer -> ids) and `settings.silence` > 0, each batch of ability a also
    penalises the mean squared activation of every other ability's neurons on a's tokens (weight
    `settings.silence`, gradient to those neurons only): neurons trained for b stay quiet on a's
    prompts, so abilities do not disturb each other. Nothing of a's answers reaches b's neurons.
    """
    import torch

    params = dict(model.named_parameters())
    touched = sorted({name for m in masks.values() for name in m})
    union = {name: torch.zeros_like(params[name], dtype=torch.bool) for name in touched}
    for m in masks.values():
        for name, mask in m.items():
            union[name] |= mask
    frozen = {name: params[name].detach().clone() for name in touched}
    gen = torch.Generator().manual_seed(settings.seed + 1)
    with torch.no_grad():  # fresh neurons: gate/up rows random, down column zero (the model is unchanged)
        for name in touched:
            if name.endswith(tuple(f"{m}.weight" for m in MLP_ROWS)):
                fresh = torch.randn(params[name].shape, generator=gen) * settings.plant_init_std
                params[name][union[name]] = fresh[union[name]]
            else:
                params[name][union[name]] = 0.0
    for name, p in params.items():
        p.requires_grad_(name in union)
    activations: dict[int, torch.Tensor] = {}
    hooks = []
    if neurons and settings.silence > 0:
        layers = sorted({layer for per in neurons.values() for layer in per})
        for layer in layers:
            module = dict(model.named_modules())[f"model.layers.{layer}.mlp.down_proj"]

            def keep(_: torch.nn.Module, inputs: tuple[torch.Tensor, ...], layer: int = layer) -> None:
                activations[layer] = inputs[0]

            hooks.append(module.register_forward_pre_hook(keep))
    trainable = [params[name] for name in touched]
    opt = torch.optim.AdamW(trainable, lr=settings.plant_lr, weight_decay=0.0, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, cosine_schedule(settings.plant_steps))
    streams = {
        a: Batches(ex, settings.batch_size, random.Random(settings.seed + i + 2))
        for i, (a, ex) in enumerate(examples.items())
    }
    others_mask = {a: {n: union[n] & ~masks[a][n] if n in masks[a] else union[n] for n in touched} for a in streams}
    model.train()
    started = time.time()
    for step in range(settings.plant_steps):
        grads = {name: torch.zeros_like(params[name]) for name in touched}
        losses, quiet = [], []
        for ability, stream in streams.items():
            ids, w = batch_tensors(stream.next(), pad_id, settings.max_len, settings.answer_weight)
            valid = (w > 0).float()[..., None]
            if settings.plant_answer_only:  # the loss on the answer tokens alone: what the ability is
                w = (w >= settings.answer_weight).float()
            loss = weighted_loss(model, ids, w)
            penalty = None
            if hooks and neurons is not None:
                terms = []
                for other, per in neurons.items():
                    if other == ability:
                        continue
                    for layer, ids_ in per.items():
                        act = activations[layer][..., ids_]
                        terms.append(((act**2) * valid).sum() / (valid.sum() * len(ids_)))
                penalty = settings.silence * torch.stack(terms).mean() if terms else None
            loss.backward(retain_graph=penalty is not None)
            losses.append(loss.item())
            for name in touched:
                grad = params[name].grad
                if grad is not None and name in masks[ability]:
                    grads[name] += grad * masks[ability][name]
                params[name].grad = None
            if penalty is not None:
                penalty.backward()
                quiet.append(penalty.item())
                for name in touched:
                    grad = params[name].grad
                    if grad is not None:
                        grads[name] += grad * others_mask[ability][name]
                    params[name].grad = None
        for name in touched:
            params[name].grad = grads[name]
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            for name in touched:
                params[name].copy_(torch.where(union[name], params[name], frozen[name]))
        if step % 50 == 0 or step == settings.plant_steps - 1:
            shown = " ".join(f"{v:.3f}" for v in losses)
            silence = f"  silence {sum(quiet) / len(quiet):.4f}" if quiet else ""
            log(f"plant step {step:5d}  losses {shown}{silence}  {time.time() - started:.0f}s")
    for hook in hooks:
        hook.remove()
    for p in params.values():
        p.requires_grad_(True)
    model.eval()


def item_scores(
    model: torch.nn.Module, tok: PreTrainedTokenizerBase, records: list[dict[str, Any]], batch_rows: int = 128
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per-item 0/1 correctness as lm-eval scores a multiple-choice task: (acc, acc_norm).

    acc: the option with the largest summed log-likelihood of ' option' after the prompt; acc_norm: the
    largest log-likelihood per character of the option text (lm-eval's normalisation); ties go to the first.
    """
    import numpy as np
    import torch

    rows: list[tuple[int, int, list[int], list[int], int]] = []  # item, option, ctx, cont, chars
    for i, record in enumerate(records):
        ctx = tok(eval_prompt(record), add_special_tokens=False)["input_ids"]
        for j, option in enumerate(record["options"]):
            cont = tok(" " + option, add_special_tokens=False)["input_ids"]
            rows.append((i, j, ctx, cont, len(" " + option)))
    loglik = np.zeros(len(rows))
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    with torch.no_grad():
        for start in range(0, len(rows), batch_rows):
            chunk = rows[start : start + batch_rows]
            length = max(len(c) + len(o) for _, _, c, o, _ in chunk)
            ids = torch.full((len(chunk), length), pad, dtype=torch.long)
            for r, (_, _, c, o, _) in enumerate(chunk):
                ids[r, : len(c) + len(o)] = torch.tensor(c + o)
            logp = torch.log_softmax(model(input_ids=ids).logits.float(), -1)
            for r, (_, _, c, o, _) in enumerate(chunk):
                positions = torch.arange(len(c) - 1, len(c) - 1 + len(o))
                loglik[start + r] = float(logp[r, positions, torch.tensor(o)].sum())
    n_opt = [len(r["options"]) for r in records]
    acc, acc_norm = np.zeros(len(records)), np.zeros(len(records))
    pos = 0
    for i, record in enumerate(records):
        values = loglik[pos : pos + n_opt[i]]
        chars = np.array([rows[pos + j][4] for j in range(n_opt[i])], dtype=float)
        acc[i] = float(int(np.argmax(values)) == record["label"])
        acc_norm[i] = float(int(np.argmax(values / chars)) == record["label"])
        pos += n_opt[i]
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
        raise BenchprofError(f"{path}: not found; {folder} is not a planted model (scripts/build_planted_model.py)")
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
    neurons: dict[str, dict[int, list[int]]], ability: str, settings: PlantSettings, seed: int
) -> Region:
    """As many neurons as R_a holds, in the same layers, drawn from the neurons no ability reserved
    (base neurons): the structural twin of R_a."""
    rng = random.Random(seed)
    chosen: dict[int, list[int]] = {}
    for layer, ids in neurons[ability].items():
        reserved = {j for a in neurons for j in neurons[a][layer]}
        free = [j for j in range(settings.intermediate) if j not in reserved]
        chosen[layer] = sorted(rng.sample(free, len(ids)))
    return neuron_region(chosen, settings.hidden, settings.intermediate)


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

    `variants`: name -> region ('all' zeroes every planted set: the base model). Rows carry the
    per-item original and ablated vectors under `_original`/`_ablated` for callers that pool them.
    """
    import numpy as np

    from .ais import bootstrap_ais, impact_score, mcnemar_exact, percentile_ci
    from .damage import ablated

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


def build(
    settings: PlantSettings,
    out: Path,
    check: bool = True,
    bootstrap: int = 1000,
    base_cache: str = "",
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Build, save and (optionally) own-check a planted model in `out`; returns planted.json's content.

    `base_cache`: a file of base weights to reuse (or to write), for tuning the planting step alone.
    """
    import torch
    from transformers import AutoTokenizer

    from .abilities import generate
    from .modeling import fingerprint
    from .tinymodel import build_model

    torch.set_num_threads(settings.threads)
    torch.manual_seed(settings.seed)
    started = time.time()
    tokenizer = Path(settings.tokenizer)
    if not tokenizer.is_absolute():  # relative to the repository (build_planted_model.py stores it so)
        tokenizer = Path(__file__).resolve().parents[1] / tokenizer
    tok = AutoTokenizer.from_pretrained(tokenizer)
    model = build_model(
        tok,
        hidden_size=settings.hidden,
        intermediate_size=settings.intermediate,
        num_layers=settings.num_layers,
        num_heads=settings.heads,
        max_positions=256,
        seed=settings.seed,
    )
    splits = {a: generate(a, settings.train_size, settings.test_size, settings.data_seed) for a in settings.abilities}
    rng = random.Random(settings.seed)
    base_records = [r for a in settings.abilities for r in shuffled_answers(splits[a][0], rng)]
    if settings.echo:
        base_records += [r for a in settings.abilities for r in echo_answers(splits[a][0], rng)]
    base_examples = encode_examples(tok, base_records)
    real_examples = {a: encode_examples(tok, splits[a][0]) for a in settings.abilities}
    neurons = neuron_sets(settings)
    regions = {a: neuron_region(neurons[a], settings.hidden, settings.intermediate) for a in settings.abilities}
    masks = {a: region_masks(model, [regions[a]]) for a in settings.abilities}
    union = region_masks(model, list(regions.values()))
    pad = tok.pad_token_id

    if base_cache and Path(base_cache).is_file():  # for tuning the planting: same settings, same base
        model.load_state_dict(torch.load(base_cache))
    else:
        train_base(model, base_examples, union, settings, pad, log)
        if base_cache:
            torch.save(model.state_dict(), base_cache)
    base_seconds = time.time() - started
    base_hash = state_hash(model)
    train_planted(model, real_examples, masks, settings, pad, log, neurons)
    seconds = time.time() - started

    n_params = sum(p.numel() for p in model.parameters())
    eligible = sum(p.numel() for n, p in model.named_parameters() if n.endswith(("_proj.weight",)) and ".mlp." in n)
    info: dict[str, Any] = {
        "settings": settings_dict(settings),
        "total_params": n_params,
        "eligible": eligible,
        "neurons": {a: {str(layer): ids for layer, ids in neurons[a].items()} for a in settings.abilities},
        "planted_weights": {a: region_size(regions[a]) for a in settings.abilities},
        "k_planted": {a: region_size(regions[a]) / n_params for a in settings.abilities},
        "base_sha256": base_hash,
        "seconds": {"base": round(base_seconds), "total": round(seconds)},
    }
    tests = {a: splits[a][1] for a in settings.abilities}
    accuracy = {a: [float(v.mean()) for v in item_scores(model, tok, tests[a])] for a in settings.abilities}
    info["test_accuracy"] = {a: {"acc": v[0], "acc_norm": v[1]} for a, v in accuracy.items()}
    for a, (acc, acc_norm) in accuracy.items():
        log(f"  {a:24s} acc {acc:.3f}  acc_norm {acc_norm:.3f}  (chance 0.25)")
    if check:
        variants: dict[str, Region] = {}

        everything: Region = {}
        for a in settings.abilities:
            variants[f"R[{a}]"] = regions[a]
        for i, a in enumerate(settings.abilities):
            size = region_size(regions[a])
            variants[f"random weights ({a} size)"] = random_weight_region(model, size, settings.seed + 100 + i)
            variants[f"random neurons ({a} size)"] = random_neuron_region(neurons, a, settings, settings.seed + 200 + i)
        for region in regions.values():
            for name, idx in region.items():
                everything[name] = torch.cat([everything[name], idx]) if name in everything else idx
        variants["all planted (= base)"] = everything
        rows = own_check(model, tok, tests, variants, bootstrap=bootstrap, seed=settings.seed)
        info["own_check"] = rows
        log(own_check_table(rows))
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    save_planted(out, regions, info, fingerprint(model))
    log(f"saved to {out}: {n_params / 1e6:.2f}M parameters, built in {seconds:.0f}s (base {base_seconds:.0f}s)")
    return info
