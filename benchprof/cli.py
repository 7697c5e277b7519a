"""benchprof command line: one subcommand per stage, each a documented function in its own module.

  benchprof run config.yml          every stage in order
  benchprof data                    generate the ten ability datasets
  benchprof finetune                importance scores |theta * sum of gradients| per ability
  benchprof extract --k 0.01024     top / bottom / random regions per ability and k (--score: docs/specificity.md)
  benchprof overlap                 how much the abilities' regions share, against chance (from the masks)
  benchprof damage --save           write ablated checkpoints (for vLLM or sharing)
  benchprof evaluate                lm-eval on the original model and every ablated variant
  benchprof aggregate               AIS tables, confidence intervals and plots
  benchprof status config.yml       what is done, stale and pending (no model weights loaded)

Stage modules import torch and friends inside their functions, so `benchprof --help` is instant.
"""

from __future__ import annotations

import os
import sys

from . import BenchprofError
from .aggregate import aggregate
from .damage import damage
from .data import data
from .evaluate import evaluate
from .extract import extract
from .finetune import finetune
from .run import run
from .specificity import overlap
from .status import status

COMMANDS = {
    "run": run,
    "data": data,
    "finetune": finetune,
    "extract": extract,
    "overlap": overlap,
    "damage": damage,
    "evaluate": evaluate,
    "aggregate": aggregate,
    "status": status,
}


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `benchprof` console script."""
    import fire

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    argv = sys.argv[1:] if argv is None else argv
    try:
        # fire prints a stage's return value; stages return None and print their own summary
        fire.Fire(COMMANDS, command=argv, name="benchprof")
    except BenchprofError as err:
        for line in str(err).splitlines() or [type(err).__name__]:  # preflight reports one line per problem
            print(f"benchprof: error: {line}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("benchprof: interrupted; rerun the same command to resume", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":  # `accelerate launch -m benchprof.cli …` as well as `-m benchprof`
    main()
