"""Build the real model and benchmark copies that configs/smollm2.yml uses (see benchprof/lab/fetch.py).

.venv/bin/python scripts/fetch_real.py            # real/SmolLM2-135M-Instruct and real/benchmarks/
.venv/bin/python scripts/fetch_real.py --help
"""

import sys

import fire

from benchprof import BenchprofError
from benchprof.lab.fetch import fetch_real

if __name__ == "__main__":
    try:
        fire.Fire(fetch_real)
    except BenchprofError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
