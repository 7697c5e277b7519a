"""What each option's regions remove on a planted model's frontier (lab/frontier_planted.py).

.venv/bin/python scripts/planted_effects.py outputs/smollm2-planted/frontier \
    Invented_Facts,Invented_Language,Invented_Units
.venv/bin/python scripts/planted_effects.py outputs/demo-planted/frontier,outputs/demo-planted-seed1/frontier,\
outputs/demo-planted-seed2/frontier Invented_Facts,Invented_Language --out docs/results/frontier-demo-plant
"""

from pathlib import Path

from benchprof import BenchprofError
from benchprof.core.console import run_script
from benchprof.lab.frontier_planted import write_effects_over_builds, write_planted_effects


def planted_effects(folders: str | tuple[str, ...], abilities: str | tuple[str, ...], out: str = "") -> None:
    """Write planted_effects.csv and .md beside each frontier folder and print them; with several folders (one per
    build of one plant, comma-separated) also planted_effects_builds.csv and .md in `out`, printed.

    Arguments:
        folders: a planted model's frontier folder, or several (builds of one plant), comma-separated.
        abilities: the planted abilities, comma-separated.
        out: where the summary over builds goes (needed with several folders).
    """
    paths = [Path(f) for f in (folders.split(",") if isinstance(folders, str) else folders)]
    planted = abilities.split(",") if isinstance(abilities, str) else list(abilities)
    if len(paths) == 1:
        print(write_planted_effects(paths[0], planted)[1].read_text(), end="")
        return
    if not out:
        raise BenchprofError("--out: several builds need a folder for their summary")
    print(write_effects_over_builds(paths, planted, Path(out))[1].read_text(), end="")


if __name__ == "__main__":
    run_script(planted_effects)
