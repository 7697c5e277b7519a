"""Redraw a frontier folder's tables from its plan.json and evaluations.jsonl (benchprof/lab/frontier.py, render).

.venv/bin/python scripts/frontier_render.py docs/results/frontier-smollm2-easy
"""

import sys

import fire

from benchprof import BenchprofError
from benchprof.lab.frontier import render

if __name__ == "__main__":
    try:
        fire.Fire(render)
    except BenchprofError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
