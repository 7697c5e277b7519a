"""Re-render committed profiles' ais.md so that each opens with its Claims (lab/rerender.py).

.venv/bin/python scripts/rerender_profiles.py docs/results/profile-*
"""

from benchprof.core.console import run_script
from benchprof.lab.rerender import main

if __name__ == "__main__":
    run_script(main)
