#!/usr/bin/env python
"""Plant invented abilities into SmolLM2-135M-Instruct: benchprof/lab/plant_command.py (build, apply, table,
benchmarks; `--help` on each)."""

from benchprof.core.console import run_script
from benchprof.lab.plant_command import COMMANDS

if __name__ == "__main__":
    run_script(COMMANDS)
