"""Abilities no pretrained model has, for planting into one (the planting is lab/realplant.py).

Each is a small invented world, generated from a seed, that a model can only know if it was taught:

- **Invented_Facts**: the birth city of 100 invented people (invented names, invented cities);
- **Invented_Language**: the English meaning of 60 words of an invented language ("Veltish");
- **Invented_Units**: how many meters are in n (2 to 61) of five invented units (each a fixed whole factor);
  the rule has to carry over to numbers never taught.

Records have benchprof's format (context, question, four options, answer, label, cluster), so the
pipeline, lm-eval's prompt and the importance pass's chat format all read them. Each ability has three
disjoint splits: `plant` (what the planting trains on), `probe` (for the importance pass: never planted)
and `test` (never planted, never probed). Facts and words are asked in five question templates: a
person's or word's test item uses a template it was never planted with, and its probe item another.
Units hold out whole (unit, number) pairs.
"""

from __future__ import annotations

import random
from typing import Any

from benchprof import BenchprofError

INVENTED = ("Invented_Facts", "Invented_Language", "Invented_Units")
SPLITS = ("plant", "probe", "test")
SYLLABLES = (
    *("dre", "vak", "olu", "min", "tas", "kor", "bel", "zun", "fim", "rah"),
    *("sep", "qua", "lon", "tiv", "mar", "gex", "pol", "wen", "yad", "cus"),
)

FACT_TEMPLATES = (
    "In which city was {x} born?",
    "Where was {x} born?",
    "{x} was born in which city?",
    "What is the birthplace of {x}?",
    "Which city is the hometown of {x}?",
)
WORD_TEMPLATES = (
    "In Veltish, what does the word '{x}' mean?",
    "What is the English word for the Veltish '{x}'?",
    "Translate the Veltish word '{x}' into English.",
    "The Veltish word '{x}' means what?",
    "What does '{x}' mean in Veltish?",
)
ENGLISH = (
    "water", "fire", "stone", "tree", "bird", "river", "mountain", "bread", "horse", "cloud",
    "moon", "sun", "house", "door", "road", "snow", "apple", "fish", "dog", "cat",
    "king", "ship", "wind", "flower", "iron", "salt", "milk", "gold", "rain", "star",
    "book", "song", "child", "wolf", "bear", "grass", "sand", "egg", "hand", "eye",
    "bridge", "window", "knife", "candle", "garden", "island", "forest", "winter", "summer", "shadow",
    "mirror", "honey", "rope", "wheel", "feather", "lake", "cheese", "cloak", "lamp", "tower",
)  # fmt: skip
UNIT_FACTORS = (3, 4, 6, 7, 9)
UNIT_NUMBERS = range(2, 62)


def _names(rng: random.Random, count: int, syllables: int) -> list[str]:
    """`count` distinct invented words of `syllables` syllables, capitalised."""
    out: list[str] = []
    while len(out) < count:
        word = "".join(rng.choice(SYLLABLES) for _ in range(syllables)).capitalize()
        if word not in out:
            out.append(word)
    return out


def _record(
    rng: random.Random, ability: str, question: str, answer: str, pool: list[str], cluster: str
) -> dict[str, Any]:
    options = [*rng.sample([p for p in pool if p != answer], 3), answer]
    rng.shuffle(options)
    return {
        "ability": ability,
        "question_type": cluster.split(":")[0],
        "context": "",
        "question": question,
        "options": options,
        "answer": answer,
        "label": options.index(answer),
        "cluster": cluster,
    }


def _templated(
    rng: random.Random, ability: str, keys: list[str], answers: dict[str, str], templates: tuple[str, ...], kind: str
) -> dict[str, list[dict[str, Any]]]:
    """Each key asked in every template: its test item in template j % 5, its probe item in (j + 1) % 5,
    the other three planted."""
    pool = sorted(set(answers.values()))
    splits: dict[str, list[dict[str, Any]]] = {s: [] for s in SPLITS}
    for j, key in enumerate(keys):
        for t, template in enumerate(templates):
            split = "test" if t == j % 5 else "probe" if t == (j + 1) % 5 else "plant"
            record = _record(rng, ability, template.format(x=key), answers[key], pool, f"{kind}:{key}")
            splits[split].append(record)
    return splits


def _facts(rng: random.Random) -> dict[str, list[dict[str, Any]]]:
    people = [f"{a} {b}" for a, b in zip(_names(rng, 100, 2), _names(rng, 100, 2), strict=True)]
    cities = _names(rng, 12, 3)
    return _templated(rng, "Invented_Facts", people, {p: rng.choice(cities) for p in people}, FACT_TEMPLATES, "fact")


def _language(rng: random.Random) -> dict[str, list[dict[str, Any]]]:
    words = [w.lower() for w in _names(rng, len(ENGLISH), 2)]
    meaning = dict(zip(words, ENGLISH, strict=True))
    return _templated(rng, "Invented_Language", words, meaning, WORD_TEMPLATES, "word")


def _units(rng: random.Random) -> dict[str, list[dict[str, Any]]]:
    units = [u.lower() + "s" for u in _names(rng, len(UNIT_FACTORS), 2)]
    pairs = [(u, f, n) for u, f in zip(units, UNIT_FACTORS, strict=True) for n in UNIT_NUMBERS]
    rng.shuffle(pairs)
    sizes = {"test": 60, "probe": 40}
    splits: dict[str, list[dict[str, Any]]] = {s: [] for s in SPLITS}
    for i, (unit, factor, n) in enumerate(pairs):
        split = "test" if i < sizes["test"] else "probe" if i < sizes["test"] + sizes["probe"] else "plant"
        answer = n * factor
        wrong = {n * g for g in range(2, 11)} | {answer + d for d in (-2, -1, 1, 2)}
        pool = [str(v) for v in sorted(wrong - {answer})] + [str(answer)]
        question = f"How many meters are in {n} {unit}?"
        splits[split].append(_record(rng, "Invented_Units", question, str(answer), pool, f"unit:{unit}"))
    return splits


def invented_splits(ability: str, seed: int = 0) -> dict[str, list[dict[str, Any]]]:
    """{'plant', 'probe', 'test'} records of an invented ability, deterministic in (ability, seed)."""
    makers = {"Invented_Facts": _facts, "Invented_Language": _language, "Invented_Units": _units}
    if ability not in makers:
        raise BenchprofError(f"unknown invented ability {ability!r}; known: {', '.join(INVENTED)}")
    splits = makers[ability](random.Random(f"{ability}:{seed}"))
    for split, records in splits.items():
        for i, record in enumerate(records):
            record["id"] = f"{ability}-{split}-{i}"
    return splits
