"""Compare a float32 frontier folder with a bfloat16 one of the same plan (benchprof/lab/dtype_agreement.py).

.venv/bin/python scripts/dtype_agreement.py outputs/<model>/frontier outputs/<model>/frontier-bf16
"""

from benchprof.core.console import run_script
from benchprof.lab.dtype_agreement import compare_dtypes

if __name__ == "__main__":
    run_script(compare_dtypes)
