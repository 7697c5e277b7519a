"""The names of an (ability, k)'s regions (extract.regions): top and placebo, one per attribution sample (top, top2,
top3; placebo, placebo2, ...: extract.selections), bottom, and the random draws (random, random2, ...:
extract.random_draws). Every stage reads a region's kind from its name here.
"""

from __future__ import annotations

REGIONS: tuple[str, ...] = ("top", "bottom", "random", "placebo")
DEFAULT_REGIONS: tuple[str, ...] = ("top", "bottom", "random")  # placebo regions need a neuron score: asked for


def random_draw_names(draws: int) -> list[str]:
    """The region names of `draws` random draws: random (the paper's one), random2, random3, ..."""
    return ["random"] + [f"random{d}" for d in range(2, draws + 1)]


def random_draw(region: str) -> int | None:
    """Which random draw a region name is (random: 1, random2: 2, ...); None for top and bottom."""
    if region == "random":
        return 1
    rest = region.removeprefix("random")
    return int(rest) if rest != region and rest.isdigit() and int(rest) >= 2 else None


SELECTED = ("top", "placebo")  # the regions chosen by the score, one per selection (extract.selections)


def selection_name(kind: str, selection: int) -> str:
    """The region name of one selection of a chosen region: top (selection 1), top2, top3; placebo, placebo2, ..."""
    return kind if selection == 1 else f"{kind}{selection}"


def selection_of(region: str) -> tuple[str, int] | None:
    """(kind, selection) of a chosen region's name (top2: ("top", 2)); None for bottom and the random draws."""
    for kind in SELECTED:
        rest = region.removeprefix(kind)
        if rest == "":
            return kind, 1
        if rest != region and rest.isdigit() and int(rest) >= 2:
            return kind, int(rest)
    return None
