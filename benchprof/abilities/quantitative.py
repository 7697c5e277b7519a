"""Quantitative_Reasoning: one- and two-step word problems with small whole numbers (add, take
away, compare, multiply, share, pay). The answer is computed from the drawn numbers; wrong
options are the results of the wrong operation and near misses."""

from __future__ import annotations

import random

from benchprof.abilities.common import NAMES, Item, made_up, near_numbers, problem_key

QUESTION_TYPES = ("arithmetic_word_problem",)
QT = QUESTION_TYPES[0]
# singular, plural
THINGS = (
    ("apple", "apples"),
    ("pen", "pens"),
    ("marble", "marbles"),
    ("stamp", "stamps"),
    ("cookie", "cookies"),
    ("book", "books"),
    ("shell", "shells"),
    ("card", "cards"),
    ("egg", "eggs"),
    ("sticker", "stickers"),
    ("coin", "coins"),
    ("toy car", "toy cars"),
)
CONTAINERS = ("bags", "boxes", "jars", "baskets", "rows", "plates")


def draw(rng: random.Random) -> Item:
    n, m = rng.sample(NAMES, 2)
    one, many = rng.choice(THINGS)
    form = rng.randrange(9)
    if form == 0:
        a, b = rng.randint(2, 20), rng.randint(2, 20)
        context = f"{n} has {a} {many}. {n} finds {b} more."
        question, answer = f"How many {many} does {n} have now?", a + b
        mistakes = [a - b, abs(a - b), a * b]
    elif form == 1:
        a = rng.randint(5, 25)
        b = rng.randint(1, a - 1)
        context = f"{n} has {a} {many}. {n} gives {b} to {m}."
        question, answer = f"How many {many} does {n} have left?", a - b
        mistakes = [a + b, b]
    elif form == 2:
        a, b = rng.randint(2, 9), rng.randint(2, 9)
        box = rng.choice(CONTAINERS)
        context = f"There are {a} {box}. Each one holds {b} {many}."
        question, answer = f"How many {many} are there in all?", a * b
        mistakes = [a + b, a * b + a, a * (b - 1)]
    elif form == 3:
        a, b = rng.randint(1, 9), rng.randint(2, 9)
        context = f"One {one} costs {a} dollars. {n} buys {b} of them."
        question, answer = f"How many dollars does {n} pay?", a * b
        mistakes = [a + b, a * b - a, a * (b + 1)]
    elif form == 4:
        a, b = rng.randint(2, 20), rng.randint(1, 10)
        context = f"{n} has {a} {many}. {m} has {b} more {many} than {n}."
        question, answer = f"How many {many} does {m} have?", a + b
        mistakes = [a - b, b, a + b + 1]
    elif form == 5:
        b = rng.randint(1, 15)
        a = b + rng.randint(1, 15)
        context = f"{n} has {a} {many}. {m} has {b} {many}."
        question, answer = f"How many more {many} does {n} have than {m}?", a - b
        mistakes = [a + b, a, b]
    elif form == 6:
        a, b = rng.randint(2, 15), rng.randint(2, 10)
        c = rng.randint(1, a + b - 1)
        context = f"{n} has {a} {many}. {n} buys {b} more, then loses {c}."
        question, answer = f"How many {many} does {n} have now?", a + b - c
        mistakes = [a + b + c, a - b + c, a + b]
    elif form == 7:
        each, b = rng.randint(2, 9), rng.randint(2, 6)
        total = each * b
        context = f"{n} shares {total} {many} equally among {b} friends."
        question, answer = f"How many {many} does each friend get?", each
        mistakes = [total - b, b, each + 1]
    else:
        a, b = rng.randint(2, 20), rng.randint(2, 20)
        context = f"{n} has {a} {many} and {m} has {b}."
        question, answer = (
            rng.choice((f"How many {many} do they have together?", f"How many {many} do {n} and {m} have in all?")),
            a + b,
        )
        mistakes = [abs(a - b), a * b, a + b + 10]
    return made_up(Item(QT, context, question, str(answer), near_numbers(rng, answer, mistakes)), f"form{form}")


def facts() -> list[str]:
    return []


def draw_easy(rng: random.Random) -> Item:
    """The easy level: one addition or take-away with numbers up to 9; the wrong options are at least 4 away from
    the answer and never a number of the problem."""
    n = rng.choice(NAMES)
    one, many = rng.choice(THINGS)
    a, b = rng.randint(2, 9), rng.randint(1, 9)
    if rng.random() < 0.5:
        context = f"{n} has {a} {many}. {n} gets {b} more."
        question, answer, operation = f"How many {many} does {n} have now?", a + b, "add"
    else:
        a = a + b
        context = f"{n} has {a} {many}. {n} gives away {b}."
        question, answer, operation = f"How many {many} does {n} have left?", a - b, "take"
    far = [x for x in range(0, 30) if abs(x - answer) >= 4 and x not in (a, b)]
    item = Item(QT, context, question, str(answer), tuple(str(x) for x in rng.sample(far, 3)))
    return made_up(item, "easy_sum", problem=f"{operation}:{a}:{b}")  # the things counted are wording


def draw_transfer(rng: random.Random) -> Item:
    """A format the train split never uses: sums written bare ("What is 7 + 5?"), no story, with the first number up
    to 20 (the easy level's reaches 9); a problem the easy level also asks is named as it names it."""
    a, b = rng.randint(2, 20), rng.randint(1, 9)
    if rng.random() < 0.5:
        question, answer, operation = f"What is {a} + {b}?", a + b, "add"
    else:
        a = a + b
        question, answer, operation = f"What is {a} - {b}?", a - b, "take"
    far = [x for x in range(0, 30) if abs(x - answer) >= 4 and x not in (a, b)]
    problem = problem_key("easy_sum", f"{operation}:{a}:{b}")
    return Item(QT, "", question, str(answer), tuple(str(x) for x in rng.sample(far, 3)), f"bare:{problem}", problem)
