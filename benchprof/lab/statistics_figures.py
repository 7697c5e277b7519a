"""The figures docs/research/demo-statistics.md quotes, from a finished profile (ais.json): interval widths per metric,
stars before and after the correction, the null calibration of the pooled random control.

    .venv/bin/python scripts/statistics_figures.py outputs/demo/profile/ais.json
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any


def width(row: dict[str, Any]) -> float | None:
    low, high = row.get("ci_low"), row.get("ci_high")
    return None if low is None or high is None else float(high) - float(low)


def figures(profile: dict[str, Any]) -> list[str]:
    """One line per figure."""
    rows = profile["rows"]
    lines = []
    cells: dict[tuple[str, str, float, str], dict[str, dict[str, Any]]] = {}
    for row in rows:
        if row["benchmark"] != "specificity":
            kind = "p_correct" if row["metric"] == "p_correct" else "headline"
            cells.setdefault((row["ability"], row["benchmark"], row["k"], row["region"]), {})[kind] = row
    for k in sorted({key[2] for key in cells}):
        for region in ("top", "top-random"):
            pairs = [
                (w_acc, w_p)
                for key, kinds in cells.items()
                if key[2] == k and key[3] == region and {"headline", "p_correct"} <= set(kinds)
                if (w_acc := width(kinds["headline"])) is not None and (w_p := width(kinds["p_correct"])) is not None
            ]
            if pairs:
                acc = statistics.median(a for a, _ in pairs)
                p = statistics.median(b for _, b in pairs)
                lines.append(
                    f"k={k:g} {region}: median 95% interval width over {len(pairs)} cells: accuracy {acc:.3f}, "
                    f"p_correct {p:.3f} (ratio {p / acc:.2f})"
                )
    for kind in ("headline", "p_correct"):
        tested = [
            r for r in rows if r.get("p_value") is not None and (r["metric"] == "p_correct") == (kind == "p_correct")
        ]
        old_star = sum(
            1 for r in tested if r.get("ci_low") is not None and (float(r["ci_low"]) > 0 or float(r["ci_high"]) < 0)
        )
        raw = sum(1 for r in tested if float(r["p_value"]) < profile["alpha"])
        stars = sum(1 for r in tested if r.get("significant"))
        lines.append(
            f"{kind}: {len(tested)} rows with a p-value; interval excludes 0: {old_star}; raw p < alpha: {raw}; "
            f"Benjamini-Hochberg q < alpha: {stars}"
        )
    calibration = profile.get("null_calibration") or []
    if calibration:
        draws = sum(e["draws"] for e in calibration)
        flagged = sum(e["flagged"] for e in calibration)
        lines.append(
            f"null calibration: {flagged} of {draws} random draws flagged against the others' pool "
            f"({flagged / draws:.1%}) over {len(calibration)} (benchmark, k)"
        )
    mdes = [
        float(r["mde"])
        for r in rows
        if r["region"] == "top" and r.get("mde") is not None and not math.isnan(float(r["mde"]))
    ]
    if mdes:
        lines.append(f"median minimum detectable AIS of the top rows (both metrics): {statistics.median(mdes):.2f}")
    return lines


def main() -> None:
    """scripts/statistics_figures.py PROFILE/ais.json: print the figures."""
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for line in figures(json.loads(Path(sys.argv[1]).read_text())):
        print(line)
