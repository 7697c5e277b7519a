"""In-process multiple-choice scoring, as lm-eval scores a multiple-choice task: each option's log-likelihood
after the prompt (core.prompts.eval_prompt), acc (largest sum) and acc_norm (largest per character of the option,
the delimiter before it not counted, as lm-eval's `len(choice)`). Used where lm-eval's task machinery would cost
more than the scoring (the neuron attribution, the frontier, the plants); tests/test_evaluate.py and
tests/test_real_model.py hold it to lm-eval's per-document results item by item.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from benchprof.core.prompts import eval_prompt

if TYPE_CHECKING:
    import numpy as np
    import torch
    from numpy.typing import NDArray
    from transformers import PreTrainedTokenizerBase

# one multiple-choice row: (item, option, context ids, option ids, characters of the option: acc_norm's divisor)
McRow = tuple[int, int, list[int], list[int], int]


def mc_rows(tok: PreTrainedTokenizerBase, records: Sequence[dict[str, Any]]) -> list[McRow]:
    """Every (item, option) of the records as lm-eval builds a multiple-choice request: the prompt, then ' option'."""
    rows: list[McRow] = []
    for i, record in enumerate(records):
        ctx = tok(eval_prompt(record), add_special_tokens=False)["input_ids"]
        for j, option in enumerate(record["options"]):
            cont = tok(" " + option, add_special_tokens=False)["input_ids"]
            rows.append((i, j, ctx, cont, len(option)))
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


def option_logliks(model: torch.nn.Module, rows: Sequence[McRow]) -> torch.Tensor:
    """The summed log-likelihood of each row's option tokens after its context (gradients flow).

    One forward pass of the decoder over one packed row per item: the context once, each option a branch of it
    (stages.prefix_scorer's token trie and packed_batch, as SharedPrefixLM packs lm-eval's requests), so an item's
    context is not recomputed per option. The LM head runs only where an option token is predicted. A model whose
    attention cannot take such a mask gets one row per option (forward_rows)."""
    import torch

    from benchprof.stages.prefix_scorer import TokenTrie, packed_batch

    device = next(model.parameters()).device
    packed = []
    for group in forward_rows(model, rows):
        packed.append(TokenTrie())
        for r in group:
            packed[-1].add(r, (rows[r][2] + rows[r][3])[:-1], len(rows[r][3]))
    ids, positions, mask, pads = packed_batch(packed, next(model.parameters()).dtype)
    row_of: list[int] = []
    at_row: list[int] = []
    at_node: list[int] = []
    token: list[int] = []
    for b, t in enumerate(packed):
        for r, nodes in t.scored:
            row_of += [r] * len(nodes)
            at_row += [b] * len(nodes)
            at_node += [pads[b] + n for n in nodes]
            token += rows[r][3]
    decoder: Any = model.base_model
    hidden = decoder(
        input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=positions.to(device), use_cache=False
    ).last_hidden_state[torch.tensor(at_row, device=device), torch.tensor(at_node, device=device)]
    head: Any = model.get_output_embeddings()  # type: ignore[operator]
    logp = torch.log_softmax(head(hidden).float(), -1)
    picked = logp[torch.arange(len(token), device=device), torch.tensor(token, device=device)]
    return torch.zeros(len(rows), device=device).index_add(0, torch.tensor(row_of, device=device), picked)


SCORER = "acc and acc_norm per item, lm-eval's multiple-choice scoring, v2"  # what item_scores computes
# v1 divided by the characters of " option" (the delimiter counted), which lm-eval does not: 4 of 40 items differed


def mc_metrics(
    logliks: Sequence[Sequence[float]], chars: Sequence[Sequence[int]], labels: Sequence[int]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per-item 0/1 (acc, acc_norm) from each item's option log-likelihoods, as lm-eval's multiple-choice
    process_results: acc, the option with the largest log-likelihood; acc_norm, the largest log-likelihood per
    character of the option (`chars`, lm-eval's len(choice)); ties go to the first (np.argmax)."""
    import numpy as np

    acc = np.array([float(int(np.argmax(values)) == label) for values, label in zip(logliks, labels, strict=True)])
    acc_norm = np.array(
        [
            float(int(np.argmax(np.asarray(values, dtype=float) / np.asarray(n, dtype=float))) == label)
            for values, n, label in zip(logliks, chars, labels, strict=True)
        ]
    )
    return acc, acc_norm


def option_chars(records: Sequence[dict[str, Any]]) -> list[list[int]]:
    """Each item's options' lengths in characters: the divisor of acc_norm (mc_metrics)."""
    return [[len(option) for option in record["options"]] for record in records]


def item_logliks(
    model: torch.nn.Module, tok: PreTrainedTokenizerBase, records: Sequence[dict[str, Any]], batch_rows: int = 128
) -> list[list[float]]:
    """Each item's options' summed log-likelihoods of ' option' after the prompt, in the records' order."""
    import torch

    rows = mc_rows(tok, records)
    loglik: list[float] = []
    with torch.no_grad():
        for start in range(0, len(rows), batch_rows):
            loglik += option_logliks(model, rows[start : start + batch_rows]).double().cpu().tolist()
    per_item, pos = [], 0
    for record in records:
        per_item.append(loglik[pos : pos + len(record["options"])])
        pos += len(record["options"])
    return per_item


def item_scores(
    model: torch.nn.Module, tok: PreTrainedTokenizerBase, records: list[dict[str, Any]], batch_rows: int = 128
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per-item 0/1 correctness as lm-eval scores a multiple-choice task: (acc, acc_norm) (mc_metrics)."""
    logliks = item_logliks(model, tok, records, batch_rows)
    return mc_metrics(logliks, option_chars(records), [int(record["label"]) for record in records])
