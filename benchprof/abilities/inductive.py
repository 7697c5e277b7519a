"""Inductive_Reasoning: find the rule behind examples and apply it. Number sequences (constant
step, doubling / tripling, alternating steps, growing steps), a missing middle term, letter
sequences, repeating word patterns, and input -> output examples of a hidden rule. The answer is
computed from the rule; wrong options are what a nearby or half-learned rule would give."""

from __future__ import annotations

import random
import string

from benchprof.abilities.common import Item, made_up, near_numbers, pick

QUESTION_TYPES = ("pattern_completion",)
QT = QUESTION_TYPES[0]
NEXT = ("What comes next?", "What number comes next?", "Which number continues the pattern?")
WORDS = (
    ("red", "blue", "green", "yellow", "pink"),
    ("cat", "dog", "bird", "fish", "cow"),
    ("circle", "square", "star", "triangle", "heart"),
    ("sun", "moon", "cloud", "rain", "snow"),
    ("up", "down", "left", "right", "stop"),
)
LETTERS = string.ascii_uppercase


def _seq(terms: list[int]) -> str:
    return ", ".join(str(t) for t in terms)


def _numbers(rng: random.Random) -> Item:
    kind = rng.randrange(4)
    if kind == 0:  # constant step, up or down
        step = rng.randint(2, 9) * rng.choice((1, -1))
        start = rng.randint(1, 20) + (0 if step > 0 else 6 * -step)
        terms = [start + step * i for i in range(6)]
        mistakes = [terms[4] + step, terms[5] + step + 1, terms[5] - step, terms[5] + 2 * step]
    elif kind == 1:  # multiply
        ratio = rng.choice((2, 2, 3))
        start = rng.randint(1, 5)
        terms = [start * ratio**i for i in range(5)]
        mistakes = [terms[3] * 2 + terms[3], terms[4] + (terms[4] - terms[3]), terms[4] * (ratio + 1)]
    elif kind == 2:  # alternating steps +a, -b
        a, b = rng.sample(range(1, 8), 2)
        start = rng.randint(2 * b, 2 * b + 12)
        terms = [start]
        for i in range(5):
            terms.append(terms[-1] + (a if i % 2 == 0 else -b))
        mistakes = [terms[4] + a, terms[4] - b, terms[4] + (a if len(terms) % 2 else -b) + 1]
    else:  # steps growing by one: +d, +d+1, +d+2 ...
        d = rng.randint(1, 4)
        start = rng.randint(1, 10)
        terms = [start]
        for i in range(5):
            terms.append(terms[-1] + d + i)
        mistakes = [terms[4] + d + 3, terms[4] + d + 5, terms[4] + d + 4 + 1]
    shown, answer = terms[:-1], terms[-1]
    question = rng.choice(NEXT)
    return Item(QT, _seq(shown), question, str(answer), near_numbers(rng, answer, mistakes))


def _missing(rng: random.Random) -> Item:
    step = rng.randint(2, 12)
    start = rng.randint(0, 30)
    terms = [start + step * i for i in range(5)]
    gap = rng.randrange(1, 4)
    answer = terms[gap]
    shown = ", ".join("?" if i == gap else str(t) for i, t in enumerate(terms))
    question = rng.choice(
        ("What number is missing?", "Which number goes in place of the ?", "What is the missing number?")
    )
    return Item(QT, shown, question, str(answer), near_numbers(rng, answer, [answer + 1, answer - 1, answer + step]))


def _letters(rng: random.Random) -> Item:
    step = rng.choice((1, 2, 3)) * rng.choice((1, -1))
    count = 5
    lo, hi = (0, 25 - step * count) if step > 0 else (-step * count, 25)
    start = rng.randint(lo, hi)
    terms = [LETTERS[start + step * i] for i in range(count + 1)]
    answer = terms[-1]
    index = LETTERS.index(answer)
    near = [LETTERS[index + d] for d in (-2, -1, 1, 2, step) if 0 <= index + d < 26]
    question = rng.choice(("Which letter comes next?", "What letter continues the pattern?", "What comes next?"))
    return Item(QT, ", ".join(terms[:-1]), question, answer, pick(rng, answer, near + list(LETTERS), hard=near))


