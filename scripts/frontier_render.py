"""Redraw a frontier folder's tables from its plan.json and evaluations.jsonl (benchprof/lab/frontier.py, render).

.venv/bin/python scripts/frontier_render.py docs/results/frontier-smollm2-easy
"""

from benchprof.core.console import run_script
from benchprof.lab.frontier import render

if __name__ == "__main__":
    run_script(render)
