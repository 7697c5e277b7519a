"""Temporal_Reasoning: weekday and month arithmetic, clock arithmetic (end time, start time,
duration, 24-hour clock) and the order of events from before / after clues. Answers are computed
modulo 7 days, 12 months or 24 hours; wrong options are neighbouring days, months and times, or
what the opposite direction of counting gives."""

from __future__ import annotations

import random

from benchprof.abilities.common import NAMES, Item, made_up, pick, problem_key

QUESTION_TYPES = ("temporal_order",)
QT = QUESTION_TYPES[0]
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
ACTIVITIES = ("the film", "the class", "the game", "the concert", "the meeting", "the party", "the trip", "the show")
EVENTS = (
    "the swim",
    "the walk",
    "the nap",
    "the bath",
    "the homework",
    "the game",
    "the music lesson",
    "the shopping",
    "the bike ride",
    "the phone call",
    "the puzzle",
    "the story",
    "the painting",
)


def _cycle_neighbours(cycle: tuple[str, ...], answer: str, mistake: str) -> list[str]:
    i = cycle.index(answer)
    return [mistake, cycle[(i + 1) % len(cycle)], cycle[(i - 1) % len(cycle)]]


def _days(rng: random.Random) -> Item:
    start = rng.randrange(7)
    form = rng.randrange(4)
    k = rng.randint(1, 10)
    if form == 0:
        context, question, shift = f"Today is {DAYS[start]}.", f"What day will it be in {k} days?", k
    elif form == 1:
        context, question, shift = f"Today is {DAYS[start]}.", f"What day was it {k} days ago?", -k
    elif form == 2:
        context, question, shift = f"Yesterday was {DAYS[start]}.", "What day is tomorrow?", 2
    else:
        context, question, shift = f"Tomorrow is {DAYS[start]}.", "What day was yesterday?", -2
    answer = DAYS[(start + shift) % 7]
    mistake = DAYS[(start - shift) % 7]
    lures = _cycle_neighbours(DAYS, answer, mistake)
    return Item(QT, context, question, answer, pick(rng, answer, DAYS, hard=lures))


def _months(rng: random.Random) -> Item:
    start = rng.randrange(12)
    form = rng.randrange(4)
    k = rng.randint(1, 11)
    if form == 0:
        context, question, shift = f"It is {MONTHS[start]} now.", f"What month will it be in {k} months?", k
    elif form == 1:
        context, question, shift = f"It is {MONTHS[start]} now.", f"What month was it {k} months ago?", -k
    elif form == 2:
        context, question, shift = "", f"Which month comes right after {MONTHS[start]}?", 1
    else:
        context, question, shift = "", f"Which month comes just before {MONTHS[start]}?", -1
    answer = MONTHS[(start + shift) % 12]
    mistake = MONTHS[(start - shift) % 12]
    lures = _cycle_neighbours(MONTHS, answer, mistake)
    return Item(QT, context, question, answer, pick(rng, answer, MONTHS, hard=lures))


def _clock(minutes: int) -> str:
    minutes %= 24 * 60
    return f"{minutes // 60}:{minutes % 60:02d}"


def _duration(minutes: int) -> str:
    hours, rest = divmod(minutes, 60)
    parts = []
    if hours:
        parts.append(f"{hours} hour" + ("s" if hours > 1 else ""))
    if rest:
        parts.append(f"{rest} minutes")
    return " ".join(parts)


def _times(rng: random.Random) -> Item:
    name = rng.choice(NAMES)
    activity = rng.choice(ACTIVITIES)
    start = rng.randrange(6 * 60, 22 * 60, 5)
    length = rng.choice((15, 20, 30, 40, 45, 50, 60, 75, 90, 120, 150, 180))
    form = rng.randrange(3)
    if form == 0:
        context = f"{activity.capitalize()} starts at {_clock(start)} and lasts {_duration(length)}."
        question = rng.choice((f"When does {activity} end?", f"At what time is {activity} over?"))
        answer = _clock(start + length)
        lures = [_clock(start - length), _clock(start + length + 60), _clock(start + length - 10)]
    elif form == 1:
        context = f"{name} walked for {_duration(length)} and got home at {_clock(start + length)}."
        question = f"At what time did {name} start walking?"
        answer, lures = _clock(start), [_clock(start + 2 * length), _clock(start + 60), _clock(start - 10)]
    else:
        context = f"{activity.capitalize()} began at {_clock(start)} and ended at {_clock(start + length)}."
        question = rng.choice(("How long did it last?", f"How long was {activity}?"))
        answer = _duration(length)
        lures = [_duration(m) for m in (length + 10, length + 60, abs(length - 10), length + 30) if m > 0]
    if form < 2:
        pool = [_clock(start + d) for d in range(-120, 121, 5)]
    else:
        pool = [_duration(m) for m in range(5, 300, 5)]
    return Item(QT, context, question, answer, pick(rng, answer, lures + pool, hard=lures))


