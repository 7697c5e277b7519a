"""What each option's regions remove on a planted model's frontier (lab/frontier_planted.py write_planted_effects).

.venv/bin/python scripts/planted_effects.py outputs/smollm2-planted/frontier \
    Invented_Facts,Invented_Language,Invented_Units
"""

import sys
from pathlib import Path

from benchprof.lab.frontier_planted import write_planted_effects

if __name__ == "__main__":
    files = write_planted_effects(Path(sys.argv[1]), sys.argv[2].split(","))
    print(files[1].read_text(), end="")
