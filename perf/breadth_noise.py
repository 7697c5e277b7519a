"""The breadth control's line noise (profile.breadth.line_noise) on a committed profile: computed once per line and
shared by every real benchmark at k whose line holds the same regions (apply_breadth's cache), against once per
(k, benchmark) line as the straightforward loop does. Both must give the same noise for every line (the script stops
otherwise); the figures are the wall time of computing every line's breadths and noise, each way, in one run.

    .venv/bin/python perf/breadth_noise.py [docs/results/profile-qwen2.5-0.5b-claims] [--repeats 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchprof.lab.rederive import folder_config
from benchprof.profile.breadth import line_breadths, top_random_rows
from benchprof.profile.documents import DOCUMENTS, unpack_documents
from benchprof.profile.rows import P_CORRECT
from benchprof.stages.profile_scores import ScoreRun, load_scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", default="docs/results/profile-qwen2.5-0.5b-claims")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    folder = Path(args.folder)
    with tempfile.TemporaryDirectory(prefix="benchprof-perf-") as root:
        cfg = folder_config(folder, Path(root))
        tag = cfg.models[0].tag
        unpack_documents(folder / DOCUMENTS, Path(root) / tag)
        runs: list[ScoreRun] = []
        profile = load_scores(cfg, tag, progress=False, run_out=runs)
    run = runs[0]
    docs = (run.p_original_docs, run.p_ablated_docs)
    lines: dict[tuple[float, str], list[tuple[str, str]]] = {}
    for ability, k, benchmark, top in top_random_rows(profile):
        if benchmark not in profile.at_chance:
            lines.setdefault((k, benchmark), []).append((ability, top))

    def every_line(shared: bool) -> list[list[float] | None]:
        cache: dict = {}
        return [
            line_breadths(profile, line, k, benchmark, docs, P_CORRECT, cache if shared else None)[1]
            for (k, benchmark), line in lines.items()
        ]

    times: dict[bool, list[float]] = {True: [], False: []}
    results = {}
    for _ in range(args.repeats):
        for shared in (False, True):
            started = time.perf_counter()
            results[shared] = every_line(shared)
            times[shared].append(time.perf_counter() - started)
    if results[True] != results[False]:
        raise SystemExit("the cached line noise differs from the line-by-line one")
    straightforward, cached = min(times[False]), min(times[True])
    print(f"{folder.name}: {len(lines)} lines (k, benchmark), p_correct")
    print(f"  once per line (straightforward): {straightforward:.2f} s")
    print(f"  once per distinct line (cached): {cached:.2f} s  ({straightforward / cached:.1f}x)")


if __name__ == "__main__":
    main()
