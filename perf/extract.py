"""Time and memory of `extract`'s streamed exact selection against concatenate-and-topk.

Builds a synthetic importance file (8 layers x 3 MLP tensors, >= --params fp32 scores) in a
temporary folder (three, one per ability, for an ability-specific --score), then runs each method in
its own subprocess and reports wall time and the subprocess's peak RSS (getrusage ru_maxrss), plus a
baseline subprocess that only imports torch and benchprof and opens the files (for an ability-specific
score, opening includes its pre-pass over the three files, so the baseline holds that too). The parent never loads
the scores itself, since a child's ru_maxrss starts from its parent's RSS at fork. The methods: the
exact selection streaming the scores on each of its three passes, the same holding them in memory
after the first pass (scores.held, what extract does below HELD_SCORES_BYTES), and concatenate + topk.
All must select the same top and bottom index sets (up to ties at the threshold score, which only the
streamed method breaks deterministically).

    python perf/extract.py                      # 200 M eligible scores, k = 0.01024
    python perf/extract.py --params 50_000_000 --k 0.00256
    python perf/extract.py --params 20_000_000 --score rank    # held against streamed where it counts
    python perf/extract.py --mmap-threshold 1048576   # peak RSS without glibc's cached blocks
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from benchprof.core.config import SCORES
from benchprof.stages.extract import HELD_SCORES_BYTES

if TYPE_CHECKING:
    from benchprof.stages.weight_scores import Scores

LAYERS = 8
MLP = ("mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight")
MLP_SHARE = 0.7  # Llama-3.1-8B: 5.6 B of 8.0 B parameters are MLP weights; total_params = eligible / share


def build(path: Path, params: int, seed: int = 0) -> int:
    """Write the synthetic importance file; returns the number of eligible scores."""
    import torch

    from benchprof.core.storage import save_tensors

    hidden = 1024
    intermediate = math.ceil(params / (LAYERS * 3 * hidden))
    g = torch.Generator().manual_seed(seed)
    tensors = {}
    for layer in range(LAYERS):
        for suffix in MLP:
            shape = (hidden, intermediate) if "down" in suffix else (intermediate, hidden)
            # heavy-tailed positive scores, like |theta * g|; drawn in fp64 so ties are rare
            tensors[f"model.layers.{layer}.{suffix}"] = (
                torch.rand(shape, generator=g, dtype=torch.float64).log().neg()
                * torch.rand(shape, generator=g, dtype=torch.float64)
            ).float()
    eligible = sum(t.numel() for t in tensors.values())
    save_tensors(
        path,
        tensors,
        {
            "total_params": str(int(eligible / MLP_SHARE)),
            "n_layers": str(LAYERS),
            "scope": "mlp",
            "fingerprint": "synthetic",
        },
    )
    return eligible


def files(path: Path, score: str) -> list[Path]:
    """The importance files of the run: one, or one per ability for an ability-specific score."""
    return [path] if score == "importance" else [path.with_name(f"{path.stem}-{i}.safetensors") for i in range(3)]


def open_for(path: Path, score: str) -> Scores:
    from benchprof.stages.weight_scores import open_specific_scores

    own, *others = files(path, score)
    return open_specific_scores(score, own, {f"b{i}": p for i, p in enumerate(others)})


def child(mode: str, path: Path, k: float, out: Path, score: str) -> None:
    """One measured run; writes its selection (sorted global positions) and figures to `out`."""
    import numpy as np
    import torch

    from benchprof.stages.weight_scores import held
    from benchprof.stages.weight_selection import exact_regions

    scores = open_for(path, score)
    n = math.floor(k * int(scores.metadata["total_params"]))
    started = time.perf_counter()
    if mode in ("streamed", "held"):
        if mode == "held":
            scores = held(scores, HELD_SCORES_BYTES)
        regions = exact_regions(scores, {"top": (n, True), "bottom": (n, False)})
        positions = {}
        for region, selected in regions.items():
            parts = [selected[name] + offset for name, offset in zip(scores.names, scores.offsets) if name in selected]
            positions[region] = torch.cat(parts).numpy()
    elif mode == "brute":
        everything = torch.cat([values for _, values in scores])
        positions = {
            "top": torch.topk(everything, n).indices.sort().values.numpy(),
            "bottom": torch.topk(everything, n, largest=False).indices.sort().values.numpy(),
        }
    else:
        positions = {}
    seconds = time.perf_counter() - started
    for region, values in positions.items():
        np.save(out / f"{mode}_{region}.npy", values)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    (out / f"{mode}.json").write_text(json.dumps({"seconds": seconds, "peak_mb": peak_mb, "n": n}))


def measure(mode: str, path: Path, k: float, out: Path, env: dict, score: str) -> dict:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, __file__, "--child", mode, "--file", str(path), "--k", str(k), "--out", str(out)]
        + ["--score", score],
        check=True,
        env=env,
    )
    figures = json.loads((out / f"{mode}.json").read_text())
    figures["wall"] = time.perf_counter() - started
    return figures


def same_selection(path: Path, out: Path, region: str, score: str, other: str = "brute") -> str:
    """'identical', or whether the two index sets differ only among scores tied at the threshold."""
    import numpy as np
    import torch

    a, b = np.load(out / f"streamed_{region}.npy"), np.load(out / f"{other}_{region}.npy")
    if np.array_equal(a, b):
        return "identical"
    everything = torch.cat([values for _, values in open_for(path, score)]).numpy()
    threshold = everything[a].min() if region == "top" else everything[a].max()
    differ = np.setxor1d(a, b)
    tied_only = len(a) == len(b) and bool((everything[differ] == threshold).all())
    return f"{len(differ)} positions differ, {'all tied at the threshold' if tied_only else 'NOT ties: MISMATCH'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=int, default=200_000_000, help="eligible scores (at least)")
    parser.add_argument("--k", type=float, default=0.01024, help="fraction of total parameters")
    parser.add_argument(
        "--mmap-threshold",
        type=int,
        default=0,
        help="set MALLOC_MMAP_THRESHOLD_ for the measured runs (e.g. 1048576): glibc then "
        "returns freed large blocks at once, so peak RSS shows the working set rather "
        "than what the allocator keeps cached",
    )
    parser.add_argument(
        "--score", default="importance", choices=SCORES, help="an ability-specific score reads three importance files"
    )
    parser.add_argument("--child", choices=["build", "streamed", "held", "brute", "baseline"], help=argparse.SUPPRESS)
    parser.add_argument("--file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "build":
        print(sum(build(f, args.params, seed) for seed, f in enumerate(files(args.file, args.score))))
        return
    if args.child:
        child(args.child, args.file, args.k, args.out, args.score)
        return

    if 4 * args.params > HELD_SCORES_BYTES:
        sys.exit(f"--params {args.params:,}: past HELD_SCORES_BYTES the held run would stream too; lower it")
    with tempfile.TemporaryDirectory(prefix="benchprof-extract-") as tmp:
        tmp = Path(tmp)
        path = tmp / "importance.safetensors"
        started = time.perf_counter()
        # built in a subprocess: Linux keeps ru_maxrss across fork + exec, so the measured children
        # must start from a parent that never held the scores
        eligible = int(
            subprocess.run(
                [sys.executable, __file__, "--child", "build", "--file", str(path), "--params", str(args.params)]
                + ["--score", args.score],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.split()[-1]
        )
        paths = files(path, args.score)
        eligible //= len(paths)
        if 4 * eligible > HELD_SCORES_BYTES:
            sys.exit(f"{eligible:,} scores: past HELD_SCORES_BYTES the held run would stream too; lower --params")
        print(
            f"synthetic importance: {len(paths)} file(s) of {eligible:,} eligible fp32 scores in {LAYERS * 3} "
            f"tensors ({paths[0].stat().st_size / 2**20:,.0f} MiB each), built in "
            f"{time.perf_counter() - started:.0f}s; score {args.score}"
        )
        env = dict(os.environ)
        if args.mmap_threshold:
            env["MALLOC_MMAP_THRESHOLD_"] = str(args.mmap_threshold)
            print(f"measured runs with MALLOC_MMAP_THRESHOLD_={args.mmap_threshold}")
        baseline = measure("baseline", path, args.k, tmp, env, args.score)
        streamed = measure("streamed", path, args.k, tmp, env, args.score)
        kept = measure("held", path, args.k, tmp, env, args.score)
        brute = measure("brute", path, args.k, tmp, env, args.score)
        n = streamed["n"]
        print(f"k = {args.k}: n = {n:,} per region (top and bottom)")
        print(f"{'method':<28}{'select s':>10}{'process s':>11}{'peak RSS MiB':>14}{'above baseline':>16}")
        for name, fig in (
            ("baseline (import + open)", baseline),
            ("streamed exact", streamed),
            ("held exact (benchprof)", kept),
            ("concatenate + torch.topk", brute),
        ):
            print(
                f"{name:<28}{fig['seconds']:>10.2f}{fig['wall']:>11.1f}{fig['peak_mb']:>14,.0f}"
                f"{fig['peak_mb'] - baseline['peak_mb']:>16,.0f}"
            )
        extra_streamed = streamed["peak_mb"] - baseline["peak_mb"]
        extra_brute = brute["peak_mb"] - baseline["peak_mb"]
        extra_kept = kept["peak_mb"] - baseline["peak_mb"]
        print(
            f"time ratio streamed / brute: {streamed['seconds'] / brute['seconds']:.2f}; "
            f"peak memory above baseline, brute / streamed: {extra_brute / max(extra_streamed, 1):.1f}x"
        )
        print(
            f"held against streamed: {streamed['seconds'] / kept['seconds']:.2f}x faster, "
            f"{extra_kept / max(extra_streamed, 1):.1f}x the peak memory above baseline"
        )
        for region in ("top", "bottom"):
            for other in ("brute", "held"):
                same = same_selection(path, tmp, region, args.score, other)
                print(f"{region} index sets, streamed / {other}: {same}")


if __name__ == "__main__":
    main()
