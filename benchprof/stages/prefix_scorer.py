"""Log-likelihood requests scored with every shared prefix computed once: lm-eval's HFLM, faster.

lm-eval scores a multiple-choice question as one request per option, (context, continuation), and HFLM
runs each as its own sequence context+continuation, so the context is recomputed for every option (its
one-token cache spares that only where every option is a single token). `SharedPrefixLM` packs the
requests of a forward pass as a token trie instead: each request's input, exactly the tokens HFLM feeds
(`(context + continuation)[-(max_length + 1):][:-1]`, left-truncated the same way), is a path from a
root; sequences that share a prefix share its nodes (a question's options; questions that share their
few-shot examples, as MMLU's first_n ones). One packed row holds the trie's nodes in insertion order,
each at position id = its depth, and a 4D attention mask lets a node attend to its ancestors and itself
only, so every node's hidden state is the one it has at the same place of each plain sequence through
it. Logits are computed only where a continuation token is predicted. Results equal HFLM's up to
floating-point rounding (at most 4e-5 apart on SmolLM2-135M in float32; tests/test_prefix_scorer.py holds them to
1e-4), except where HFLM's one-token cache is wrong: two requests with the same context + continuation[:-1]
but different contexts (lm-eval 0.4.13 takes the shorter continuation's log-probs at the wrong positions);
there the answer is that of HFLM's plain path (logits_cache=False).

The mask reaches the attention as-is (transformers' masking_utils returns a 4D mask unchanged); it is
additive (0 or the dtype's minimum), the form both the sdpa and the eager attention take. Models whose
attention cannot take such a mask (flash attention, flex attention, a sliding window shorter than the
requests) are scored by HFLM's own code, and the first packed row with a branch is checked once against
HFLM's own code: a model that ignores the mask or the position ids is caught there and falls back too.
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from lm_eval.models.huggingface import HFLM
from tqdm import tqdm

log = logging.getLogger("lm_eval.models.huggingface")  # HFLM's own logger: its truncation warning's place

Request = tuple[tuple[str, str] | None, list[int], list[int]]  # (cache key, context tokens, continuation tokens)

PACKABLE_ATTENTION = ("sdpa", "eager")  # attention implementations that add a 4D mask as given


@dataclass
class TokenTrie:
    """Token sequences as a prefix tree whose nodes are the positions of one packed row."""

    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)  # -1: a root
    depths: list[int] = field(default_factory=list)  # the position id
    children: dict[tuple[int, int], int] = field(default_factory=dict)  # (parent, token) -> node
    scored: list[tuple[int, list[int]]] = field(default_factory=list)  # (request, nodes predicting its continuation)

    def __len__(self) -> int:
        return len(self.tokens)

    def add(self, request: int, sequence: list[int], n_scored: int) -> None:
        """Insert `sequence`; its last `n_scored` nodes predict the request's continuation tokens."""
        node, path = -1, []
        for depth, token in enumerate(sequence):
            child = self.children.get((node, token))
            if child is None:
                child = len(self.tokens)
                self.children[(node, token)] = child
                self.tokens.append(token)
                self.parents.append(node)
                self.depths.append(depth)
            node = child
            path.append(node)
        self.scored.append((request, path[len(path) - n_scored :]))

    def ancestors(self) -> np.ndarray:
        """[n, n] bool: node i may attend to node j (j is i or an ancestor of i). Parents precede children."""
        n = len(self.tokens)
        allowed = np.zeros((n, n), dtype=bool)
        for i, parent in enumerate(self.parents):
            if parent >= 0:
                allowed[i, : parent + 1] = allowed[parent, : parent + 1]
            allowed[i, i] = True
        return allowed


def common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def model_inputs(requests: list[Request], max_length: int) -> list[list[int]]:
    """Each request's input tokens as HFLM builds them: context + continuation, left-truncated to
    max_length + 1 tokens, without the last token (the model predicts it, it is never an input)."""
    return [(context + continuation)[-(max_length + 1) :][:-1] for _, context, continuation in requests]


