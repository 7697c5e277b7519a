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

import hashlib
import random
from collections.abc import Callable, Sequence
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
# what the generators draw: part of every generated folder's inputs, so a changed generator writes new data
# (2: problem keys, transfer splits, the easy Temporal_Reasoning with years)
GENERATORS_VERSION = 2
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


# how a generated ability's test items are kept apart from its train items: "question", no (context, question) pair
# in both (every earlier version's splits, byte for byte); "problem", no problem in both (Item.problem: the item
# with names and wording masked), so a test item never repeats a train problem with a name or a phrase changed
SPLIT_BY = ("question", "problem")


def splits(
    ability: str, train_size: int, test_size: int, seed: int, difficulty: str = "paper", split_by: str = "question"
) -> tuple[list[dict], list[dict]]:
    """(train, test) records of any known ability. A generated ability draws them at `difficulty` (`generate`;
    LEVELS). An invented
    ability (planted into a real model, never generated at will) has fixed splits: its train split is the first
    `train_size` items of its `probe` split and its test split the first `test_size` of its `test` split, both
    disjoint from the `plant` split the model was trained on when `seed` is the planting's data seed."""
    if ability in INVENTED:
        fixed = invented_splits(ability, seed)
        return fixed["probe"][:train_size], fixed["test"][:test_size]
    return generate(ability, train_size, test_size, seed, difficulty, split_by)


def _module(ability: str) -> ModuleType:
    if ability not in MODULES:
        raise BenchprofError(f"unknown ability {ability!r}; known: {', '.join(MODULES)}")
    return MODULES[ability]


def fact_texts(ability: str) -> list[str]:
    """Plain-English statements of the table facts `ability` draws on ([] if it uses no table)."""
    return list(_module(ability).facts())


def generate(
    ability: str, train_size: int, test_size: int, seed: int, difficulty: str = "paper", split_by: str = "question"
) -> tuple[list[dict], list[dict]]:
    """Generate (train, test) records of `ability` at `difficulty` (LEVELS), deterministically from `seed`.

    No (context, question) repeats within or across the splits; with split_by "problem" no problem either
    (SPLIT_BY; a record then carries its `problem`). Each split has its answers spread evenly over the four option
    positions. The test split depends only on (seed, test_size) under "question", so changing train_size keeps the
    evaluation items; under "problem" on (seed, the share of problems the test split gets)."""
    train, test, base = draw_splits(ability, train_size, test_size, seed, difficulty, split_by)
    problem = split_by == "problem"
    return (
        _layout(ability, "train", train, random.Random(f"{base}/train"), problem),
        _layout(ability, "test", test, random.Random(f"{base}/test"), problem),
    )


def draw_splits(
    ability: str, train_size: int, test_size: int, seed: int, difficulty: str = "paper", split_by: str = "question"
) -> tuple[list[Item], list[Item], str]:
    """(train items, test items, the seed base of their layout) as `generate` draws them."""
    module = _module(ability)
    if train_size < 0 or test_size < 0:
        raise BenchprofError(f"{ability}: split sizes must be >= 0, got train {train_size}, test {test_size}")
    if difficulty not in LEVELS:
        raise BenchprofError(f"unknown difficulty {difficulty!r}; known: {', '.join(LEVELS)}")
    if split_by not in SPLIT_BY:
        raise BenchprofError(f"unknown split_by {split_by!r}; known: {', '.join(SPLIT_BY)}")
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
    draw = module.draw_easy if easy else module.draw
    if split_by == "question":
        items = _unique_draws(ability, draw, random.Random(base), wanted)
        return items[test_size:], items[:test_size], base
    base += "/problems"
    in_test = _test_side(base, test_size / wanted if wanted else 0.0)
    test = _unique_draws(ability, draw, random.Random(f"{base}/test"), test_size, in_test, "test")
    train = _unique_draws(ability, draw, random.Random(f"{base}/train"), train_size, lambda i: not in_test(i), "train")
    return train, test, base


