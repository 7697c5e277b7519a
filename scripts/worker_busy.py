"""Each evaluate worker's busy share of an evaluation's span, from its result files (lab/busy.py).

.venv/bin/python scripts/worker_busy.py outputs/<model> --workers 2
"""

from benchprof.core.console import run_script
from benchprof.lab.busy import main

if __name__ == "__main__":
    run_script(main)
