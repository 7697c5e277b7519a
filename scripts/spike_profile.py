"""The claim rule's reach on spiked benchmarks of a committed profile (lab/spikes.py): spikes.csv, a line per pair.

.venv/bin/python scripts/spike_profile.py docs/results/profile-qwen2.5-0.5b-claims \\
    --pairs arc_easy:Quantitative_Reasoning --null Temporal_Reasoning
"""

from benchprof.core.console import run_script
from benchprof.lab.spikes import main

if __name__ == "__main__":
    run_script(main)
