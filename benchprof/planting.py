"""Building the planted model of planted.py (issue 19): `build`, which scripts/build_planted_model.py calls.

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
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .planted import (
    MLP_ROWS,
    PlantSettings,
    item_scores,
    neuron_region,
    neuron_sets,
    own_check,
    own_check_table,
    random_neuron_region,
    random_weight_region,
    region_masks,
    region_size,
    save_planted,
    settings_dict,
    state_hash,
)
from .prompts import chat_messages, eval_prompt

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase

    from .regions import Region

# (token ids, first loss position) of one training example
Example = tuple[list[int], int]


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


Item = TypeVar("Item")


class Batches(Generic[Item]):
    """An endless stream of shuffled batches over one list (examples, or realplant's cached inputs)."""

    def __init__(self, examples: list[Item], batch_size: int, rng: random.Random) -> None:
        self.examples, self.batch_size, self.rng, self.pos = list(examples), batch_size, rng, len(examples)

    def next(self) -> list[Item]:
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
    from .modeling import fingerprint, save_model
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
            variants[f"random neurons ({a} size)"] = random_neuron_region(
                neurons, a, settings.hidden, settings.intermediate, settings.seed + 200 + i
            )
        for region in regions.values():
            for name, idx in region.items():
                everything[name] = torch.cat([everything[name], idx]) if name in everything else idx
        variants["all planted (= base)"] = everything
        rows = own_check(model, tok, tests, variants, bootstrap=bootstrap, seed=settings.seed)
        info["own_check"] = rows
        log(own_check_table(rows))
    out.mkdir(parents=True, exist_ok=True)
    save_model(model, tok, out)
    save_planted(out, regions, info, fingerprint(model))
    log(f"saved to {out}: {n_params / 1e6:.2f}M parameters, built in {seconds:.0f}s (base {base_seconds:.0f}s)")
    return info
