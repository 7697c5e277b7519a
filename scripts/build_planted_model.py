#!/usr/bin/env python
"""Build benchprof's planted model: a small Llama whose abilities live in known MLP neurons (issue 19).

A base model learns the abilities' prompt formats with answers shuffled between items (chance accuracy),
with the reserved neurons held at zero; then each ability's disjoint reserved neurons R_a (rows of
gate/up, columns of down, in --layers) are trained alone on that ability's real data, every other
weight reset to its base value after each step (benchprof/planting.py has the detail). Saves the
model, its tokenizer, planted/<ability>.safetensors (region format) and planted.json, then runs the
own check: zeroing R_a against zeroing an equal random set of weights and of base neurons.

    python scripts/build_planted_model.py                       # writes benchprof/assets/planted-model
    python scripts/build_planted_model.py --base-steps 50 --plant-steps 30 --out /tmp/p   # a smoke run
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchprof.planted import PlantSettings
from benchprof.planting import build

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_ABILITIES = "Commonsense_Causal,Long_Term_Knowledge,Analogical_Reasoning,Semantic_Relationship"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=str(ROOT / "benchprof" / "assets" / "planted-model"))
    p.add_argument("--tokenizer", default=str(ROOT / "benchprof" / "assets" / "demo-model"))
    p.add_argument("--abilities", default=DEFAULT_ABILITIES)
    p.add_argument("--layers", default="1,2,3", help="decoder layers that hold the reserved neurons")
    p.add_argument("--neurons", type=int, default=32, help="reserved neurons per ability and layer")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--intermediate", type=int, default=384)
    p.add_argument("--num-layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--train-size", type=int, default=2000)
    p.add_argument("--test-size", type=int, default=200)
    p.add_argument("--data-seed", type=int, default=1234)
    p.add_argument("--base-steps", type=int, default=1000)
    p.add_argument("--plant-steps", type=int, default=500)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--base-lr", type=float, default=5e-3)
    p.add_argument("--plant-lr", type=float, default=1e-2)
    p.add_argument("--plant-init-std", type=float, default=0.1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--silence", type=float, default=1.0, help="penalty on other abilities' neurons firing")
    p.add_argument("--no-echo", action="store_true", help="base without the echo examples")
    p.add_argument("--no-check", action="store_true", help="skip the own check")
    p.add_argument("--base-cache", default="", help="reuse the base weights saved here (or save them there)")
    return p.parse_args()


def relative(path: Path) -> str:
    """A path inside the repository relative to its root (planted.json stays the same on every machine)."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def main() -> None:
    args = parse_args()
    settings = PlantSettings(
        abilities=[a for a in args.abilities.split(",") if a],
        layers=[int(x) for x in args.layers.split(",") if x],
        neurons_per_layer=args.neurons,
        hidden=args.hidden,
        intermediate=args.intermediate,
        num_layers=args.num_layers,
        heads=args.heads,
        train_size=args.train_size,
        test_size=args.test_size,
        data_seed=args.data_seed,
        base_steps=args.base_steps,
        plant_steps=args.plant_steps,
        batch_size=args.batch_size,
        base_lr=args.base_lr,
        plant_lr=args.plant_lr,
        plant_init_std=args.plant_init_std,
        seed=args.seed,
        echo=not args.no_echo,
        silence=args.silence,
        threads=args.threads,
        tokenizer=relative(Path(args.tokenizer)),
    )
    info = build(
        settings, Path(args.out), check=not args.no_check, bootstrap=args.bootstrap, base_cache=args.base_cache
    )
    print(json.dumps(info["test_accuracy"], indent=1))


if __name__ == "__main__":
    main()
