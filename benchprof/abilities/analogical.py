"""Analogical_Reasoning: A : B :: C : ?  over curated relations (opposites, animal young, sounds,
homes and groups, capitals, parts, kinds, past tense, plurals, comparatives, female forms, workers'
tools). The wrong options include what C is linked to by *other* relations (dog -> bark, kennel
when the relation is young -> puppy), so the relation must be carried over from A : B."""

from __future__ import annotations

import random
from functools import cache

from benchprof.abilities.common import Item, fill, pick, table

QUESTION_TYPES = ("analogy",)
QT = QUESTION_TYPES[0]
COMPLETE = (
    "{A} is to {b} as {c} is to what?",
    "{A} : {b} :: {c} : ?",
    "If {a} goes with {b}, what goes with {c}?",
    "{A} and {b} go together. What goes with {c} in the same way?",
)
PAIR = ("Which pair is related like {a} and {b}?", "{A} is to {b} as which pair?")
SYMMETRIC = {"opposite"}


@cache
def relations() -> dict[str, dict[str, frozenset[str]]]:
    """relation name -> key -> the set of correct values."""
    animals = table("animals")
    raw = {
        "opposite": [tuple(p) for p in table("opposites")] + [(b, a) for a, b in table("opposites")],
        "past": [tuple(p) for p in table("verbs")],
        "plural": [tuple(p) for p in table("plurals")],
        "comparative": [tuple(p) for p in table("comparatives")],
        "female": [tuple(p) for p in table("genders")],
        "worker": [tuple(p) for p in table("workers")],
        "capital": [(r["country"], r["capital"]) for r in table("countries") if r["capital"]],
        "part": [(p, whole) for whole, parts in table("parts").items() for p in parts],
        "kind": [(m, row["category"]) for row in table("kinds") for m in row["members"]],
    }
    for field in ("young", "sound", "home", "group"):
        raw[field] = [(row["animal"], row[field]) for row in animals if row[field]]
    out = {}
    for name, pairs in raw.items():
        values: dict[str, set[str]] = {}
        for key, value in pairs:
            values.setdefault(key, set()).add(value)
        out[name] = {k: frozenset(v) for k, v in values.items()}
    return out


def _links(word: str, skip: str) -> list[str]:
    """What `word` maps to under relations other than `skip`: lures for the analogy."""
    return sorted(v for name, rel in relations().items() if name != skip for v in rel.get(word, ()))


def _pairs(rng: random.Random, rel: dict[str, frozenset[str]]) -> tuple[str, str, str, str]:
    """A : B and C : D, two pairs of the relation with one value each, all four words distinct where it matters."""
    keys = sorted(k for k, vs in rel.items() if len(vs) == 1)
    while True:
        a, c = rng.sample(keys, 2)
        (b,), (d,) = rel[a], rel[c]
        if b != d and d not in (a, c) and b not in (a, c):
            return a, b, c, d


def draw(rng: random.Random) -> Item:
    rels = relations()
    name = rng.choice(sorted(rels))
    rel = rels[name]
    a, b, c, d = _pairs(rng, rel)
    wrong_values = sorted({v for k, vs in rel.items() for v in vs} - rel[c] - {c})
    if rng.random() < 0.75:
        question = fill(rng.choice(COMPLETE), a=a, b=b, c=c)
        wrong = pick(rng, d, wrong_values, hard=[*_links(c, name), b])
        return Item(QT, "", question, d, wrong, f"{name}:{c}")
    # Pair form: which (C, D) stands in the same relation as (A, B)?
    answer = f"{c} and {d}"
    lures = [f"{c} and {rng.choice(wrong_values)}"]
    if name not in SYMMETRIC:
        lures.append(f"{d} and {c}")
    other = [n for n in sorted(rels) if n != name]
    for n in rng.sample(other, 4):
        x = rng.choice(sorted(rels[n]))
        lures.append(f"{x} and {sorted(rels[n][x])[0]}")
    question = fill(rng.choice(PAIR), a=a, b=b)
    return Item(QT, "", question, answer, pick(rng, answer, lures[2:], hard=lures[:2]), f"{name}:{c}")


def facts() -> list[str]:
    sentences = {
        "opposite": "The opposite of {k} is {v}.",
        "past": "The past tense of {k} is {v}.",
        "plural": "The plural of {k} is {v}.",
        "comparative": "The comparative of {k} is {v}.",
        "female": "The female form of {k} is {v}.",
        "worker": "{A_k} uses {a_v}.",
        "capital": "The capital of {k} is {v}.",
        "part": "{A_k} is part of {a_v}.",
        "kind": "{K} is a kind of {v}.",
        "young": "A young {k} is called {a_v}.",
        "sound": "The sound {a_k} makes is {v}.",
        "home": "{A_k} lives in {a_v}.",
        "group": "{A_k} lives in a group called {a_v}.",
    }
    out = []
    for name, rel in relations().items():
        for key, values in rel.items():
            for value in sorted(values):
                out.append(fill(sentences[name], k=key, v=value))
    return out


EASY_RELATIONS = ("plural", "past", "comparative", "opposite")  # word-form relations: the answer is C's own form


def draw_easy(rng: random.Random) -> Item:
    """The easy level: A : B :: C : ? over a word-form relation (plural, past tense, comparative, opposite); the
    wrong options are values of other relations that have nothing to do with C."""
    rels = relations()
    name = rng.choice(EASY_RELATIONS)
    rel = rels[name]
    a, b, c, d = _pairs(rng, rel)
    near = {c, a, b, *rel[c], *_links(c, "")}
    unrelated = sorted({v for n, r in rels.items() if n not in EASY_RELATIONS for vs in r.values() for v in vs} - near)
    question = fill(rng.choice(COMPLETE), a=a, b=b, c=c)
    return Item(QT, "", question, d, tuple(rng.sample(unrelated, 3)), f"easy_{name}:{c}")


def draw_transfer(rng: random.Random) -> Item:
    """A format the train split never uses: the easy level's analogies written as arrows, with no relation word
    ("dog -> dogs, cat -> ?"); the problem (relation and C) is named as the easy level names it."""
    rels = relations()
    name = rng.choice(EASY_RELATIONS)
    a, b, c, d = _pairs(rng, rels[name])
    near = {c, a, b, *rels[name][c], *_links(c, "")}
    unrelated = sorted({v for n, r in rels.items() if n not in EASY_RELATIONS for vs in r.values() for v in vs} - near)
    item = Item(QT, f"{a} -> {b}, {c} -> ?", "Which word goes in place of the question mark?", d, ())
    return item._replace(
        distractors=tuple(rng.sample(unrelated, 3)), cluster=f"arrow_{name}:{c}", problem=f"easy_{name}:{c}"
    )
