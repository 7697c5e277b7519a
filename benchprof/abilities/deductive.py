"""Deductive_Reasoning: what follows from stated premises. Four puzzle kinds: category syllogisms
over made-up words (one or two steps), if-then rules with a stated fact, elimination puzzles
(four people, four things, clues until one assignment is left, found by brute force) and
comparison chains (tallest / shortest from pairwise facts)."""

from __future__ import annotations

import itertools
import random

from benchprof.abilities.common import NAMES, Item, article, made_up, pick, problem_key

QUESTION_TYPES = ("logic_puzzle",)
QT = QUESTION_TYPES[0]
NONSENSE = ("wug", "dap", "fep", "blick", "zorp", "tove", "glim", "snib", "mib", "kiv", "plon", "vask")
COLORS = ("red", "blue", "green", "yellow", "black", "white", "pink", "brown")
ABILITIES = ("swim", "fly", "sing", "jump", "dig", "climb", "glow", "whistle")
WEATHER = ("rainy", "sunny", "snowy", "windy", "foggy", "cloudy")
ACTIVITIES = (
    "reads a book",
    "goes swimming",
    "plays chess",
    "flies a kite",
    "bakes bread",
    "rides a bike",
    "paints a picture",
    "visits a friend",
    "stays in bed",
    "plays the drum",
)
SETS = (
    ("pet", ("cat", "dog", "fish", "bird", "rabbit", "goat")),
    ("fruit", ("apple", "pear", "plum", "lemon", "mango", "grape")),
    ("hat", ("red hat", "blue hat", "green hat", "black hat", "white hat", "pink hat")),
    ("toy", ("ball", "kite", "doll", "drum", "yo-yo", "robot")),
)
# comparative, opposite comparative, superlative, opposite superlative
SCALES = (
    ("taller", "shorter", "tallest", "shortest"),
    ("older", "younger", "oldest", "youngest"),
    ("faster", "slower", "fastest", "slowest"),
    ("heavier", "lighter", "heaviest", "lightest"),
    ("richer", "poorer", "richest", "poorest"),
)


def _properties(rng: random.Random) -> tuple[list[str], str, str]:
    """Four properties a syllogism's kinds have (colors or abilities), the verb that states them and the question."""
    if rng.random() < 0.5:
        return rng.sample(COLORS, 4), "are", rng.choice(("What color is {n}?", "So {n} must be what color?"))
    return rng.sample(ABILITIES, 4), "can", rng.choice(("What can {n} do?", "So what must {n} be able to do?"))


def _syllogism(rng: random.Random) -> Item:
    name = rng.choice(NAMES)
    kinds = rng.sample(NONSENSE, 4)
    props, verb, ask = _properties(rng)
    rules = [f"All {k}s {verb} {p}." for k, p in zip(kinds[:3], props[:3])]
    target = rng.randrange(3)
    if rng.random() < 0.5:  # one step: n is a K, all Ks are P
        facts = [f"{name} is {article(kinds[target])}."]
    else:  # two steps: n is an X, every X is a K, all Ks are P
        facts = [f"Every {kinds[3]} is {article(kinds[target])}.", f"{name} is {article(kinds[3])}."]
    premises = rules + facts[:-1]
    rng.shuffle(premises)
    context = " ".join(premises + facts[-1:])
    answer = props[target]
    return Item(QT, context, ask.format(n=name), answer, pick(rng, answer, props))


def _if_then(rng: random.Random) -> Item:
    name = rng.choice(NAMES)
    states = rng.sample(WEATHER, 3)
    acts = rng.sample(ACTIVITIES, 4)
    rules = [f"If it is {s}, {name} {a}." for s, a in zip(states, acts)]
    rng.shuffle(rules)
    target = rng.randrange(3)
    today = rng.choice(("Today it is {s}.", "It is {s} today.", "The day is {s}.")).format(s=states[target])
    question = rng.choice(("What does {n} do today?", "So what will {n} do?", "What does {n} do?")).format(n=name)
    return Item(QT, " ".join(rules + [today]), question, acts[target], pick(rng, acts[target], acts))


