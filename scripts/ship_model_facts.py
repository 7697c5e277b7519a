"""Write the demo model's facts shipped with the package (lab/shipped_facts.py), after changing the demo model or a
pinned library version.

.venv/bin/python scripts/ship_model_facts.py
"""

from benchprof.core.console import run_script
from benchprof.lab.shipped_facts import main

if __name__ == "__main__":
    run_script(main)
