"""Spatial_Reasoning: relative positions and directions. Objects in a row (left / right), a stack
of boxes (above / below), turning on the spot (compass facing after left / right / around turns)
and map directions composed from two stated relations (north of X, east of Y -> northeast). Each
answer comes from placing the objects on a line or grid and reading the result off."""

from __future__ import annotations

import random

from benchprof.abilities.common import NAMES, Item, made_up, pick

QUESTION_TYPES = ("spatial_relation",)
QT = QUESTION_TYPES[0]
OBJECTS = ("cup", "book", "lamp", "vase", "clock", "plant", "bowl", "phone", "candle", "shoe", "ball", "box")
BOX_COLORS = ("red", "blue", "green", "yellow", "black", "white", "pink", "brown")
PLACES = ("bank", "park", "school", "lake", "mill", "farm", "shop", "church", "well", "barn", "tower", "bridge")
COMPASS = ("north", "east", "south", "west")  # clockwise
STEP = {"north": (0, 1), "south": (0, -1), "east": (1, 0), "west": (-1, 0)}
DIRECTIONS = ("north", "northeast", "east", "southeast", "south", "southwest", "west", "northwest")


def _line(rng: random.Random, names: list[str], before: str, after: str) -> list[str]:
    """Clues for names[0] .. names[-1] in that order: one clue per neighbouring pair, either way round."""
    clues = []
    for a, b in zip(names, names[1:]):
        clues.append(f"The {a} is {before} the {b}." if rng.random() < 0.5 else f"The {b} is {after} the {a}.")
    rng.shuffle(clues)
    return clues


def _row(rng: random.Random) -> Item:
    row = rng.sample(OBJECTS, 4)  # left to right
    clues = _line(rng, row, "left of", "right of")
    i = rng.randrange(3)
    asks = [
        ("Which thing is furthest left?", row[0]),
        ("Which thing is furthest right?", row[3]),
        (f"What is just right of the {row[i]}?", row[i + 1]),
        (f"What is just left of the {row[i + 1]}?", row[i]),
    ]
    question, answer = rng.choice(asks)
    return Item(QT, "Four things stand in a row. " + " ".join(clues), question, answer, pick(rng, answer, row))


def _stack(rng: random.Random) -> Item:
    colors = rng.sample(BOX_COLORS, 4)  # top to bottom
    stack = [f"{c} box" for c in colors]
    clues = _line(rng, stack, "on top of", "under")
    i = rng.randrange(3)
    asks = [
        ("Which box is at the top?", stack[0]),
        ("Which box is at the bottom?", stack[3]),
        (f"Which box is right under the {stack[i]}?", stack[i + 1]),
        (f"Which box is right on top of the {stack[i + 1]}?", stack[i]),
    ]
    question, answer = rng.choice(asks)
    return Item(QT, "Four boxes are stacked. " + " ".join(clues), question, answer, pick(rng, answer, stack))


def _turns(rng: random.Random) -> Item:
    name = rng.choice(NAMES)
    facing = rng.randrange(4)
    start = COMPASS[facing]
    moves = []
    for _ in range(rng.randint(1, 3)):
        move = rng.choice(("left", "right", "around"))
        facing = (facing + {"left": -1, "right": 1, "around": 2}[move]) % 4
        moves.append("turns around" if move == "around" else f"turns {move}")
    context = f"{name} faces {start}. {name} {', then '.join(moves)}."
    question = rng.choice(
        ("Which way does {n} face now?", "In which direction is {n} facing now?", "Where does {n} face at the end?")
    ).format(n=name)
    answer = COMPASS[facing]
    return Item(QT, context, question, answer, pick(rng, answer, COMPASS))


def _direction(dx: int, dy: int) -> str:
    ns = "north" if dy > 0 else "south" if dy < 0 else ""
    ew = "east" if dx > 0 else "west" if dx < 0 else ""
    return ns + ew


def _map(rng: random.Random) -> Item:
    """x is <d1> of y, y is <d2> of z: where is x from z (or z from x)? Computed on a grid."""
    x, y, z = rng.sample(PLACES, 3)
    while True:
        d1, d2 = rng.choice(COMPASS), rng.choice(COMPASS)
        dx, dy = STEP[d1][0] + STEP[d2][0], STEP[d1][1] + STEP[d2][1]
        if (dx, dy) != (0, 0):
            break
    clues = [f"The {x} is {d1} of the {y}.", f"The {y} is {d2} of the {z}."]
    rng.shuffle(clues)
    if rng.random() < 0.5:
        question, answer = f"In which direction is the {x} from the {z}?", _direction(dx, dy)
    else:
        question, answer = f"In which direction is the {z} from the {x}?", _direction(-dx, -dy)
    index = DIRECTIONS.index(answer)
    near = [DIRECTIONS[(index + d) % 8] for d in (4, 1, -1)]  # the opposite and the two neighbours
    return Item(QT, " ".join(clues), question, answer, pick(rng, answer, DIRECTIONS, hard=near))


def _inverse(rng: random.Random) -> Item:
    """A single stated relation, asked the other way round."""
    x, y = rng.sample(PLACES, 2)
    d = rng.choice(DIRECTIONS)
    context = rng.choice(("The {x} is {d} of the {y}.", "Seen from the {y}, the {x} lies to the {d}."))
    context = context.format(x=x, y=y, d=d)
    question = rng.choice(
        ("In which direction is the {y} from the {x}?", "Standing at the {x}, which way is the {y}?")
    ).format(x=x, y=y)
    answer = DIRECTIONS[(DIRECTIONS.index(d) + 4) % 8]
    near = [d, DIRECTIONS[(DIRECTIONS.index(answer) + 2) % 8], DIRECTIONS[(DIRECTIONS.index(answer) - 2) % 8]]
    return Item(QT, context, question, answer, pick(rng, answer, DIRECTIONS, hard=near))


def draw(rng: random.Random) -> Item:
    make = rng.choice((_row, _stack, _turns, _map, _inverse))
    return made_up(make(rng), make.__name__)


def facts() -> list[str]:
    return []


def draw_easy(rng: random.Random) -> Item:
    """The easy level: one stated relation between two things (left / right of, on top of / under), asked the
    same way or the other way round; the wrong options are the other thing and two things not in the context."""
    a, b, *others = rng.sample(OBJECTS, 4)
    relation, inverse = rng.choice((("left of", "right of"), ("right of", "left of"), ("on top of", "under")))
    context = f"The {a} is {relation} the {b}."
    if rng.random() < 0.5:
        question, answer, other = f"What is {relation} the {b}?", a, b
    else:
        question, answer, other = f"What is {inverse} the {a}?", b, a
    return made_up(Item(QT, context, question, answer, (other, *others)), "easy_pair")
