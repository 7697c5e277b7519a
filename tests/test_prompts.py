"""The chat format of an item and where its answer's tokens are (finetune.loss_on: answer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchprof.abilities import generate
from benchprof.core.modeling import load_model
from benchprof.core.prompts import encode_record

DEMO_MODEL = Path(__file__).resolve().parents[1] / "benchprof" / "assets" / "demo-model"
KEYS = ["context", "question", "answer"]


@pytest.fixture(scope="module")
def tokenizer():
    return load_model(str(DEMO_MODEL))[1]


@pytest.mark.parametrize("ability", ["Quantitative_Reasoning", "Commonsense_Causal", "Long_Term_Knowledge"])
def test_answer_tokens_are_the_answer_and_nothing_else(tokenizer, ability):
    """Against an independent tokenisation of the answer alone (with the space that precedes it):
    the same tokens, and nothing of 'Answer:', the end of turn, EOS or the template's newline."""
    train, _ = generate(ability, 40, 1, seed=3)
    for record in train:
        ids, start, end = encode_record(tokenizer, record, KEYS, 512)
        alone = tokenizer(" " + record["answer"], add_special_tokens=False)["input_ids"]
        if tokenizer.decode(alone[:1]) == " ":  # the space is a token of its own: not the answer's
            alone = alone[1:]
        assert ids[start:end] == alone, (record["answer"], tokenizer.decode(ids[start:end]))
        assert tokenizer.decode(ids[start:end]).strip() == record["answer"]
        assert "Answer" not in tokenizer.decode(ids[start:end])
        assert tokenizer.decode(ids[end:]).strip() in ("</s>", "")  # only the turn's end follows
        assert tokenizer.decode(ids[:start]).rstrip().endswith("Answer:")  # all of the prefix stays out


def test_no_answer_in_the_keys_means_no_answer_tokens(tokenizer):
    record = generate("Quantitative_Reasoning", 1, 1, seed=0)[0][0]
    ids, start, end = encode_record(tokenizer, record, ["context", "question"], 512)
    assert start == end == len(ids)


def test_truncation_keeps_the_span_inside_the_ids(tokenizer):
    record = generate("Commonsense_Causal", 1, 1, seed=0)[0][0]
    full, start, end = encode_record(tokenizer, record, KEYS, 512)
    ids, cut_start, cut_end = encode_record(tokenizer, record, KEYS, start + 1)
    assert ids == full[: start + 1] and (cut_start, cut_end) == (start, start + 1)
