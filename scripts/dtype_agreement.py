"""Compare float32 and bfloat16 scoring of one plan: two frontier folders, or two profile folders of one config
(benchprof/lab/dtype_agreement.py).

.venv/bin/python scripts/dtype_agreement.py outputs/<model>/frontier outputs/<model>/frontier-bf16
.venv/bin/python scripts/dtype_agreement.py <float32 profile folder> <bfloat16 profile folder>
"""

from benchprof.core.console import run_script
from benchprof.lab.dtype_agreement import main

if __name__ == "__main__":
    run_script(main)
