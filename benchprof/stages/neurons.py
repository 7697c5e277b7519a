"""Whole MLP neurons as the unit of a region, and the attribution that ranks them (docs/research/frontier.md).

Neuron j of layer l is row j of gate_proj and up_proj and column j of down_proj (3 x hidden weights), as in
knowledge-neuron and language-specific-neuron work; `neuron_region` gives its weights in the region format, so
damage.ablated and evaluate zero them like any region. The attribution over an ability's train items is

    A(item, l, j) = Σ_positions h_lj · ∂ log P(correct option) / ∂ h_lj

h_lj the neuron's activation (the input of down_proj), P the softmax over the options of their per-character
log-likelihoods (what acc_norm ranks): −A is the first-order change of that log-probability when the neuron is
zeroed. The scores (`extract.score`, core.config.NEURON_SCORES):

- `act_grad`: the mean of A over the items (what the answers lean on most);
- `act_grad_t`: its t statistic over items (neurons every item leans on);
- `act_grad_contrast`: t_a − max_{b≠a} t_b over the other abilities (what a leans on and no other does);
- `act_grad_contrast_abs`: t_a − max_{b≠a} |t_b| (a frontier option): what a leans on and no other ability leans on
  *or against*. act_grad_contrast ranks first the neurons the others lean against (t_b ≪ 0), and zeroing those
  raises the other splits, which reads as specificity; this one leaves them out.

One score reads how much a neuron fires, not its effect on the answer (neuron_activity): E(item, l, j) = the mean
of h_lj² over the item's prompt and correct option, as language-specific-neuron work selects neurons by their
activation on one language against the others:

- `act_contrast`: log Ē_a − log max_{b≠a} Ē_b, Ē the mean over an ability's items (what fires on a's text and
  on no other ability's as much). It is the one score that finds planted neurons (docs/research/frontier.md).

Two scores hold an ability against *general text* in place of the other abilities (frontier options, not yet
`extract.score`s; FRONTIER_SCORES): text the model samples itself from its start token (general_text), the
distribution it was trained on with no ability's format. Its attribution is G(text, l, j) = Σ_positions h_lj ·
∂ (mean log P(next token)) / ∂ h_lj (text_attribution), its activity the mean of h² over its tokens:

- `act_grad_general`: t_a − t_general (what a's answers lean on and ordinary text does not);
- `act_general`: log Ē_a − log Ē_general (what fires on a's text more than on ordinary text).

One option joins two (a frontier option; UNIONS, option_scores): `act_union`, the union of act_contrast's and
act_grad_contrast_abs's top neurons, each given equal room, meant to hold both ground truths
(docs/research/frontier.md).

One selection re-scores as it goes (a frontier option; iterative_contrast): `act_grad_contrast_iter` chooses a
region of n neurons in ITERATIVE_ROUNDS chunks of about n/4, each after zeroing the chunks before and recomputing
a's attribution, so that neurons which act together can show up once the first of them are gone.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from benchprof import BenchprofError
from benchprof.core.options import OPTIONS, did_you_mean

if TYPE_CHECKING:
    import numpy as np
    import torch
    from numpy.typing import NDArray
    from transformers import PreTrainedTokenizerBase

    from benchprof.core.regions import Region

MLP_ROWS = ("gate_proj", "up_proj")  # neuron j = row j of these and column j of down_proj
ACTIVITY_FLOOR = 1e-12  # added to mean h² before act_contrast's logarithm (a silent neuron is not infinitely rare)


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


@dataclass
class Neurons:
    """The MLP layers of a Llama-style model, the unit of a region (hidden size, neurons per layer)."""

    mlps: list[Any]  # the decoder layers' MLP modules (gate_proj, up_proj, down_proj)
    hidden: int
    intermediate: int
    total_params: int = field(default=0)

    @property
    def count(self) -> int:
        return len(self.mlps) * self.intermediate

    def weights(self, n: int) -> int:
        """Weights in a region of n neurons: a gate row, an up row and a down column each."""
        return 3 * self.hidden * n

    def by_layer(self, ids: Sequence[int]) -> dict[int, list[int]]:
        """Neuron ids (layer × intermediate + j) as layer -> its sorted j, each id once."""
        layers: dict[int, list[int]] = {}
        for i in sorted(set(ids)):
            layers.setdefault(i // self.intermediate, []).append(i % self.intermediate)
        return layers


def model_neurons(model: torch.nn.Module) -> Neurons:
    """The decoder's MLP blocks (each with gate_proj, up_proj and down_proj), refused in one line if absent."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    mlps: list[Any] = [getattr(layer, "mlp", None) for layer in layers] if layers is not None else []
    if not mlps or any(m is None or not hasattr(m, "down_proj") for m in mlps):
        raise BenchprofError("neuron regions: the model has no Llama-style MLP blocks (model.layers[i].mlp.down_proj)")
    down = mlps[0].down_proj.weight
    return Neurons(mlps, int(down.shape[0]), int(down.shape[1]), sum(p.numel() for p in model.parameters()))


