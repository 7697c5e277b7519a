"""Zero against mean ablation on a model's frontier (benchprof/lab/ablation_compare.py): `compare` two frontier
folders measured with each; `shift`, how far each moves what a region's neurons write.

.venv/bin/python scripts/ablation_compare.py compare docs/results/frontier-smollm2-union \
    docs/results/frontier-smollm2-mean
.venv/bin/python scripts/ablation_compare.py shift configs/smollm2-power.yml outputs/smollm2-power/frontier-mean
"""

from benchprof.core.console import run_script
from benchprof.lab.ablation_compare import ablation_compare, ablation_shift

if __name__ == "__main__":
    run_script({"compare": ablation_compare, "shift": ablation_shift})
