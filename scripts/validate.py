#!/usr/bin/env python
"""How well each score recovers a planted model's planted regions: benchprof/lab/validate.py (`--help`)."""

import sys

from benchprof import BenchprofError
from benchprof.lab.validate import main

if __name__ == "__main__":
    try:
        main()
    except BenchprofError as err:
        sys.exit(f"error: {err}")