@contextmanager
def traced_activations(model: torch.nn.Module) -> Iterator[tuple[Neurons, list[torch.Tensor]]]:
    """While open, every forward pass appends each MLP layer's activations h (the input of down_proj) to the list,
    with gradients flowing to them through the embeddings; the weights need none, and get theirs back after."""
    neurons = model_neurons(model)
    acts: list[torch.Tensor] = []
    hooks = [m.down_proj.register_forward_pre_hook(lambda _m, args: acts.append(args[0])) for m in neurons.mlps]
    embedding: Any = model.get_input_embeddings()  # type: ignore[operator]
    embed = embedding.register_forward_hook(lambda _m, _i, out: out.requires_grad_())
    grads_were = [p.requires_grad for p in model.parameters()]
    for p in model.parameters():
        p.requires_grad_(False)
    try:
        yield neurons, acts
    finally:
        for hook in hooks:
            hook.remove()
        embed.remove()
        for p, was in zip(model.parameters(), grads_were, strict=True):
            p.requires_grad_(was)
        acts.clear()


def neuron_attribution(
    model: torch.nn.Module, tok: PreTrainedTokenizerBase, records: Sequence[dict[str, Any]], batch_items: int = 8
) -> NDArray[np.float32]:
    """A(item, neuron) = Σ_positions h · ∂ log P(correct option)/∂h over the item's option rows; shape
    (items, layers × intermediate), neuron id = layer × intermediate + j."""
    import numpy as np
    import torch

    from benchprof.stages.choices import forward_rows, mc_rows, option_logliks

    with traced_activations(model) as (neurons, acts):
        out = np.zeros((len(records), neurons.count), dtype=np.float32)
        for start in range(0, len(records), batch_items):
            chunk = list(records[start : start + batch_items])
            rows = mc_rows(tok, chunk)
            acts.clear()
            loglik = option_logliks(model, rows)
            objective = loglik.new_zeros(())
            pos = 0
            for record in chunk:
                n = len(record["options"])
                # the objective's own normaliser: the characters of " option" (delimiter counted), as every
                # committed region was chosen by (ATTRIBUTION_OBJECTIVE v1); a surrogate, not the score (mc_metrics)
                chars = torch.tensor([r[4] + 1 for r in rows[pos : pos + n]], dtype=loglik.dtype, device=loglik.device)
                objective = objective + torch.log_softmax(loglik[pos : pos + n] / chars, 0)[record["label"]]
                pos += n
            grads = torch.autograd.grad(objective, acts)
            per_row = torch.cat([(a * g).sum(1) for a, g in zip(acts, grads, strict=True)], 1).float()
            # a forward row is an item's packed options, or one option (choices.forward_rows)
            items = torch.tensor([rows[group[0]][0] for group in forward_rows(model, rows)], device=per_row.device)
            per_item = per_row.new_zeros(len(chunk), neurons.count).index_add_(0, items, per_row)
            out[start : start + len(chunk)] = per_item.detach().cpu().numpy()
    return out


