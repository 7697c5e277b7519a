"""The GPU self-check's CPU reference (benchprof/assets/selfcheck_reference.json): what a finished demo run is
compared on (sampled top regions, original scores, headline AIS rows), the config values it was written from, and
how it is written (`python -m benchprof.lab.selfcheck --write-reference` after `benchprof run configs/demo.yml`)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchprof.core.layout import Layout, format_k

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from benchprof.core.config import Config

PACKAGE = Path(__file__).resolve().parents[1]  # benchprof/, whose assets/ holds the reference
DEMO_CONFIG = PACKAGE.parent / "configs" / "demo.yml"
REFERENCE = PACKAGE / "assets" / "selfcheck_reference.json"
SAMPLE_BITS = 6  # keep a position when the top 6 bits of its hash are 0: 1 in 64
GOLDEN = 0x9E3779B97F4A7C15  # odd multiplier of Fibonacci hashing


def sampled(name: str, indices: NDArray[np.int64]) -> list[int]:
    """The positions of one tensor's region that fall in the fixed 1/64 sample, sorted."""
    import numpy as np

    seed = np.uint64(int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little"))
    values = np.asarray(indices, dtype=np.uint64)
    with np.errstate(over="ignore"):  # multiplication modulo 2**64 is the hash
        keys = values * np.uint64(GOLDEN) + seed
    return sorted(int(v) for v in values[(keys >> np.uint64(64 - SAMPLE_BITS)) == 0])


def summarize(cfg: Config, tag: str | None = None) -> dict[str, Any]:
    """What a finished run is compared on: sampled top regions, original scores, headline AIS rows."""
    from benchprof.core.regions import read_region

    spec = cfg.selected_models(tag)[0]
    layout = Layout(cfg.output_root, spec.tag)
    regions = {}
    for ability in cfg.abilities():
        for k in cfg.settings.k_values:
            indices, _ = read_region(layout.mask_file(ability, k, "top"))
            regions[f"{ability}/k{format_k(k)}/top"] = {
                name: sampled(name, idx.numpy()) for name, idx in sorted(indices.items())
            }
    profile = json.loads(layout.ais_json.read_text())
    metrics = profile["metrics"]
    ais = {
        f"{row['ability']}|{row['benchmark']}|{format_k(row['k'])}|{row['region']}": row["ais"]
        for row in profile["rows"]
        if row["region"] in ("top", "random") and row["metric"] == metrics.get(row["benchmark"])
    }
    return {"original": profile["original_scores"], "ais": ais, "regions": regions}


def jaccard(a: dict[str, list[int]], b: dict[str, list[int]]) -> float:
    inter = union = 0
    for name in set(a) | set(b):
        first, second = set(a.get(name, [])), set(b.get(name, []))
        inter += len(first & second)
        union += len(first | second)
    return inter / union if union else 1.0


def reference_inputs(config: Path) -> dict[str, Any]:
    """The parts of `config` a reference's regions and scores depend on (not its paths or devices): a reference
    written from other values is stale, and a GPU run compared with it would fail for no fault of the GPU."""
    import yaml

    raw = yaml.safe_load(Path(config).read_text())
    settings, evals = raw.get("settings", {}), raw.get("evals", {})
    return {
        "k_values": settings.get("k_values"),
        "seed": settings.get("seed"),
        "datasets": [d["name"] for d in raw.get("datasets", [])],
        "benchmarks": evals.get("benchmarks"),
        "composites": evals.get("composites"),
        "data": {key: value for key, value in raw.get("data", {}).items() if key != "dir"},
        "finetune": {key: value for key, value in raw.get("finetune", {}).items() if key != "dtype"},
        "extract": raw.get("extract", {}),
    }


def stale_inputs(reference: dict[str, Any], config: Path) -> list[str]:
    """The inputs (reference_inputs keys) where `config` differs from what `reference` was written from."""
    recorded, now = reference.get("inputs", {}), reference_inputs(config)
    return [key for key in now if recorded.get(key) != now[key]]


def write_reference(config: Path = DEMO_CONFIG, path: Path = REFERENCE) -> dict[str, Any]:
    """The reference from a finished CPU run of `config` (its own outputs folder), as JSON at `path`."""
    import torch

    from benchprof.core.loader import load_config

    cfg = load_config(config)
    reference = {
        "made_by": "benchprof run configs/demo.yml && python -m benchprof.lab.selfcheck --write-reference",
        "config": str(Path(config).name),
        "dtype": "float32",
        "device": "cpu",
        "torch": torch.__version__,
        "sample": f"positions whose hash (index * {GOLDEN:#x} + sha256(tensor name)) has its top {SAMPLE_BITS} bits 0",
        "inputs": reference_inputs(config),
        **summarize(cfg),
    }
    Path(path).write_text(json.dumps(reference, sort_keys=True, separators=(",", ":")) + "\n")
    return reference
