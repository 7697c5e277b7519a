"""What any claim rule could reach on a profile's spiked benchmarks, beside the rule's own reach (lab/spike_bound.py).

.venv/bin/python scripts/spike_bound.py docs/results/profile-qwen2.5-0.5b-claims docs/results/spikes/g-q05.csv
"""

from benchprof.core.console import run_script
from benchprof.lab.spike_bound import main

if __name__ == "__main__":
    run_script(main)
