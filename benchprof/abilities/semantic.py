"""Semantic_Relationship: part-whole, kind-of, opposite, same-meaning and tool-use relations from
curated tables, plus agent / patient / recipient roles in a generated sentence (active or passive
voice, so the roles cannot be read off the word order)."""

from __future__ import annotations

import random
from functools import cache

from benchprof.abilities.common import (
    Item,
    Spec,
    article,
    capital_first,
    draw_spec,
    made_up,
    pick,
    problem_key,
    relation_specs,
    table,
)

QUESTION_TYPES = ("roles_and_relations",)
QT = QUESTION_TYPES[0]

ACTORS = (
    "dog",
    "cat",
    "boy",
    "girl",
    "teacher",
    "farmer",
    "baker",
    "horse",
    "fox",
    "king",
    "nurse",
    "clown",
    "pilot",
    "duck",
    "goat",
    "tiger",
    "queen",
    "doctor",
    "cook",
    "bear",
)
# base, past, past participle, gerund
VERBS = (
    ("chase", "chased", "chased", "chasing"),
    ("see", "saw", "seen", "seeing"),
    ("help", "helped", "helped", "helping"),
    ("push", "pushed", "pushed", "pushing"),
    ("call", "called", "called", "calling"),
    ("find", "found", "found", "finding"),
    ("follow", "followed", "followed", "following"),
    ("thank", "thanked", "thanked", "thanking"),
    ("kick", "kicked", "kicked", "kicking"),
    ("feed", "fed", "fed", "feeding"),
    ("wake", "woke", "woken", "waking"),
    ("hug", "hugged", "hugged", "hugging"),
    ("bite", "bit", "bitten", "biting"),
    ("catch", "caught", "caught", "catching"),
    ("visit", "visited", "visited", "visiting"),
    ("wash", "washed", "washed", "washing"),
    ("draw", "drew", "drawn", "drawing"),
    ("tickle", "tickled", "tickled", "tickling"),
)
GIFTS = ("book", "apple", "ball", "hat", "cake", "letter", "flower", "coin", "toy", "map")
OPENERS = ("", "Yesterday, ", "In the park, ", "At noon, ", "After lunch, ")


@cache
def specs() -> list[Spec]:
    out: list[Spec] = []
    parts = [(part, whole) for whole, members in table("parts").items() for part in members]
    out += relation_specs(
        QT,
        parts,
        [
            "{A_key} is part of what?",
            "Which thing has {a_key}?",
            "{A_key} belongs to which thing?",
        ],
        ["Which of these is part of {a_value}?", "{A_value} has which of these parts?"],
        relation="part",
    )
    kinds = [(m, row["category"], row["mass"]) for row in table("kinds") for m in row["members"]]
    out += relation_specs(
        QT,
        [(m if mass else article(m), c) for m, c, mass in kinds],
        [
            "{Key} is a kind of what?",
            "What kind of thing is {key}?",
            "{Key} belongs to which group?",
        ],
        relation="kind",
    )
    out += relation_specs(
        QT,
        [(m, c) for m, c, _ in kinds],
        [],
        [
            "Which of these is {a_value}?",
            "Which one of these is {a_value}?",
            "Pick {a_value} from this list.",
        ],
        relation="kind",
    )
    opposites = [tuple(p) for p in table("opposites")]
    out += relation_specs(
        QT,
        opposites + [(b, a) for a, b in opposites],
        [
            "What is the opposite of {key}?",
            "Which word means the opposite of {key}?",
            "{Key} is the opposite of which word?",
        ],
        relation="opposite",
    )
    synonyms = [tuple(p) for p in table("synonyms")]
    out += relation_specs(
        QT,
        synonyms + [(b, a) for a, b in synonyms],
        [
            "Which word means the same as {key}?",
            "What is another word for {key}?",
            "{Key} means almost the same as which word?",
        ],
        relation="synonym",
    )
    out += relation_specs(
        QT,
        [(tool, f"to {use}") for tool, use in table("tools")],
        [
            "What do you use {a_key} for?",
            "What is {a_key} used for?",
        ],
        relation="use",
    )
    out += relation_specs(
        QT,
        [(tool, use) for tool, use in table("tools")],
        [],
        [
            "Which thing do you use to {value}?",
            "What would you use to {value}?",
        ],
        relation="use",
    )
    return out


def _roles(rng: random.Random) -> Item:
    agent, patient, *others = rng.sample(ACTORS, 4)
    opener = rng.choice(OPENERS)
    if rng.random() < 0.7:
        base, past, participle, gerund = rng.choice(VERBS)
        action = base
        if rng.random() < 0.5:
            context = f"{opener}the {agent} {past} the {patient}."
        else:
            context = f"{opener}the {patient} was {participle} by the {agent}."
        asks = [
            (f"Who did the {gerund}?", agent),
            (f"Who {past} the {patient}?", agent),
            (f"Who was {participle}?", patient),
            (f"Who did the {agent} {base}?", patient),
        ]
    else:
        gift = rng.choice(GIFTS)
        action = f"give {gift}"
        form = rng.randrange(3)
        if form == 0:
            context = f"{opener}the {agent} gave the {patient} {article(gift)}."
        elif form == 1:
            context = f"{opener}the {agent} gave {article(gift)} to the {patient}."
        else:
            context = f"{opener}the {patient} got {article(gift)} from the {agent}."
        asks = [
            (f"Who got the {gift}?", patient),
            (f"Who gave the {gift} away?", agent),
            (f"Who gave the {gift}?", agent),
            (f"Who received the {gift}?", patient),
        ]
    question, answer = rng.choice(asks)
    wrong = pick(rng, f"the {answer}", [f"the {n}" for n in (agent, patient, *others)])
    # the opener, the voice and the question's words are wording; who did what to whom, and who is asked, is not
    problem = f"{action}:{agent}:{patient}:{'agent' if answer == agent else 'patient'}"
    return Item(QT, capital_first(context), question, f"the {answer}", wrong, problem=problem)


def draw(rng: random.Random) -> Item:
    if rng.random() < 0.5:
        return draw_spec(rng, specs())
    item = _roles(rng)
    return made_up(item, "roles", problem=item.problem)


def facts() -> list[str]:
    out = [
        capital_first(f"{article(part)} is part of {article(whole)}.")
        for whole, members in table("parts").items()
        for part in members
    ]
    out += [
        capital_first(f"{m if row['mass'] else article(m)} is a kind of {row['category']}.")
        for row in table("kinds")
        for m in row["members"]
    ]
    out += [f"The opposite of {a} is {b}." for a, b in table("opposites")]
    out += [capital_first(f"{a} means the same as {b}.") for a, b in table("synonyms")]
    out += [capital_first(f"you use {article(tool)} to {use}.") for tool, use in table("tools")]
    return out


def draw_transfer(rng: random.Random) -> Item:
    """A format the train split never uses: a gift told as a journey ("The ball went from the baker to the
    horse."), asked who has it now or had it first; the problem named as the train split's giving items name it."""
    agent, patient, *others = rng.sample(ACTORS, 4)
    gift = rng.choice(GIFTS)
    context = f"The {gift} went from the {agent} to the {patient}."
    if rng.random() < 0.5:
        question, answer, role = f"Who has the {gift} now?", patient, "patient"
    else:
        question, answer, role = f"Who had the {gift} first?", agent, "agent"
    wrong = pick(rng, f"the {answer}", [f"the {n}" for n in (agent, patient, *others)])
    problem = problem_key("roles", f"give {gift}:{agent}:{patient}:{role}")
    return Item(QT, context, question, f"the {answer}", wrong, f"journey:{problem}", problem)