def text_attribution(
    model: torch.nn.Module, sequences: Sequence[Sequence[int]], batch_items: int = 8
) -> NDArray[np.float32]:
    """G(text, neuron) = Σ_positions h · ∂ (mean log P(next token))/∂h over one token sequence (general_text's, all
    of one length): what ordinary text leans on, as neuron_attribution for an ability's answers. Shape (texts,
    layers × intermediate)."""
    import numpy as np
    import torch

    device = next(model.parameters()).device
    with traced_activations(model) as (neurons, acts):
        out = np.zeros((len(sequences), neurons.count), dtype=np.float32)
        for start in range(0, len(sequences), batch_items):
            tokens = torch.tensor([list(s) for s in sequences[start : start + batch_items]], device=device)
            acts.clear()
            logits = model(input_ids=tokens).logits[:, :-1].float()
            logprob = torch.log_softmax(logits, -1).gather(-1, tokens[:, 1:, None])[..., 0]
            grads = torch.autograd.grad(logprob.mean(1).sum(), acts)
            per_text = torch.cat([(a * g).sum(1) for a, g in zip(acts, grads, strict=True)], 1).float()
            out[start : start + len(tokens)] = per_text.detach().cpu().numpy()
    return out


def neuron_activity(
    model: torch.nn.Module, tok: PreTrainedTokenizerBase, records: Sequence[dict[str, Any]], batch_items: int = 16
) -> NDArray[np.float32]:
    """E(item, neuron) = the mean of h² over the item's tokens: its prompt (what lm-eval shows before the options)
    and ' ' + its correct option. How much a neuron fires on the ability's text, whatever its effect on the
    answer: the activation statistic of language-specific-neuron work. Shape (items, layers × intermediate),
    neuron ids as neuron_attribution's."""
    sequences, pad = item_sequences(tok, records)
    return text_activity(model, sequences, batch_items, pad)


def neuron_mean_output(
    model: torch.nn.Module, tok: PreTrainedTokenizerBase, records: Sequence[dict[str, Any]], batch_items: int = 16
) -> NDArray[np.float32]:
    """The mean of h over each item's tokens (its prompt and ' ' + its correct option, as neuron_activity's): what
    a neuron outputs on the ability's text on average, the value mean ablation holds it at (mean_ablation.py).
    Shape (items, layers × intermediate)."""
    sequences, pad = item_sequences(tok, records)
    return text_activity(model, sequences, batch_items, pad, power=1)


def item_sequences(tok: PreTrainedTokenizerBase, records: Sequence[dict[str, Any]]) -> tuple[list[list[int]], int]:
    """Each item's tokens, its prompt (what lm-eval shows before the options) and ' ' + its correct option, tokenised
    apart as lm-eval's requests are (choices.mc_rows); and the tokenizer's pad id."""
    from benchprof.core.prompts import eval_prompt

    def encode(text: str) -> list[int]:
        return list(tok(text, add_special_tokens=False)["input_ids"])

    sequences = [encode(eval_prompt(r)) + encode(" " + r["options"][r["label"]]) for r in records]
    return sequences, tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)


def text_activity(
    model: torch.nn.Module, sequences: Sequence[Sequence[int]], batch_items: int = 16, pad: int = 0, power: int = 2
) -> NDArray[np.float32]:
    """The mean of h^power (h² by default) over each token sequence's tokens, per neuron: shape (sequences,
    layers × intermediate)."""
    import numpy as np
    import torch

    neurons = model_neurons(model)
    per_layer: list[torch.Tensor] = []
    weight: list[torch.Tensor] = []  # this batch's (items, tokens) averaging weights; the hooks reduce at once

    def reduce(_module: Any, args: tuple[torch.Tensor, ...]) -> None:
        # (items, neurons) per layer, never a layer's (items, tokens, neurons) activations kept past its forward
        per_layer.append(torch.einsum("bt,btn->bn", weight[0].to(args[0].dtype), args[0].pow(power)).float())

    hooks = [m.down_proj.register_forward_pre_hook(reduce) for m in neurons.mlps]
    device = next(model.parameters()).device
    out = np.zeros((len(sequences), neurons.count), dtype=np.float32)
    try:
        with torch.no_grad():
            for start in range(0, len(sequences), batch_items):
                ids = [list(x) for x in sequences[start : start + batch_items]]
                width = max(len(x) for x in ids)
                tokens = torch.tensor([x + [pad] * (width - len(x)) for x in ids], device=device)
                mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in ids], device=device)
                weight[:] = [mask / mask.sum(1, keepdim=True)]
                per_layer.clear()
                model(input_ids=tokens, attention_mask=mask)  # right padding: the real tokens see no pad
                out[start : start + len(ids)] = torch.cat(per_layer, 1).cpu().numpy()
    finally:
        for hook in hooks:
            hook.remove()
        per_layer.clear()
    return out


