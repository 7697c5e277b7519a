"""The abilities: the one registry every part of benchprof reads (data generation, config validation, the
plants). The paper's ten are offline generators (one module per ability) over the curated fact tables under
abilities/tables/; the invented ones (invented.py) have fixed splits, planted into a model on purpose.

Each ability module defines QUESTION_TYPES, `draw(rng) -> Item` (one random question with its
computed answer, three wrong options and its cluster: template and fact), `facts() -> list[str]`
and, when its question space is finite, `capacity() -> int`. This file turns draws into balanced,
de-duplicated splits; a record's `cluster` is "<question_type>:<template>:<fact>".

May import: the package root (BenchprofError) only: the abilities are data, below everything that uses them.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from types import ModuleType
from typing import Any

from benchprof import BenchprofError
from benchprof.abilities import (
    analogical,
    causal,
    contextual,
    deductive,
    inductive,
    knowledge,
    quantitative,
    semantic,
    spatial,
    temporal,
)
from benchprof.abilities.common import Item
from benchprof.abilities.invented import INVENTED, invented_splits

MODULES: dict[str, ModuleType] = {
    "Analogical_Reasoning": analogical,
    "Commonsense_Causal": causal,
    "Contextual_Recall": contextual,
    "Deductive_Reasoning": deductive,
    "Inductive_Reasoning": inductive,
    "Long_Term_Knowledge": knowledge,
    "Quantitative_Reasoning": quantitative,
    "Semantic_Relationship": semantic,
    "Spatial_Reasoning": spatial,
    "Temporal_Reasoning": temporal,
}
ABILITIES: tuple[str, ...] = tuple(MODULES)  # the paper's ten
# plus the abilities planted into a real model (invented.py), which no pretrained model has: every ability
# whose splits benchprof writes and whose test split is a local task
KNOWN_ABILITIES: tuple[str, ...] = ABILITIES + INVENTED
ABILITY_QUESTION_TYPES: dict[str, tuple[str, ...]] = {name: m.QUESTION_TYPES for name, m in MODULES.items()}
N_OPTIONS = 4
# item difficulty levels: "paper" (the default, the paper's kinds of question) and "easy" (one step, two facts,
# wrong options far from the answer and out of the context: what a small model can do; an ability with no
# `draw_easy` keeps its paper items)
LEVELS = ("paper", "easy")


def has_easy_level(ability: str) -> bool:
    """Whether `ability` draws other items at the easy level (its module has `draw_easy`)."""
    return hasattr(MODULES.get(ability), "draw_easy")


def split_sizes(ability: str, train_size: int, test_size: int, seed: int) -> tuple[int, int]:
    """The (train, test) sizes `splits` gives: those asked, or fewer where an invented ability's splits hold fewer."""
    if ability not in INVENTED:
        return train_size, test_size
    fixed = invented_splits(ability, seed)
    return min(train_size, len(fixed["probe"])), min(test_size, len(fixed["test"]))


def splits(
    ability: str, train_size: int, test_size: int, seed: int, difficulty: str = "paper"
) -> tuple[list[dict], list[dict]]:
    """(train, test) records of any known ability. A generated ability draws them at `difficulty` (`generate`;
    LEVELS). An invented
    ability (planted into a real model, never generated at will) has fixed splits: its train split is the first
    `train_size` items of its `probe` split and its test split the first `test_size` of its `test` split, both
    disjoint from the `plant` split the model was trained on when `seed` is the planting's data seed."""
    if ability in INVENTED:
        fixed = invented_splits(ability, seed)
        return fixed["probe"][:train_size], fixed["test"][:test_size]
    return generate(ability, train_size, test_size, seed, difficulty)


def _module(ability: str) -> ModuleType:
    if ability not in MODULES:
        raise BenchprofError(f"unknown ability {ability!r}; known: {', '.join(MODULES)}")
    return MODULES[ability]


def fact_texts(ability: str) -> list[str]:
    """Plain-English statements of the table facts `ability` draws on ([] if it uses no table)."""
    return list(_module(ability).facts())


def generate(
    ability: str, train_size: int, test_size: int, seed: int, difficulty: str = "paper"
) -> tuple[list[dict], list[dict]]:
    """Generate (train, test) records of `ability` at `difficulty` (LEVELS), deterministically from `seed`.

    No (context, question) repeats within or across the splits; each split has its answers spread
    evenly over the four option positions. The test split depends only on (seed, test_size), so
    changing train_size keeps the evaluation items."""
    module = _module(ability)
    if train_size < 0 or test_size < 0:
        raise BenchprofError(f"{ability}: split sizes must be >= 0, got train {train_size}, test {test_size}")
    if difficulty not in LEVELS:
        raise BenchprofError(f"unknown difficulty {difficulty!r}; known: {', '.join(LEVELS)}")
    easy = difficulty == "easy" and has_easy_level(ability)
    wanted = train_size + test_size
    if not easy and hasattr(module, "capacity") and wanted > module.capacity():
        raise BenchprofError(
            f"{ability}: its tables yield at most {module.capacity()} unique questions, "
            f"asked for {train_size} train + {test_size} test"
        )
    # str seeds go through sha512 in random.seed: stable across runs, unlike hash().
    # the paper level's seeds are those of every earlier version: its splits stay byte-identical
    base = f"benchprof/{ability}/{seed}" + ("/easy" if easy else "")
    items = _unique_draws(ability, module.draw_easy if easy else module.draw, random.Random(base), wanted)
    test, train = items[:test_size], items[test_size:]
    return (
        _layout(ability, "train", train, random.Random(f"{base}/train")),
        _layout(ability, "test", test, random.Random(f"{base}/test")),
    )


def _unique_draws(ability: str, draw: Callable[[random.Random], Item], rng: random.Random, wanted: int) -> list[Item]:
    items: list[Item] = []
    seen: set[tuple[str, str]] = set()
    misses, max_misses = 0, 20 * wanted + 20_000
    while len(items) < wanted:
        item = draw(rng)
        key = (item.context, item.question)
        if key in seen:
            misses += 1
            if misses > max_misses:
                raise BenchprofError(
                    f"{ability}: found only {len(items)} unique questions "
                    f"(the maximum for this generator), asked for {wanted}"
                )
            continue
        seen.add(key)
        items.append(item)
    return items


def _layout(ability: str, split: str, items: list[Item], rng: random.Random) -> list[dict[str, Any]]:
    """Records with the answer at a balanced position: label i % 4, shuffled over the items."""
    labels = [i % N_OPTIONS for i in range(len(items))]
    rng.shuffle(labels)
    records = []
    for n, (item, label) in enumerate(zip(items, labels)):
        options = list(item.distractors)
        rng.shuffle(options)
        options.insert(label, item.answer)
        if len(options) != N_OPTIONS or len(set(options)) != N_OPTIONS:
            raise RuntimeError(f"{ability} generator bug: bad options {options} for {item.question!r}")
        if not item.cluster:
            raise RuntimeError(f"{ability} generator bug: no cluster for {item.question!r}")
        records.append(
            {
                "id": f"{ability}-{split}-{n}",
                "ability": ability,
                "question_type": item.question_type,
                "context": item.context,
                "question": item.question,
                "options": options,
                "answer": item.answer,
                "label": label,
                # template and fact: items sharing them are resampled together (aggregate's bootstrap)
                "cluster": f"{item.question_type}:{item.cluster}",
            }
        )
    return records
