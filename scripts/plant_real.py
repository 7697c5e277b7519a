#!/usr/bin/env python
"""Plant invented abilities into SmolLM2-135M-Instruct: benchprof/lab/plant_command.py (build, apply, table,
benchmarks; `--help` on each)."""

import sys

import fire

from benchprof import BenchprofError
from benchprof.lab.plant_command import COMMANDS

if __name__ == "__main__":
    try:
        fire.Fire(COMMANDS)
    except BenchprofError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
