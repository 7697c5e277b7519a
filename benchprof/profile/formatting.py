"""How a number is written in a table: the text of a cell in ais.md, compare.md, the terminal and the figures.

`–` (MISSING_CELL) is a cell with no evaluation and `n/a` (UNDEFINED_CELL) one whose original score is 0 (AIS
undefined); `*` after an AIS marks a row whose adjusted p-value is below aggregate.alpha within its family (Holm
over the claim and the own families, Benjamini-Hochberg over the others).
"""

from __future__ import annotations

import math
import textwrap

from benchprof.profile.rows import AisRow

MISSING_CELL = "–"  # no evaluation to compute from
UNDEFINED_CELL = "n/a"  # computed, but undefined (original score 0)
TERMINAL_WIDTH = 120  # a line benchprof prints wraps here; the files keep each line whole


def fmt_ais(row: AisRow | None) -> str:
    """A table cell: the AIS to 3 decimals, `*` when its q-value is below aggregate.alpha."""
    if row is None:
        return MISSING_CELL
    if math.isnan(row.ais):
        return UNDEFINED_CELL
    return f"{row.ais:+.3f}" + ("*" if row.significant else "")


def counted(n: int, noun: str) -> str:
    """'1 evaluation', '2 evaluations'."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def md_table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * len(header)) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines)


def terminal_fill(text: str, width: int = TERMINAL_WIDTH) -> str:
    """A line for the terminal, wrapped at `width` (its continuation lines indented by two spaces)."""
    return textwrap.fill(text, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)


def terminal_table(header: list[str], rows: list[list[str]], width: int = TERMINAL_WIDTH) -> str:
    """A Markdown table for the terminal: split column-wise into tables whose lines fit `width` characters, each
    repeating the first column (as a wide DataFrame prints); a column wider than `width` alone gets a table."""
    widths = [max(len(line[i]) for line in [header, *rows]) for i in range(len(header))]
    blocks: list[list[int]] = [[]]
    for i in range(1, len(header)):
        columns = [0, *blocks[-1], i]
        if blocks[-1] and sum(widths[c] for c in columns) + 3 * len(columns) + 1 > width:
            blocks.append([])
        blocks[-1].append(i)
    return "\n\n".join(
        md_table([header[c] for c in (0, *block)], [[row[c] for c in (0, *block)] for row in rows]) for block in blocks
    )


def fmt_interval(value: float, low: float, high: float, digits: int = 2, sign: str = "") -> str:
    """'0.81 [0.62, 0.93]' (sign "+": '+0.81 [+0.62, +0.93]'), the point alone without an interval, '–' without a
    value."""
    if math.isnan(value):
        return MISSING_CELL
    text = f"{value:{sign}.{digits}f}"
    return text if math.isnan(low) else f"{text} [{low:{sign}.{digits}f}, {high:{sign}.{digits}f}]"


def fmt_names(names: list[str]) -> str:
    """Names joined by commas, 'none' for no name."""
    return ", ".join(names) if names else "none"