def pack(requests: list[Request], inputs: list[list[int]], row_tokens: int) -> list[TokenTrie]:
    """Requests packed into tries, one per row. In lexicographic order of their inputs a request joins the
    previous request's row when at least a third of its input is shared with it (a question's options
    always, questions with the same few-shot examples too) and the row stays within `row_tokens` nodes; a
    request sharing less starts a new row (attention over a long packed row costs more than it saves)."""
    order = sorted(range(len(requests)), key=lambda i: inputs[i])
    rows: list[TokenTrie] = []
    previous: list[int] = []
    for i in order:
        sequence = inputs[i]
        shared = common_prefix(previous, sequence)
        new = len(sequence) - shared
        if not rows or 2 * shared < new or len(rows[-1]) + new > row_tokens:
            rows.append(TokenTrie())
        rows[-1].add(i, sequence, len(requests[i][2]))
        previous = sequence
    return rows


def forward_batches(rows: list[TokenTrie], token_budget: int) -> list[list[TokenTrie]]:
    """Rows longest first (a memory error shows at once), as many per forward pass as fit `token_budget`
    tokens with padding (never fewer than one); a row shorter than 3/4 of the batch's first starts a new batch
    (its padding would be computed for nothing)."""
    rows = sorted(rows, key=len, reverse=True)
    batches: list[list[TokenTrie]] = []
    for row in rows:
        width = len(batches[-1][0]) if batches else 0
        if batches and (len(batches[-1]) + 1) * width <= token_budget and 4 * len(row) >= 3 * width:
            batches[-1].append(row)
        else:
            batches.append([row])
    return batches


def packed_batch(
    rows: list[TokenTrie], dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[int]]:
    """One forward pass's inputs over packed rows, left-padded to the longest: token ids, position ids (each node's
    depth), the additive 4D attention mask (a node sees itself and its ancestors; a padding position sees itself
    only, so no softmax is over an empty row) and each row's padding (node n of row b is at column pads[b] + n)."""
    width = max(len(row) for row in rows)
    input_ids = torch.zeros((len(rows), width), dtype=torch.long)
    position_ids = torch.zeros((len(rows), width), dtype=torch.long)
    allowed = torch.zeros((len(rows), 1, width, width), dtype=torch.bool)
    pads = []
    for b, row in enumerate(rows):
        pad = width - len(row)
        input_ids[b, pad:] = torch.tensor(row.tokens)
        position_ids[b, pad:] = torch.tensor(row.depths)
        allowed[b, 0, pad:, pad:] = torch.from_numpy(row.ancestors())
        allowed[b, 0, torch.arange(pad), torch.arange(pad)] = True
        pads.append(pad)
    mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)
    return input_ids, position_ids, mask, pads


