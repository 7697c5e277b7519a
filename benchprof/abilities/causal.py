"""Commonsense_Causal: the most plausible effect of an everyday event, or its most plausible cause.

Table causes.json holds hand-written cause -> effect pairs, each with a topic; a person's name fills
the {name} slot. Wrong options are effects (or causes) of pairs on other topics, told about the
same person, so they are the same kind of sentence but do not follow from the event."""

from __future__ import annotations

import random

from benchprof.abilities.common import NAMES, Item, capital_first, pick, table

QUESTION_TYPES = ("everyday_cause_effect",)
EFFECT_QUESTIONS = (
    "What most likely happened next?",
    "What is the most likely result?",
    "What happened because of this?",
    "What is the most likely effect?",
)
CAUSE_QUESTIONS = (
    "What was the most likely cause?",
    "Why did this most likely happen?",
    "What probably happened just before this?",
    "What most likely led to this?",
)


def _sentence(text: str, name: str) -> str:
    return capital_first(text.format(name=name)) + "."


def draw(rng: random.Random) -> Item:
    rows = table("causes")
    row = rng.choice(rows)
    name = rng.choice(NAMES)
    others = [r for r in rows if r["topic"] != row["topic"]]
    given, asked = ("cause", "effect") if rng.random() < 0.5 else ("effect", "cause")
    questions = EFFECT_QUESTIONS if asked == "effect" else CAUSE_QUESTIONS
    answer = _sentence(row[asked], name)
    wrong = pick(rng, answer, [_sentence(r[asked], name) for r in others])
    question = rng.choice(questions)
    cluster = f"{row['topic']}:{rows.index(row)}"  # the cause -> effect pair (its row), whichever way asked
    return Item(QUESTION_TYPES[0], _sentence(row[given], name), question, answer, wrong, cluster)


def facts() -> list[str]:
    return [
        capital_first(f"{row['cause']}, so {row['effect']}.".format(name=NAMES[i % len(NAMES)]))
        for i, row in enumerate(table("causes"))
    ]


def draw_transfer(rng: random.Random) -> Item:
    """A format the train split never uses: one sentence to complete with "so" (an effect) or "because" (a cause),
    no question; the problem (the cause -> effect row) is named as the train split's cluster names it."""
    rows = table("causes")
    row = rng.choice(rows)
    name = rng.choice(NAMES)
    others = [r for r in rows if r["topic"] != row["topic"]]
    if rng.random() < 0.5:
        given, asked, joint = "cause", "effect", "so"
    else:
        given, asked, joint = "effect", "cause", "because"
    answer = row[asked].format(name=name) + "."
    wrong = pick(rng, answer, [r[asked].format(name=name) + "." for r in others])
    question = f"Complete the sentence: {capital_first(row[given].format(name=name))}, {joint} ..."
    fact = f"{row['topic']}:{rows.index(row)}"
    return Item(QUESTION_TYPES[0], "", question, answer, wrong, f"complete_{fact}", problem=fact)
