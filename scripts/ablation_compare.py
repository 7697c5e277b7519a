"""Zero against mean ablation on two frontier folders of one model (benchprof/lab/ablation_compare.py).

.venv/bin/python scripts/ablation_compare.py docs/results/frontier-smollm2-union docs/results/frontier-smollm2-mean
"""

from benchprof.core.console import run_script
from benchprof.lab.ablation_compare import ablation_compare

if __name__ == "__main__":
    run_script(ablation_compare)