def _test_side(base: str, share: float) -> Callable[[Item], bool]:
    """Whether an item's problem falls on the test side: each problem on one side, by a hash of it and `base`,
    `share` of them on the test side."""

    def in_test(item: Item) -> bool:
        digest = hashlib.sha256(f"{base}/{problem_of(item)}".encode()).digest()
        return int.from_bytes(digest[:8], "big") < share * 2**64

    return in_test


def has_transfer(ability: str) -> bool:
    """Whether `ability` has a transfer split (its module has `draw_transfer`)."""
    return hasattr(MODULES.get(ability), "draw_transfer")


TRANSFER = "transfer"  # the split of formats its train split never uses; as a benchmark: "<Ability>_transfer"


def transfer_benchmark(ability: str) -> str:
    """The benchmark name of an ability's transfer split."""
    return f"{ability}_{TRANSFER}"


def split_of(benchmark: str, own: Sequence[str] = ()) -> tuple[str, str] | None:
    """(ability, split) of a benchmark that is an ability's split: an ability's name (its test split; a built-in
    ability, or one of `own`, the config's own abilities with their data in a folder) or "<Ability>_transfer" (its
    transfer split); None for any other benchmark."""
    if benchmark in KNOWN_ABILITIES or benchmark in own:
        return benchmark, "test"
    ability = benchmark.removesuffix(f"_{TRANSFER}")
    return (ability, TRANSFER) if ability != benchmark and has_transfer(ability) else None


def transfer_split(
    ability: str,
    size: int,
    train_size: int,
    test_size: int,
    seed: int,
    difficulty: str = "paper",
    split_by: str = "question",
) -> list[dict]:
    """`size` records of `ability`'s transfer split (draw_transfer: formats, templates or problem kinds its train
    split never uses) for the splits `generate` draws with the same values: no item asks a problem of the train
    split (Item.problem: a transfer item that asks a train problem in another format names it the same way)."""
    if not has_transfer(ability):
        raise BenchprofError(f"{ability}: no transfer split (its generator has no draw_transfer)")
    train, _, base = draw_splits(ability, train_size, test_size, seed, difficulty, split_by)
    seen = {problem_of(i) for i in train}
    draw = MODULES[ability].draw_transfer

    def keep(item: Item) -> bool:
        return problem_of(item) not in seen

    items = _unique_draws(ability, draw, random.Random(f"{base}/{TRANSFER}"), size, keep, TRANSFER)
    return _layout(ability, TRANSFER, items, random.Random(f"{base}/{TRANSFER}/layout"), split_by == "problem")


def problem_of(item: Item) -> str:
    """What an item asks with names and wording masked: its `problem`, else its cluster (a table fact)."""
    return item.problem or item.cluster


def _unique_draws(
    ability: str,
    draw: Callable[[random.Random], Item],
    rng: random.Random,
    wanted: int,
    keep: Callable[[Item], bool] | None = None,
    split: str = "",
) -> list[Item]:
    """`wanted` items of distinct (context, question), each one `keep` accepts (all by default)."""
    items: list[Item] = []
    seen: set[tuple[str, str]] = set()
    misses, max_misses = 0, 20 * wanted + 20_000
    while len(items) < wanted:
        item = draw(rng)
        key = (item.context, item.question)
        if key in seen or (keep is not None and not keep(item)):
            misses += 1
            if misses > max_misses:
                where = f" among the problems of its {split} split" if split else ""
                raise BenchprofError(
                    f"{ability}: found only {len(items)} unique questions{where} "
                    f"(the maximum for this generator), asked for {wanted}"
                )
            continue
        seen.add(key)
        items.append(item)
    return items


def _layout(
    ability: str, split: str, items: list[Item], rng: random.Random, problem: bool = False
) -> list[dict[str, Any]]:
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
        if problem:  # what the split keeps apart from the other split's
            records[-1]["problem"] = f"{item.question_type}:{problem_of(item)}"
    return records