def _elimination(rng: random.Random) -> Item:
    people = rng.sample(NAMES, 4)
    noun, pool = rng.choice(SETS)
    things = rng.sample(pool, 4)
    while True:
        solution = rng.sample(range(4), 4)  # person i has things[solution[i]]
        candidates = list(itertools.permutations(range(4)))
        clues, given = [], set()
        while len(candidates) > 1:
            i, j = rng.randrange(4), rng.randrange(4)
            positive = solution[i] == j
            if not positive and rng.random() < 0.25:
                continue  # keep the puzzle from being mostly "does not" clues
            remaining = [c for c in candidates if (c[i] == j) == positive]
            if len(remaining) == len(candidates):
                continue
            candidates = remaining
            clues.append(f"{people[i]} {'has' if positive else 'does not have'} the {things[j]}.")
            if positive:
                given.add(i)
        open_people = [i for i in range(4) if i not in given]
        if open_people and len(clues) <= 4:
            break
    intro = f"{', '.join(people[:3])} and {people[3]} each have one {noun}: {', '.join(things[:3])} or {things[3]}."
    i = rng.choice(open_people)
    if rng.random() < 0.5:
        question = f"Which {noun} does {people[i]} have?"
        answer, others = things[solution[i]], things
    else:
        question = f"Who has the {things[solution[i]]}?"
        answer, others = people[i], people
    return Item(QT, " ".join([intro] + clues), question, answer, pick(rng, answer, others))


def _comparison(rng: random.Random) -> Item:
    order = rng.sample(NAMES, 4)  # from most to least
    more, less, most, least = rng.choice(SCALES)
    clues = []
    for a, b in zip(order, order[1:]):
        clues.append(f"{a} is {more} than {b}." if rng.random() < 0.5 else f"{b} is {less} than {a}.")
    rng.shuffle(clues)
    asks = [
        (f"Who is the {most}?", order[0]),
        (f"Who is the {least}?", order[3]),
        (f"Who is {more} than {order[2]} but {less} than {order[0]}?", order[1]),
    ]
    question, answer = rng.choice(asks)
    return Item(QT, " ".join(clues), question, answer, pick(rng, answer, order))


def draw(rng: random.Random) -> Item:
    make = rng.choice((_syllogism, _if_then, _elimination, _comparison))
    return made_up(make(rng), make.__name__)


def facts() -> list[str]:
    return []


def draw_easy(rng: random.Random) -> Item:
    """The easy level: a one-step syllogism over a made-up word with one rule and one other rule beside it
    ("All wugs are red. All daps are blue. Ann is a wug."); the wrong options are the other rule's property and
    two not in the context."""
    name = rng.choice(NAMES)
    kinds = rng.sample(NONSENSE, 2)
    props, verb, ask = _properties(rng)
    rules = [f"All {k}s {verb} {p}." for k, p in zip(kinds, props[:2])]
    rng.shuffle(rules)
    context = " ".join(rules + [f"{name} is {article(kinds[0])}."])
    item = Item(QT, context, ask.format(n=name), props[0], tuple(props[1:]))
    # the made-up kinds are names too: the problem is which property follows, beside which other rule
    return made_up(item, "easy_syllogism", problem=f"{props[0]}:{props[1]}")


def draw_transfer(rng: random.Random) -> Item:
    """A format the train split never uses: the easy syllogism's rules as a list of labels ("Rules: wug: red; dap:
    blue. Ann is a wug."), no sentence saying what all of a kind are; the problem (which property follows, beside
    which other rule) named as the easy level's."""
    name = rng.choice(NAMES)
    kinds = rng.sample(NONSENSE, 2)
    props, _, ask = _properties(rng)
    rules = [f"{k}: {p}" for k, p in zip(kinds, props[:2])]
    rng.shuffle(rules)
    context = "Rules: " + "; ".join(rules) + f". {name} is {article(kinds[0])}."
    problem = problem_key("easy_syllogism", f"{props[0]}:{props[1]}")
    return Item(QT, context, ask.format(n=name), props[0], tuple(props[1:]), f"list:{problem}", problem)
