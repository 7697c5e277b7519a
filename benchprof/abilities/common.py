"""Pieces shared by the ability generators: the item tuple, the curated tables, distractor picking
and the question specs of table-driven (knowledge) abilities."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import NamedTuple

TABLES = Path(__file__).parent / "tables"

NAMES = (
    "Ann",
    "Bob",
    "Cal",
    "Dan",
    "Eve",
    "Fay",
    "Gus",
    "Hal",
    "Ivy",
    "Jon",
    "Kim",
    "Lea",
    "Max",
    "Ned",
    "Ola",
    "Pam",
    "Ray",
    "Sam",
    "Tom",
    "Uma",
    "Val",
    "Wes",
    "Zoe",
    "Liz",
)


class Item(NamedTuple):
    """One generated question before layout: the answer and exactly three wrong options.

    `cluster` names the template and the fact the answer rests on ("plural:key"; see `made_up` for
    problems made up on the spot): the bootstrap resamples items sharing it together. `problem` names what the
    item asks with its names and wording masked (made_up); empty, the cluster is the problem (a table fact asked
    in any template). Splits drawn by problem (`generate(..., split_by="problem")`) share none."""

    question_type: str
    context: str
    question: str
    answer: str
    distractors: tuple[str, ...]
    cluster: str = ""
    problem: str = ""


class Spec(NamedTuple):
    """A fixed question of a table-driven ability. Any of `answers` is correct (the options then
    hold exactly one of them); distractors come from `hard` first (up to two), then from `pool`.
    Neither pool holds a correct answer."""

    question_type: str
    context: str
    question: str
    answers: tuple[str, ...]
    hard: tuple[str, ...]
    pool: tuple[str, ...]
    cluster: str = ""  # "<relation>:<fact key>", as Item.cluster


@cache
def table(name: str):
    """A curated table from abilities/tables/<name>.json (parsed once)."""
    return json.loads((TABLES / f"{name}.json").read_text(encoding="utf-8"))


def article(noun: str) -> str:
    """'a cat', 'an owl' (the tables avoid words like 'hour' whose sound breaks the rule)."""
    return ("an " if noun[0].lower() in "aeiou" else "a ") + noun


def capital_first(text: str) -> str:
    return text[:1].upper() + text[1:]


def pick(
    rng: random.Random, answer: str, pool: Iterable[str], k: int = 3, hard: Iterable[str] = (), n_hard: int = 2
) -> tuple[str, ...]:
    """k distinct wrong options: up to n_hard from `hard`, the rest from `pool`; never `answer`."""
    hard_left = [h for h in dict.fromkeys(hard) if h != answer]
    chosen = rng.sample(hard_left, min(n_hard, len(hard_left), k))
    rest = [p for p in dict.fromkeys(pool) if p != answer and p not in chosen]
    chosen += rng.sample(rest, k - len(chosen))
    return tuple(chosen)


def near_numbers(rng: random.Random, answer: int, mistakes: Sequence[int], k: int = 3, low: int = 0) -> tuple[str, ...]:
    """k wrong numbers: typical mistakes first (wrong operation, off by one), then nearby values."""
    wrong = [m for m in dict.fromkeys(mistakes) if m != answer and m >= low]
    chosen = rng.sample(wrong, min(2, len(wrong)))
    offsets = [d for d in range(-5, 6) if d and answer + d >= low] + list(range(6, 10))
    while len(chosen) < k:
        if wrong and rng.random() < 0.5:
            candidate = rng.choice(wrong)
        else:
            candidate = answer + rng.choice(offsets)
        if candidate not in chosen:
            chosen.append(candidate)
    return tuple(str(c) for c in chosen)


def draw_spec(rng: random.Random, specs: Sequence[Spec]) -> Item:
    spec = rng.choice(specs)
    answer = rng.choice(spec.answers)
    wrong = pick(rng, answer, spec.pool, hard=spec.hard)
    return Item(spec.question_type, spec.context, spec.question, answer, wrong, spec.cluster)


def made_up(item: Item, template: str, problem: str | None = None) -> Item:
    """`item` (a problem made up from drawn values, no table fact) with its cluster: the generator's
    `template` and the problem itself, a hash of its context and answer; so items that differ only in
    how the question is worded share a cluster, and the others are clusters of their own.

    Its `problem` is what it asks with names and wording masked: `problem` when the generator names it (the drawn
    values that decide the answer, e.g. "add:3:4" whatever the things counted), else its context with every name
    of NAMES masked, and its answer."""
    digest = hashlib.sha256(f"{item.context}\n{item.answer}".encode()).hexdigest()[:12]
    if problem is None:
        problem = f"{masked_names(item.context)}\n{masked_names(item.answer)}"
    return item._replace(cluster=f"{template.strip('_')}:{digest}", problem=problem_key(template, problem))


def problem_key(template: str, problem: str) -> str:
    """An Item.problem: the template and a hash of the problem (an item of another format asking the same problem,
    a transfer item, names it the same way)."""
    return f"{template.strip('_')}:{hashlib.sha256(problem.encode()).hexdigest()[:12]}"


def masked_names(text: str) -> str:
    """`text` with every name of NAMES (whole words) written as "X": the same problem told of someone else."""
    import re

    return re.sub(r"\b(" + "|".join(NAMES) + r")\b", "X", text)


def relation_specs(
    question_type: str,
    pairs: Sequence[tuple[str, str]],
    forward: Sequence[str],
    reverse: Sequence[str] = (),
    hard_forward=None,
    hard_reverse=None,
    min_pool: int = 3,
    relation: str = "",
) -> list[Spec]:
    """Specs for a relation key -> value given as (key, value) pairs.

    `forward` templates ask a key's value ("{key}" in the text), `reverse` templates ask which key
    has a value ("{value}"). A key with several values, or a value shared by several keys, makes
    all of them correct, and none of them is used as a distractor. `hard_forward(key, value)` /
    `hard_reverse(key, value)` may name plausible distractors (e.g. same-continent capitals).
    Each spec's cluster is "<relation>:<key>" (a reverse question whose value several keys share:
    "<relation>:<value>"), so a fact asked forward and backward is one cluster."""
    values_of: dict[str, set[str]] = {}
    keys_of: dict[str, set[str]] = {}
    for key, value in pairs:
        values_of.setdefault(key, set()).add(value)
        keys_of.setdefault(value, set()).add(key)
    all_values = list(keys_of)
    all_keys = list(values_of)
    specs = []
    for key, values in values_of.items():
        pool = tuple(v for v in all_values if v not in values and v != key)
        value = sorted(values)[0]
        hard = tuple(h for h in (hard_forward(key, value) if hard_forward else ()) if h not in values)
        for template in forward:
            question = fill(template, key=key)
            specs.append(Spec(question_type, "", question, tuple(sorted(values)), hard, pool, f"{relation}:{key}"))
    for value, keys in keys_of.items():
        pool = tuple(k for k in all_keys if value not in values_of[k] and k != value)
        if len(pool) < min_pool:
            continue
        key = sorted(keys)[0]
        hard = tuple(h for h in (hard_reverse(key, value) if hard_reverse else ()) if h not in keys)
        fact = key if len(keys) == 1 else value
        for template in reverse:
            question = fill(template, value=value)
            specs.append(Spec(question_type, "", question, tuple(sorted(keys)), hard, pool, f"{relation}:{fact}"))
    return specs


def fill(template: str, **slots: str) -> str:
    """Format a template; '{a_key}' gives the slot with its article, '{Key}' capitalised."""
    extra = {}
    for name, text in slots.items():
        extra[f"a_{name}"] = article(text)
        extra[name.capitalize()] = capital_first(text)
        extra[f"A_{name}"] = capital_first(article(text))
    return capital_first(template.format(**slots, **extra))
