"""Re-derive profiles' ais.csv from their per-document scores alone (lab/rederive.py) and compare.

.venv/bin/python scripts/rederive_profile.py docs/results/profile-*
.venv/bin/python scripts/rederive_profile.py --compare OUT FOLDER FOLDER...   (their models compared, as `compare` does)
"""

from benchprof.core.console import run_script
from benchprof.lab.rederive import main

if __name__ == "__main__":
    run_script(main)