GENERAL = "_general"  # the statistics' key of general text (general_text), beside the abilities' names
GENERAL_TEXTS, GENERAL_TOKENS = 120, 128  # default sequences (as many as the frontier's train items), tokens each


GENERAL_METHOD = f"sampled at temperature 1 after BOS, {GENERAL_TOKENS} tokens, v1"  # what general_text returns
# what each statistic of general text measures (general_statistic; the frontier's cache records it)
GENERAL_OBJECTIVES = {
    "attribution": "sum h * d mean log P(next token) / dh, v1",
    "activity": "mean h^2 over tokens, v1",
}


def general_text(
    model: torch.nn.Module, tok: PreTrainedTokenizerBase, seed: int, n: int = GENERAL_TEXTS
) -> list[list[int]]:
    """n token sequences of GENERAL_TOKENS that the model samples itself (temperature 1, no top-k, top-p or
    other logits processor) after its BOS token (EOS when it has none), EOS suppressed so every text has one
    length: text of the distribution it was trained on, with no corpus to ship. Give n the number of items the
    abilities' statistics read, so that the t statistics compared are on equal footing. Reproducible from seed on
    one machine; the caller's random streams (CPU and the model's device) are left as they were."""
    import torch
    from transformers import GenerationConfig

    start = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    device = next(model.parameters()).device
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    config = GenerationConfig(
        do_sample=True, temperature=1.0, top_k=0, top_p=1.0, eos_token_id=eos, pad_token_id=int(start or 0),
        min_new_tokens=GENERAL_TOKENS - 1, max_new_tokens=GENERAL_TOKENS - 1,
    )  # fmt: skip
    texts: list[list[int]] = []
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), torch.no_grad():
        torch.manual_seed(seed)
        for first in range(0, n, 16):
            size = min(16, n - first)
            ids = model.generate(  # type: ignore[operator]
                input_ids=torch.full((size, 1), int(start or 0), device=device),
                attention_mask=torch.ones(size, 1, dtype=torch.long, device=device),
                generation_config=config,
            )
            texts += ids.tolist()
    return texts


def general_statistic(
    model: torch.nn.Module, texts: Sequence[Sequence[int]], statistic: str, batch_items: int = 8
) -> NDArray[np.float32]:
    """The per-text statistic (attribution or activity, as statistic_of names them) of general_text's texts."""
    if statistic == "attribution":
        return text_attribution(model, texts, batch_items)
    return text_activity(model, texts, batch_items)


# each per-item statistic a neuron score reads, by name (statistic_of): the function that computes it
STATISTICS = {"attribution": neuron_attribution, "activity": neuron_activity, "mean": neuron_mean_output}


# every neuron score: the per-item statistic it reads, and what it holds an ability against ("": nothing,
# "abilities": the other abilities' statistics, "general": general text's), as core/options.py declares them; the
# formulas are neuron_scores'
SCORES: dict[str, tuple[str, str]] = {
    o.name: (o.statistic, o.against) for o in OPTIONS if o.unit == "neurons" and not o.parts
}
# options that join two scores (option_scores): their top n is the union of the two parts' top neurons
UNIONS: dict[str, tuple[str, ...]] = {o.name: o.parts for o in OPTIONS if o.parts}
FRONTIER_SCORES = (*SCORES, *UNIONS)  # what the frontier and the planted recovery measure; extract: NEURON_SCORES
ITERATIVE = "act_grad_contrast_iter"  # the one selection that re-scores as it zeroes: no fixed ranking
ITERATIVE_ROUNDS = 4  # its rounds, part of its definition: the region chosen in this many chunks


