#!/usr/bin/env python
"""Each neuron score of benchprof frontier against planted models' neurons (lab/frontier.py planted_recovery):
one row per option and planted ability of each build, then, with several builds, the mean over builds of a
build's mean over its abilities [95% t interval over builds, clipped to [0, 1]] (lab/validation.py share_interval).

.venv/bin/python scripts/frontier_planted.py /tmp/demo-planted[,/tmp/m1,/tmp/m2] [items] [threads] [options]
(options: comma-separated neuron scores, default every one of stages/neurons.py FRONTIER_SCORES)
"""

import sys
import time
from pathlib import Path

from benchprof.lab.frontier_planted import planted_recovery, recovery_over_builds
from benchprof.stages.neurons import FRONTIER_SCORES

if __name__ == "__main__":
    folders = [Path(f) for f in sys.argv[1].split(",")]
    items = int(sys.argv[2]) if len(sys.argv) > 2 else 120
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    options = sys.argv[4].split(",") if len(sys.argv) > 4 else list(FRONTIER_SCORES)
    builds = []
    print("| build | option | ability | AUROC | top-neuron precision | chance |\n|---|---|---|---|---|---|")
    for folder in folders:
        started = time.time()
        builds.append(planted_recovery(folder, items, threads, options))
        for r in builds[-1]:
            figures = f"{r['auroc']:.3f} | {r['top_neuron_precision']:.3f} | {r['chance']:.4f}"
            print(f"| {folder.name} | {r['option']} | {r['ability']} | {figures} |")
        print(f"({folder}: {time.time() - started:.0f} s)", file=sys.stderr)
    if len(builds) > 1:
        print(f"\n| option | AUROC [95% t over {len(builds)} builds] | top-neuron precision [95%] |\n|---|---|---|")
        for option, figures in recovery_over_builds(builds).items():
            shown = [f"{m:.3f} [{lo:.3f}, {hi:.3f}]" for m, lo, hi in figures]
            print(f"| {option} | {' | '.join(shown)} |")
