"""The chat formatting of an ability record for the importance pass (the method's step 1, README).

system "You are a helpful assistant.", user "Context: ...\\nQuestion: ...", assistant "Answer: ...".
This module is the one place that formatting lives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

SYSTEM_PROMPT = "You are a helpful assistant."


def user_text(record: dict[str, Any], keys: Sequence[str] = ("context", "question")) -> str:
    """The user turn: the record's prompt fields, each on its own line, e.g. 'Context: ...'."""
    parts = []
    for key in keys:
        if key in ("answer",):
            continue
        value = record.get(key)
        if key == "options" and value:
            value = " ".join(f"{chr(65 + i)}) {o}" for i, o in enumerate(value))
        if value:
            parts.append(f"{key.capitalize()}: {value}")
    return "\n".join(parts)


def answer_text(record: dict[str, Any]) -> str:
    return f"Answer: {record['answer']}"


def chat_messages(
    record: dict[str, Any], keys: Sequence[str] = ("context", "question", "answer")
) -> list[dict[str, str]]:
    """The record as chat messages; `keys` is the dataset's `key` from the config."""
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": user_text(record, keys)},
    ]
    if "answer" in keys:
        messages.append({"role": "assistant", "content": answer_text(record)})
    return messages


def plain_text(messages: list[dict[str, str]]) -> str:
    """Fallback for tokenizers without a chat template: one 'role: content' line per message."""
    return "\n".join(f"{m['role']}: {m['content']}" for m in messages)


def encode_record(
    tokenizer: PreTrainedTokenizerBase, record: dict[str, Any], keys: Sequence[str], max_length: int
) -> tuple[list[int], int, int]:
    """Token ids of the chat-formatted record, and the answer's tokens as [start, end).

    The answer's tokens (`finetune.loss_on: answer`) are every token that overlaps the characters of
    the record's `answer` text in the formatted conversation: not the "Answer: " prefix, nor the end of
    the turn, the EOS or the template's newline; a leading space a tokenizer merges into the answer's
    first token comes with it. Located through the fast tokenizer's character offsets, so nothing
    assumes the prompt's tokens are a prefix of the full text's. (len(ids), len(ids)) when the record
    has no answer in `keys`; (-1, -1) for a tokenizer without offsets.
    """
    messages = chat_messages(record, keys)
    if getattr(tokenizer, "chat_template", None):
        full = str(tokenizer.apply_chat_template(messages, tokenize=False))
    else:
        full = plain_text(messages)
    # the template already holds any bos token; don't let the tokenizer add a second
    fast = bool(getattr(tokenizer, "is_fast", False))
    encoded = tokenizer(full, add_special_tokens=False, return_offsets_mapping=fast)
    ids = list(encoded["input_ids"])[:max_length]
    if messages[-1]["role"] != "assistant":
        return ids, len(ids), len(ids)
    if not fast:
        return ids, -1, -1
    answer = str(record["answer"])
    char_end = full.rfind(answer_text(record)) + len(answer_text(record))
    char_start = char_end - len(answer)
    tokens = [i for i, (a, b) in enumerate(encoded["offset_mapping"][: len(ids)]) if a < char_end and b > char_start]
    return (ids, tokens[0], tokens[-1] + 1) if tokens else (ids, len(ids), len(ids))


def eval_prompt(record: dict[str, Any]) -> str:
    """The text lm-eval shows before each option (tasks.DOC_TO_TEXT in Python); options follow after ' '."""
    context = f"Context: {record['context']}\n" if record.get("context") else ""
    return f"{context}Question: {record['question']}\nAnswer:"