def score_spec(option: str) -> tuple[str, str]:
    """(statistic, held against) of a neuron score, refused in one line when unknown or a union (UNIONS)."""
    if option not in SCORES:
        what = (
            f"{option!r} joins two scores"
            if option in UNIONS
            else f"unknown neuron score {option!r}{did_you_mean(option, FRONTIER_SCORES)}"
        )
        raise BenchprofError(f"{what} (known scores: {', '.join(SCORES)}; unions of two: {', '.join(UNIONS)})")
    return SCORES[option]


def statistic_of(option: str) -> str:
    """The per-item statistic a neuron score reads: "activity" (neuron_activity) or "attribution"."""
    return score_spec(option)[0]


def statistics_of(option: str) -> list[str]:
    """The per-item statistics a frontier option reads: its own (statistic_of), or each of a union's parts'."""
    return list(dict.fromkeys(statistic_of(part) for part in UNIONS.get(option, (option,))))


def reads_general(option: str) -> bool:
    """Whether a neuron score holds an ability against general text (general_text), not against other abilities."""
    return any(score_spec(part)[1] == "general" for part in UNIONS.get(option, (option,)))


def contrasted(option: str) -> bool:
    """Whether a neuron score holds an ability against the other abilities (and so reads theirs too)."""
    return any(score_spec(part)[1] == "abilities" for part in UNIONS.get(option, (option,)))


def neuron_scores(values: dict[str, NDArray[np.float32]], ability: str, option: str) -> NDArray[np.float64]:
    """The score that ranks ability's neurons under `option` (SCORES; a union's: option_scores), from every
    ability's statistic (statistic_of(option): attribution or activity, items x neurons) and, for the general-text
    scores, general text's under the key GENERAL."""
    import numpy as np

    def t_stat(per_item: NDArray[np.float32]) -> NDArray[np.float64]:
        v = per_item.astype(np.float64)
        sd = v.std(0, ddof=1) if len(v) > 1 else np.zeros(v.shape[1])
        return v.mean(0) / np.where(sd > 0, sd / math.sqrt(len(v)), np.inf)

    if option == "act_grad":
        return values[ability].astype(np.float64).mean(0)
    if option == "act_grad_t":
        return t_stat(values[ability])
    others = [v for b, v in values.items() if b not in (ability, GENERAL)]
    if contrasted(option) and not others:
        raise BenchprofError(f"{option} needs at least two abilities")
    if reads_general(option) and GENERAL not in values:
        raise BenchprofError(f"{option} needs the statistic of general text (neurons.general_text)")
    if option in ("act_grad_contrast", ITERATIVE):  # the iterative selection's first round
        return t_stat(values[ability]) - np.max([t_stat(v) for v in others], axis=0)
    if option == "act_grad_contrast_abs":  # a neuron another ability leans against ranks as low as one it leans on
        return t_stat(values[ability]) - np.max([np.abs(t_stat(v)) for v in others], axis=0)
    if option == "act_grad_general":
        return t_stat(values[ability]) - t_stat(values[GENERAL])

    def log_mean(v: NDArray[np.float32]) -> NDArray[np.float64]:
        return np.log(v.astype(np.float64).mean(0) + ACTIVITY_FLOOR)

    if option == "act_contrast":
        return log_mean(values[ability]) - np.max([log_mean(v) for v in others], axis=0)
    if option == "act_general":
        return log_mean(values[ability]) - log_mean(values[GENERAL])
    score_spec(option)  # refuses an unknown option or a union in one line
    raise BenchprofError(f"neuron score {option!r} has no formula here")


