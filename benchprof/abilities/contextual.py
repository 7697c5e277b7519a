"""Contextual_Recall: read facts off the context. single_fact_recall binds four people (or things)
to four values and asks one binding either way; multi_hop_recall states links X -> Y and Y -> Z
for several chains, shuffled, and asks X -> Z (or Z -> X). Every option appears in the context,
so only recall of the right binding separates them."""

from __future__ import annotations

import random

from benchprof.abilities.common import NAMES, Item, article, made_up, pick

QUESTION_TYPES = ("single_fact_recall", "multi_hop_recall")
CITIES = (
    "Rome",
    "Oslo",
    "Paris",
    "Lima",
    "Cairo",
    "Tokyo",
    "Dublin",
    "Madrid",
    "Delhi",
    "Berlin",
    "Vienna",
    "Sydney",
    "Boston",
    "Lagos",
)
PETS = ("cat", "dog", "fish", "bird", "rabbit", "hamster", "turtle", "horse", "goat", "parrot")
ROOMS = ("kitchen", "hall", "bedroom", "garden", "attic", "garage", "bathroom", "cellar", "office", "shed")
THINGS = ("ring", "coin", "key", "map", "book", "watch", "pen", "letter", "cup", "hat", "sock", "spoon")
FRUITS = ("apple", "pear", "plum", "peach", "banana", "orange", "lemon", "mango", "grape", "cherry")
JOBS = ("cook", "nurse", "pilot", "farmer", "teacher", "baker", "singer", "driver", "painter", "doctor")
COLORS = ("red", "blue", "green", "yellow", "black", "white", "pink", "brown")

# (subjects, values, statement, questions asking the value, questions asking the subject)
SINGLE = (
    (
        NAMES,
        COLORS,
        "{s} has the {v} key.",
        ("What color is {s}'s key?", "Which key does {s} have?"),
        ("Who has the {v} key?", "Whose key is {v}?"),
    ),
    (
        NAMES,
        CITIES,
        "{s} lives in {v}.",
        ("Where does {s} live?", "In which city does {s} live?"),
        ("Who lives in {v}?",),
    ),
    (
        NAMES,
        PETS,
        "{s} owns {a_v}.",
        ("What pet does {s} own?", "Which animal belongs to {s}?"),
        ("Who owns the {v}?", "Whose pet is the {v}?"),
    ),
    (
        THINGS,
        ROOMS,
        "The {s} is in the {v}.",
        ("Where is the {s}?", "In which room is the {s}?"),
        ("What is in the {v}?", "Which thing is in the {v}?"),
    ),
    (NAMES, FRUITS, "{s} ate {a_v}.", ("What did {s} eat?", "Which fruit did {s} eat?"), ("Who ate the {v}?",)),
    (
        NAMES,
        JOBS,
        "{s} works as {a_v}.",
        ("What is {s}'s job?", "What does {s} work as?"),
        ("Who works as {a_v}?", "Who is the {v}?"),
    ),
)


def _single(rng: random.Random) -> Item:
    subjects, values, statement, ask_value, ask_subject = rng.choice(SINGLE)
    ss, vs = rng.sample(subjects, 4), rng.sample(values, 4)
    context = " ".join(statement.format(s=s, v=v, a_v=article(v)) for s, v in zip(ss, vs))
    i = rng.randrange(4)
    if rng.random() < 0.5:
        question, answer, others = rng.choice(ask_value).format(s=ss[i]), vs[i], vs
    else:
        question, answer, others = rng.choice(ask_subject).format(v=vs[i], a_v=article(vs[i])), ss[i], ss
    return Item("single_fact_recall", context, question, answer, pick(rng, answer, others))


def _multi(rng: random.Random) -> Item:
    """Three full chains X -> Y -> Z plus one loose Y -> Z link, so all four Z's are in the text."""
    kind = rng.randrange(4)
    if kind == 0:  # person -> box -> room
        xs, ys, zs = rng.sample(NAMES, 3), rng.sample(COLORS, 4), rng.sample(ROOMS, 4)
        first = "{x} has the {y} box."
        second = "The {y} box is in the {z}."
        asks = ("In which room is {x}'s box?", "Where is the box that {x} has?")
    elif kind == 1:  # person -> friend -> city
        people = rng.sample(NAMES, 7)
        xs, ys, zs = people[:3], people[3:], rng.sample(CITIES, 4)
        first = "{x}'s friend is {y}."
        second = "{y} lives in {z}."
        asks = ("Where does {x}'s friend live?", "In which city does the friend of {x} live?")
    elif kind == 2:  # thing -> box -> room
        xs, ys, zs = rng.sample(THINGS, 3), rng.sample(COLORS, 4), rng.sample(ROOMS, 4)
        first = "The {x} is in the {y} box."
        second = "The {y} box is in the {z}."
        asks = ("In which room is the {x}?", "Where is the {x} kept?")
    else:  # room -> box -> person (asked backwards: whose box is in the room?)
        xs, ys, zs = rng.sample(ROOMS, 3), rng.sample(COLORS, 4), rng.sample(NAMES, 4)
        first = "The {y} box is in the {x}."
        second = "{z} has the {y} box."
        asks = ("Whose box is in the {x}?", "Who has the box that is in the {x}?")
    facts = [first.format(x=x, y=y) for x, y in zip(xs, ys)]
    facts += [second.format(y=y, z=z) for y, z in zip(ys, zs)]
    rng.shuffle(facts)
    i = rng.randrange(3)
    question = rng.choice(asks).format(x=xs[i])
    return Item("multi_hop_recall", " ".join(facts), question, zs[i], pick(rng, zs[i], zs))


def draw(rng: random.Random) -> Item:
    make = _single if rng.random() < 0.5 else _multi
    return made_up(make(rng), make.__name__)


def facts() -> list[str]:
    return []


def draw_easy(rng: random.Random) -> Item:
    """The easy level: two bindings stated, one asked either way; the wrong options are the other binding's and
    two of the same kind not in the context."""
    subjects, values, statement, ask_value, ask_subject = rng.choice(SINGLE)
    ss, vs = rng.sample(subjects, 4), rng.sample(values, 4)
    context = " ".join(statement.format(s=s, v=v, a_v=article(v)) for s, v in zip(ss[:2], vs[:2]))
    if rng.random() < 0.5:
        question, answer, wrong = rng.choice(ask_value).format(s=ss[0]), vs[0], (vs[1], vs[2], vs[3])
    else:
        question = rng.choice(ask_subject).format(v=vs[0], a_v=article(vs[0]))
        answer, wrong = ss[0], (ss[1], ss[2], ss[3])
    return made_up(Item("single_fact_recall", context, question, answer, wrong), "easy_single")
