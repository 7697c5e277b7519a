"""Build the real model and benchmark copies that configs/smollm2.yml uses (see benchprof/lab/fetch.py).

.venv/bin/python scripts/fetch_real.py            # real/SmolLM2-135M-Instruct and real/benchmarks/
.venv/bin/python scripts/fetch_real.py --help
"""

from benchprof.core.console import run_script
from benchprof.lab.fetch import fetch_real

if __name__ == "__main__":
    run_script(fetch_real)
