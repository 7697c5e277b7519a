"""The chat formatting of an ability record for the importance pass (DESIGN.md section 1.1).

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
) -> tuple[list[int], int]:
    """Token ids of the chat-formatted record, and where the answer's tokens start.

    The answer start lets the loss be restricted to the answer (`finetune.loss_on: answer`): the
    prompt is encoded with the generation prompt appended, and its length marks the boundary.
    """
    messages = chat_messages(record, keys)
    prompt_messages = messages[:-1] if messages[-1]["role"] == "assistant" else messages
    if getattr(tokenizer, "chat_template", None):
        full = tokenizer.apply_chat_template(messages, tokenize=False)
        prompt = tokenizer.apply_chat_template(prompt_messages, tokenize=False, add_generation_prompt=True)
    else:
        full = plain_text(messages)
        prompt = plain_text(prompt_messages) + "\nassistant: "
    # the template already holds any bos token; don't let the tokenizer add a second
    ids = tokenizer(full, add_special_tokens=False)["input_ids"][:max_length]
    n_prompt = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    return ids, min(n_prompt, len(ids))


def eval_prompt(record: dict[str, Any]) -> str:
    """The text lm-eval shows before each option (tasks.DOC_TO_TEXT in Python); options follow after ' '."""
    context = f"Context: {record['context']}\n" if record.get("context") else ""
    return f"{context}Question: {record['question']}\nAnswer:"
