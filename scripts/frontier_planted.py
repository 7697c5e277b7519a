#!/usr/bin/env python
"""Each neuron score of benchprof frontier against a planted model's neurons (lab/frontier.py planted_recovery).

.venv/bin/python scripts/frontier_planted.py /tmp/demo-planted [items] [threads]
"""

import sys
from pathlib import Path

from benchprof.lab.frontier import planted_recovery

if __name__ == "__main__":
    items = int(sys.argv[2]) if len(sys.argv) > 2 else 120
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    print("| option | ability | AUROC | top-neuron precision | chance |\n|---|---|---|---|---|")
    for r in planted_recovery(Path(sys.argv[1]), items, threads):
        figures = f"{r['auroc']:.3f} | {r['top_neuron_precision']:.3f} | {r['chance']:.3f}"
        print(f"| {r['option']} | {r['ability']} | {figures} |")