def option_scores(
    statistics: dict[str, dict[str, NDArray[np.float32]]], ability: str, option: str
) -> NDArray[np.float64]:
    """The score that ranks ability's neurons under any frontier option, from every statistic the option reads
    (statistics_of: per statistic, every ability's values). A union's (UNIONS): minus the neuron's better rank under
    its two parts (0 the top), so its top n (top_neurons) is the union of the parts' top m for the m that fills n,
    the last rank shared by both parts' neurons going to the lower ids."""
    import numpy as np

    if option not in UNIONS:
        return neuron_scores(statistics[statistic_of(option)], ability, option)
    ranks = [np.argsort(np.argsort(-option_scores(statistics, ability, p), kind="stable")) for p in UNIONS[option]]
    return -np.minimum(*ranks).astype(np.float64)


def ranked_neurons(scores: NDArray[np.float64], n: int) -> list[int]:
    """The n highest-scoring neuron ids, highest first, ties to the lower id (a stable sort of −score)."""
    import numpy as np

    return [int(i) for i in np.argsort(-scores, kind="stable")[:n]]


def top_neurons(scores: NDArray[np.float64], n: int) -> list[int]:
    """The n highest-scoring neuron ids (ranked_neurons), sorted by id: a region."""
    return sorted(ranked_neurons(scores, n))


def iterative_contrast(
    model: torch.nn.Module,
    tok: PreTrainedTokenizerBase,
    values: dict[str, NDArray[np.float32]],
    ability: str,
    records: Sequence[dict[str, Any]],
    size: int,
    batch_items: int = 8,
) -> tuple[list[int], NDArray[np.float64]]:
    """act_grad_contrast_iter: `size` neurons chosen in ITERATIVE_ROUNDS chunks as equal as whole neurons allow
    (zero, re-score, repeat). The first chunk is act_grad_contrast's top; each later one is chosen after zeroing
    the neurons chosen so far and recomputing the ability's attribution on `records` (its train items), by
    t_a − max_b t_b with the other abilities' t from `values` (the unablated model): neurons that act together
    can show up once the first of them are gone. A round whose chunk is empty (size < ITERATIVE_ROUNDS) is
    skipped. Returns the ids in the order chosen (by score within a chunk) and the last scores (chosen at −inf)."""
    import numpy as np

    from benchprof.stages.damage import ablated

    neurons = model_neurons(model)
    chosen: list[int] = []
    scores = neuron_scores(values, ability, ITERATIVE)
    for r in range(ITERATIVE_ROUNDS):
        take = size * (r + 1) // ITERATIVE_ROUNDS - len(chosen)
        if take == 0:
            continue
        if chosen:
            with ablated(model, neuron_ids_region(neurons, chosen)):
                again = neuron_attribution(model, tok, records, batch_items)
            scores = neuron_scores({**values, ability: again}, ability, ITERATIVE)
        scores[chosen] = -np.inf
        chosen += ranked_neurons(scores, take)
    scores[chosen] = -np.inf
    return chosen, scores


def random_neurons(count: int, n: int, seed: int) -> list[int]:
    """n distinct neuron ids drawn uniformly from `count`, reproducible from seed."""
    import numpy as np

    return sorted(int(i) for i in np.random.default_rng(seed).choice(count, size=n, replace=False))


def neuron_ids_region(neurons: Neurons, ids: Sequence[int]) -> Region:
    """The weights of these neuron ids (layer × intermediate + j) in the region format: gate and up rows, the down
    column (neuron_region), so that damage.ablated zeroes and restores them like any region."""
    return neuron_region(neurons.by_layer(ids), neurons.hidden, neurons.intermediate)


ATTRIBUTION_OBJECTIVE = "sum h * d log softmax_acc_norm(correct) / dh, v1"  # what an attribution file measures
# what each statistic's file measures (its manifest's objective)
OBJECTIVES = {
    "attribution": ATTRIBUTION_OBJECTIVE,
    "activity": "mean h^2 over prompt + correct option tokens, v1",
    "mean": "mean h over prompt + correct option tokens, v1",  # mean ablation's values (mean_ablation.py)
}