class SharedPrefixLM(HFLM):
    """lm-eval's HFLM whose loglikelihood requests share the computation of common prefixes (module docstring).

    Takes HFLM's arguments, plus `row_tokens`: the most trie nodes a packed row holds when it joins requests
    with different contexts (a row can be as long as twice the longest request regardless). A forward pass holds
    at most batch_size x the longest request's tokens, padding included: no more than HFLM's widest batch.
    loglikelihood_rolling and generate_until are HFLM's own, and so is every request with batch_size "auto", a
    seq2seq model, or an attention the packing does not fit (module docstring).
    """

    def __init__(self, *args: object, row_tokens: int = 2048, **kwargs: object) -> None:
        from benchprof.core.console import drop_model_object_warning

        drop_model_object_warning()  # benchprof hands lm-eval a loaded model on purpose: not worth a warning
        super().__init__(*args, **kwargs)
        self.row_tokens = row_tokens
        self.packing_checked = False  # the first packed row with a branch is checked against HFLM's path
        self.packing_works = True
        self.plain_path = False  # set while loglikelihood_rolling runs: HFLM's path for its windows
        # the model takes logits_to_keep (transformers' models do): logits only where a token is predicted
        self.keeps_logits = "logits_to_keep" in inspect.signature(self.model.forward).parameters
        self.encoded: dict[tuple[str, str], tuple[list[int], list[int]]] = {}

    def _encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """HFLM's, tokenised once per (context, continuation) for the life of this scorer: every variant of a run
        sends the same requests, so only the first tokenises them (the tokens depend on the text alone)."""
        key = (context, continuation)
        if key not in self.encoded:
            self.encoded[key] = super()._encode_pair(context, continuation)
        context_enc, continuation_enc = self.encoded[key]
        return list(context_enc), list(continuation_enc)  # copies: a caller's edit cannot reach the memo

    def loglikelihood_rolling(self, requests: list, disable_tqdm: bool = False) -> list[float]:
        """HFLM's own: a document's windows share no prefix, packing would save nothing."""
        self.plain_path = True
        try:
            return super().loglikelihood_rolling(requests, disable_tqdm=disable_tqdm)
        finally:
            self.plain_path = False

    def packable(self, inputs: list[list[int]]) -> bool:
        """Whether this model and these requests can go through the packed path."""
        config = self.model.config
        window = getattr(config, "sliding_window", None)
        longest = max((len(x) for x in inputs), default=0)
        return (
            self.packing_works
            and not self.plain_path
            and self.backend == "causal"
            and isinstance(self.batch_size, int)
            and getattr(config, "_attn_implementation", None) in PACKABLE_ATTENTION
            and not (isinstance(window, int) and window < longest)
        )

    def _loglikelihood_tokens(
        self,
        requests: list[Request],
        disable_tqdm: bool = False,
        override_bs: int | None = None,
    ) -> list[tuple[float, bool]]:
        for _, context, continuation in requests:
            assert len(context) > 0 and len(continuation) > 0 and len(continuation) <= self.max_length
        inputs = model_inputs(requests, self.max_length)
        if not requests or not self.packable(inputs):
            return super()._loglikelihood_tokens(requests, disable_tqdm=disable_tqdm, override_bs=override_bs)
        for _, context, continuation in requests:
            total = len(context) + len(continuation)
            if total > self.max_length + 1:
                log.warning(
                    f"Combined length of context ({len(context)}) and continuation ({len(continuation)}) "
                    f"exceeds model's maximum length ({self.max_length}). "
                    f"Truncating {total - self.max_length + 1} tokens from the left."
                )
        longest = max(len(x) for x in inputs)
        rows = pack(requests, inputs, max(self.row_tokens, 2 * longest))
        results: list[tuple[float, bool] | None] = [None] * len(requests)
        with tqdm(
            total=len(requests), disable=disable_tqdm or self.rank != 0, desc="Running loglikelihood requests"
        ) as bar:
            for batch in forward_batches(rows, int(self.batch_size) * longest):
                for request, answer in self.score_rows(batch, requests):
                    results[request] = answer
                if not self.packing_checked and self.check_packing(batch, requests, results):
                    return super()._loglikelihood_tokens(requests, disable_tqdm=disable_tqdm, override_bs=override_bs)
                bar.update(sum(len(row.scored) for row in batch))
        answers = [answer for answer in results if answer is not None]
        assert len(answers) == len(requests)
        for (key, _, _), answer in zip(requests, answers):
            if key is not None:  # loglikelihood_rolling's windows (key None) are cached per document by HFLM
                self.cache_hook.add_partial("loglikelihood", key, answer)
        return answers

    def score_rows(self, rows: list[TokenTrie], requests: list[Request]) -> list[tuple[int, tuple[float, bool]]]:
        """One forward pass over `rows` (left-padded): (request, (log-probability, greedy)) of each request."""
        input_ids, position_ids, mask, pads = packed_batch(rows, self.model.dtype)
        width = input_ids.shape[1]
        keep = torch.zeros((len(rows), width), dtype=torch.bool)
        for b, (row, pad) in enumerate(zip(rows, pads, strict=True)):
            for _, nodes in row.scored:
                keep[b, [pad + n for n in nodes]] = True
        kwargs = {"logits_to_keep": keep.to(self.device)} if self.keeps_logits else {}
        with (
            torch.no_grad(),
            torch.autocast(
                device_type=self.device.type,
                dtype=self.mixed_precision_dtype,
                enabled=self.mixed_precision_dtype is not None,
            ),
        ):
            logits = self.model(
                input_ids=input_ids.to(self.device),
                attention_mask=mask.to(self.device),
                position_ids=position_ids.to(self.device),
                use_cache=False,
                **kwargs,
            ).logits
        if logits.dim() == 3:  # a model that computed every position's logits
            logits = logits[keep.to(logits.device)]
        logprobs = F.log_softmax(logits, dim=-1, dtype=self.softmax_dtype)  # [kept positions, vocab]
        # kept positions are numbered row by row, left to right: a node's index among them
        flat = (torch.cumsum(keep.reshape(-1), 0) - 1).reshape(keep.shape)
        scored = [(b, width - len(row), request, nodes) for b, row in enumerate(rows) for request, nodes in row.scored]
        longest = max(len(nodes) for _, _, _, nodes in scored)
        # one [request, continuation token] table, padded: gathered and summed at once (one transfer, deterministic)
        at = torch.zeros((len(scored), longest), dtype=torch.long)
        target = torch.zeros((len(scored), longest), dtype=torch.long)
        real = torch.zeros((len(scored), longest), dtype=torch.bool)
        for j, (b, pad, request, nodes) in enumerate(scored):
            at[j, : len(nodes)] = flat[b, [pad + n for n in nodes]]
            target[j, : len(nodes)] = torch.tensor(requests[request][2])
            real[j, : len(nodes)] = True
        at, target, real = at.to(logprobs.device), target.to(logprobs.device), real.to(logprobs.device)
        logprob = torch.where(real, logprobs[at, target], 0.0).sum(dim=1)
        greedy = ((logprobs.argmax(dim=-1)[at] == target) | ~real).all(dim=1)
        return [
            (request, (value, flag))
            for (_, _, request, _), value, flag in zip(scored, logprob.tolist(), greedy.tolist())
        ]

    def check_packing(
        self, rows: list[TokenTrie], requests: list[Request], results: list[tuple[float, bool] | None]
    ) -> bool:
        """Check once, on the shortest request whose nodes follow another branch's (node index != depth) in the
        first batch that has one, that packing gives HFLM's answer; True if it does not (this instance then uses
        HFLM's path from now on). A model that ignores the mask or the position ids fails there."""
        branched = [request for row in rows for request, nodes in row.scored if any(n != row.depths[n] for n in nodes)]
        if not branched:
            return False
        self.packing_checked = True
        request = min(branched, key=lambda i: len(requests[i][1]) + len(requests[i][2]))
        _, context, continuation = requests[request]
        # key None: HFLM's path does not call the cache hook for it (this method does, with the packed answer)
        [(logprob, _)] = super()._loglikelihood_tokens([(None, context, continuation)], disable_tqdm=True)
        packed = results[request]
        assert packed is not None
        tolerance = 1e-3 if self.model.dtype == torch.float32 and self.mixed_precision_dtype is None else 0.1
        if abs(packed[0] - logprob) <= tolerance * max(1.0, abs(logprob)):
            return False
        log.warning(
            f"benchprof: packed scoring gives {packed[0]:.4f} where HFLM gives {logprob:.4f} on this model; "
            "scoring with HFLM's own code instead"
        )
        self.packing_works = False
        return True
