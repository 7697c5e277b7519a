"""Long_Term_Knowledge: world facts that the item never states (context is empty).

Tables: countries (capital, continent, main language, a well-known non-capital city used as a
decoy), chemical elements (symbol, atomic number), books (author), landmarks (country). Each
relation is asked forward ("What is the capital of Peru?") and backward ("Lima is the capital of
which country?") in several phrasings."""

from __future__ import annotations

import random
from functools import cache

from benchprof.abilities.common import Item, Spec, capital_first, draw_spec, pick, relation_specs, table

QUESTION_TYPES = ("world_fact",)
QT = QUESTION_TYPES[0]


def _countries(field: str) -> list[tuple[str, str]]:
    return [(row["country"], row[field]) for row in table("countries") if row[field]]


@cache
def specs() -> list[Spec]:
    countries = {row["country"]: row for row in table("countries")}
    capital_continent = {row["capital"]: row["continent"] for row in countries.values()}

    def same_continent_capitals(country: str, capital: str) -> list[str]:
        row = countries[country]
        near = [c for c, cont in capital_continent.items() if c and cont == row["continent"] and c != capital]
        return ([row["big_city"]] if row["big_city"] else []) + near

    def same_continent_countries(country: str, capital: str) -> list[str]:
        return [
            c for c, row in countries.items() if row["capital"] and row["continent"] == countries[country]["continent"]
        ]

    elements = table("elements")
    symbols = [(name, symbol) for name, symbol, _ in elements]
    numbers = [(name, str(number)) for name, _, number in elements]

    def like_symbols(name: str, symbol: str) -> list[str]:  # Ga, Ge for gold: same first letter
        return [s for n, s in symbols if s[0] == name[0].upper() and n != name]

    def like_names(name: str, symbol: str) -> list[str]:
        return [n for n, s in symbols if s[0] == symbol[0] and n != name]

    def near_numbers(name: str, number: str) -> list[str]:
        return [str(int(number) + d) for d in (1, -1, 2)]

    def near_elements(name: str, number: str) -> list[str]:
        return [n for n, z in numbers if abs(int(z) - int(number)) <= 2 and n != name]

    out: list[Spec] = []
    out += relation_specs(
        QT,
        _countries("capital"),
        [
            "What is the capital of {key}?",
            "Which city is the capital of {key}?",
            "The capital of {key} is which city?",
            "Name the capital city of {key}.",
            "What city is the seat of government of {key}?",
        ],
        [
            "{value} is the capital of which country?",
            "Which country has {value} as its capital?",
            "Of which country is {value} the capital?",
        ],
        same_continent_capitals,
        same_continent_countries,
        relation="capital",
    )
    out += relation_specs(
        QT,
        _countries("continent"),
        [
            "On which continent is {key}?",
            "{Key} is on which continent?",
            "Which continent is {key} in?",
            "{Key} lies in which part of the world?",
        ],
        ["Which of these countries is in {value}?", "Which country lies in {value}?"],
        relation="continent",
    )
    out += relation_specs(
        QT,
        _countries("language"),
        [
            "What is the main language of {key}?",
            "Which language do most people in {key} speak?",
            "People in {key} mostly speak which language?",
        ],
        ["In which country is {value} the main language?", "Which country mainly speaks {value}?"],
        relation="language",
    )
    out += relation_specs(
        QT,
        symbols,
        [
            "What is the chemical symbol for {key}?",
            "Which symbol stands for {key}?",
            "{Key} has which chemical symbol?",
            "How is {key} written as a chemical symbol?",
        ],
        [
            "Which element has the symbol {value}?",
            "The chemical symbol {value} stands for which element?",
            "Which element is written {value}?",
        ],
        like_symbols,
        like_names,
        relation="symbol",
    )
    out += relation_specs(
        QT,
        numbers,
        [
            "What is the atomic number of {key}?",
            "{Key} has which atomic number?",
        ],
        [
            "Which element has atomic number {value}?",
            "Which element has {value} protons in each atom?",
        ],
        near_numbers,
        near_elements,
        relation="atomic_number",
    )
    out += relation_specs(
        QT,
        [tuple(row) for row in table("books")],
        [
            "Who wrote {key}?",
            "Who is the author of {key}?",
            "{Key} was written by whom?",
            "Which writer wrote {key}?",
        ],
        ["Which book was written by {value}?", "{Value} is the author of which book?"],
        relation="author",
    )
    out += relation_specs(
        QT,
        [tuple(row) for row in table("landmarks")],
        [
            "In which country is {key}?",
            "{Key} is in which country?",
            "Which country is home to {key}?",
            "Where would you go to see {key}?",
        ],
        ["Which landmark is in {value}?", "Which of these can you visit in {value}?"],
        relation="landmark",
    )
    return out


def capacity() -> int:
    return len(specs())


def draw(rng: random.Random) -> Item:
    return draw_spec(rng, specs())


def facts() -> list[str]:
    out = []
    for row in table("countries"):
        country = row["country"]
        if row["capital"]:
            out.append(f"The capital of {country} is {row['capital']}.")
        if row["continent"]:
            out.append(capital_first(f"{country} is in {row['continent']}."))
        if row["language"]:
            out.append(f"Most people in {country} speak {row['language']}.")
    for name, symbol, number in table("elements"):
        out.append(f"The chemical symbol for {name} is {symbol}.")
        out.append(f"The atomic number of {name} is {number}.")
    out += [f"{book} was written by {author}." for book, author in table("books")]
    out += [capital_first(f"{place} is in {country}.") for place, country in table("landmarks")]
    return out


def draw_transfer(rng: random.Random) -> Item:
    """A format the train split never uses: a fact as a sentence to complete ("The capital of France is ..."), no
    question; the problem (the fact) named as the train split's cluster names it."""
    kind = rng.randrange(6)
    if kind in (0, 4, 5):
        field, text = {0: ("capital", "The capital of {k} is"), 4: ("continent", "{k} is in the continent of"),
                       5: ("language", "Most people in {k} speak")}[kind]  # fmt: skip
        rows = [r for r in table("countries") if r[field]]
        pairs, relation = [(r["country"], r[field]) for r in rows], field
    elif kind == 1:
        pairs, text, relation = [(n, s) for n, s, _ in table("elements")], "The chemical symbol for {k} is", "symbol"
    elif kind == 2:
        pairs, text, relation = [tuple(p) for p in table("books")], "{k} was written by", "author"
    else:
        pairs, text, relation = [tuple(p) for p in table("landmarks")], "{k} is in", "landmark"
    key, answer = rng.choice(pairs)
    wrong = pick(rng, answer, [v for k, v in pairs if k != key and v != answer])
    question = f"Complete the sentence: {capital_first(text.format(k=key))} ..."
    return Item(QUESTION_TYPES[0], "", question, answer, wrong, f"complete_{relation}:{key}", f"{relation}:{key}")
