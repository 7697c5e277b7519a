"""Hold a frontier scored again by the current scorer to the committed scorer-v1 one (lab/frontier_rescore.py).

.venv/bin/python scripts/frontier_rescore.py outputs/smollm2-planted/frontier docs/results/frontier-smollm2-plant \
    data/plant-smollm2
"""

from benchprof.core.console import run_script
from benchprof.lab.frontier_rescore import rescore_check, rescore_line


def rescore(new: str, old: str, data_dir: str) -> None:
    """Print rescore_check's line for NEW (scored again), OLD (committed) and the plan's DATA_DIR."""
    print(rescore_line(rescore_check(new, old, data_dir)))


if __name__ == "__main__":
    run_script(rescore)
