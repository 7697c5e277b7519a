"""The training pieces shared by the demo model's training (demo_model.py) and the plants (realplant.py): each
item in both formats the pipeline reads, padded batches with answer tokens up-weighted, the weighted loss, an
endless shuffled stream of batches and the learning-rate schedule.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from benchprof.core.prompts import chat_messages, eval_prompt

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase

# (token ids, first loss position) of one training example
Example = tuple[list[int], int]


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