def _repeat(rng: random.Random) -> Item:
    words = rng.choice(WORDS)
    period = rng.randrange(2, 4)
    unit = rng.sample(words, period)
    if rng.random() < 0.5 and period == 2:  # a a b  style units
        unit = [unit[0], unit[0], unit[1]]
    length = rng.randint(len(unit) + 2, 2 * len(unit) + 2)
    terms = [unit[i % len(unit)] for i in range(length + 1)]
    answer = terms[-1]
    question = rng.choice(("What comes next?", "Which word continues the pattern?", "What is the next word?"))
    return Item(QT, ", ".join(terms[:-1]), question, answer, pick(rng, answer, words, hard=unit))


RULES = (
    ("doubles", lambda x: 2 * x),
    ("triples", lambda x: 3 * x),
    ("adds", None),
    ("subtracts", None),
    ("double plus one", lambda x: 2 * x + 1),
    ("double minus one", lambda x: 2 * x - 1),
    ("times ten", lambda x: 10 * x),
    ("square", lambda x: x * x),
)


def _function(rng: random.Random) -> Item:
    name, rule = rng.choice(RULES)
    if rule is None:
        k = rng.randint(2, 9) * (1 if name == "adds" else -1)
        rule = lambda x: x + k  # noqa: E731
    xs = rng.sample(range(10, 22) if name == "subtracts" else range(2, 13), 4)
    shown, x = xs[:3], xs[3]
    arrow = rng.choice(("{a} becomes {b}.", "{a} gives {b}.", "{a} -> {b}."))
    context = " ".join(arrow.format(a=a, b=rule(a)) for a in shown)
    question = rng.choice(
        (
            "What does {x} become?",
            "By the same rule, what does {x} give?",
            "Following the rule, what is {x} turned into?",
        )
    ).format(x=x)
    answer = rule(x)
    mistakes = [2 * x, 3 * x, x + (rule(shown[0]) - shown[0]), answer + 1, answer - 1, rule(x - 1)]
    return Item(QT, context, question, str(answer), near_numbers(rng, answer, mistakes, low=-100))


def draw(rng: random.Random) -> Item:
    make = rng.choice((_numbers, _numbers, _missing, _letters, _repeat, _function))
    return made_up(make(rng), make.__name__)


def facts() -> list[str]:
    return []


def draw_easy(rng: random.Random) -> Item:
    """The easy level: a run counting up by 1 (or by 10) or the alphabet in order, or a word pattern of period 2;
    the wrong options are far from the answer and never in the context."""
    kind = rng.randrange(3)
    if kind == 0:
        step = rng.choice((1, 1, 10))
        start = rng.randint(1, 30) * step
        numbers = [start + step * i for i in range(5)]
        last = numbers[-1]
        far = [n for n in range(last - 40 * step, last + 40 * step, step) if n > 0 and abs(n - last) > 4 * step]
        wrong = tuple(str(n) for n in rng.sample(far, 3))
        return made_up(Item(QT, _seq(numbers[:-1]), rng.choice(NEXT), str(last), wrong), "easy_count")
    if kind == 1:
        start = rng.randint(0, 20)
        letters = [LETTERS[start + i] for i in range(5)]
        unlike = [c for i, c in enumerate(LETTERS) if abs(i - start - 4) > 4]
        question = rng.choice(("Which letter comes next?", "What comes next?"))
        item = Item(QT, ", ".join(letters[:-1]), question, letters[-1], tuple(rng.sample(unlike, 3)))
        return made_up(item, "easy_letters")
    words = rng.choice(WORDS)
    a, b = rng.sample(words, 2)
    length = rng.randint(3, 7)
    terms = [(a, b)[i % 2] for i in range(length + 1)]
    others = [w for group in WORDS if group is not words for w in group]
    question = rng.choice(("What comes next?", "What is the next word?"))
    return made_up(Item(QT, ", ".join(terms[:-1]), question, terms[-1], tuple(rng.sample(others, 3))), "easy_repeat")


def draw_transfer(rng: random.Random) -> Item:
    """Problem kinds the train split never uses: counting by 2, 3 or 5, or down by 1; wrong options far from the
    answer and never in the context."""
    step = rng.choice((2, 3, 5, -1))
    start = rng.randint(1, 20) * abs(step) + (30 if step < 0 else 0)
    numbers = [start + step * i for i in range(5)]
    last = numbers[-1]
    far = [n for n in range(max(1, last - 40), last + 40) if abs(n - last) > 4 and n not in numbers]
    item = Item(QT, _seq(numbers[:-1]), rng.choice(NEXT), str(last), tuple(str(n) for n in rng.sample(far, 3)))
    return made_up(item, f"steps_{step}")