def _order(rng: random.Random) -> Item:
    name = rng.choice(NAMES)
    events = rng.sample(EVENTS, 4)  # in the order they happened
    clues = []
    for a, b in zip(events, events[1:]):
        clues.append(f"{a.capitalize()} was before {b}." if rng.random() < 0.5 else f"{b.capitalize()} was after {a}.")
    rng.shuffle(clues)
    i = rng.randrange(3)
    asks = [
        ("What came first?", events[0]),
        ("What came last?", events[3]),
        (f"What came right after {events[i]}?", events[i + 1]),
        (f"What came right before {events[i + 1]}?", events[i]),
    ]
    question, answer = rng.choice(asks)
    context = f"{name} did four things today. " + " ".join(clues)
    return Item(QT, context, question, answer, pick(rng, answer, events))


def draw(rng: random.Random) -> Item:
    make = rng.choice((_days, _months, _times, _order))
    return made_up(make(rng), make.__name__)


def facts() -> list[str]:
    return []


def draw_easy(rng: random.Random) -> Item:
    """The easy level, one step from two facts: the day or month right after or before a named one (38 problems),
    or the year (400); wrong options are never the named one and at least two steps from the answer."""
    return (_easy_step if rng.random() < 0.5 else _easy_year)(rng)


def _easy_year(rng: random.Random) -> Item:
    """The year one year after or before a named one; the wrong options are at least three years away."""
    name = rng.choice(NAMES)
    year, shift = rng.randint(1900, 2099), rng.choice((1, -1))
    context = rng.choice(("", f"{name} was born in {year}.", f"It is the year {year}."))
    question = f"Which year comes right after {year}?" if shift == 1 else f"Which year comes just before {year}?"
    answer = year + shift
    far = [y for y in range(year - 12, year + 13) if abs(y - answer) >= 3 and y != year]
    item = Item(QT, context, question, str(answer), tuple(str(y) for y in rng.sample(far, 3)))
    return made_up(item, "easy_years", problem=f"year:{year}:{shift}")


def _easy_step(rng: random.Random) -> Item:
    """The day or month one step after or before a named one."""
    cycle = rng.choice((DAYS, MONTHS))
    unit = "day" if cycle is DAYS else "month"
    start = rng.randrange(len(cycle))
    shift = rng.choice((1, -1))
    name = rng.choice(NAMES)
    if unit == "day":
        context = rng.choice(("", f"{name} was born on a {cycle[start]}.", f"Today is {cycle[start]}."))
    else:
        context = rng.choice(("", f"{name} was born in {cycle[start]}.", f"It is {cycle[start]} now."))
    relation = "right after" if shift == 1 else "just before"
    question = f"Which {unit} comes {relation} {cycle[start]}?"
    answer = cycle[(start + shift) % len(cycle)]
    far = [c for i, c in enumerate(cycle) if min((i - start) % len(cycle), (start - i) % len(cycle)) > 1]
    far = [c for c in far if c != cycle[(start + 2 * shift) % len(cycle)]]
    item = Item(QT, context, question, answer, tuple(rng.sample(far, 3)))
    return made_up(item, f"easy_{unit}s", problem=f"{unit}:{start}:{shift}")  # who was born then is wording


def draw_transfer(rng: random.Random) -> Item:
    """A format the train split never uses: the easy level's step as a sentence to complete ("The day after Monday
    is ...", "The year before 1987 is ..."), no question; each problem named as the easy level's."""
    shift = rng.choice((1, -1))
    if rng.random() < 0.5:
        year = rng.randint(1900, 2099)
        question = f"Complete the sentence: The year {'after' if shift == 1 else 'before'} {year} is ..."
        years = [y for y in range(year - 12, year + 13) if abs(y - year - shift) >= 3 and y != year]
        problem = problem_key("easy_years", f"year:{year}:{shift}")
        wrong = tuple(str(y) for y in rng.sample(years, 3))
        return Item(QT, "", question, str(year + shift), wrong, f"complete:{problem}", problem)
    cycle = rng.choice((DAYS, MONTHS))
    unit = "day" if cycle is DAYS else "month"
    start = rng.randrange(len(cycle))
    question = f"Complete the sentence: The {unit} {'after' if shift == 1 else 'before'} {cycle[start]} is ..."
    answer = cycle[(start + shift) % len(cycle)]
    far = [c for i, c in enumerate(cycle) if min((i - start) % len(cycle), (start - i) % len(cycle)) > 1]
    far = [c for c in far if c != cycle[(start + 2 * shift) % len(cycle)]]
    problem = problem_key(f"easy_{unit}s", f"{unit}:{start}:{shift}")
    return Item(QT, "", question, answer, tuple(rng.sample(far, 3)), f"complete:{problem}", problem)
