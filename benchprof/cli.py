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

Every stage is a function `stage(cfg: Config, ...)`; this layer reads config.yml once and calls it.
Stage modules import torch and friends inside their functions, so `benchprof --help` is instant.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from collections.abc import Callable

from . import BenchprofError
from .aggregate import aggregate
from .config import load_config
from .damage import damage
from .data import data
from .evaluate import evaluate
from .extract import extract
from .finetune import finetune
from .run import run
from .specificity import overlap
from .status import status

STAGES: dict[str, Callable[..., None]] = {
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


def command(stage: Callable[..., None]) -> Callable[..., None]:
    """The command-line face of a stage: the same options and --help, with the config's path first.

    The stage's first parameter (`cfg: Config`) becomes `config: str = "config.yml"`, loaded and
    checked once here before the stage runs.
    """
    signature = inspect.signature(stage)
    first, *rest = signature.parameters.values()
    path = first.replace(name="config", annotation=str, default="config.yml")

    @functools.wraps(stage)
    def call(config: str = "config.yml", *args: object, **kwargs: object) -> None:
        stage(load_config(config), *args, **kwargs)

    call.__signature__ = signature.replace(parameters=[path, *rest])  # type: ignore[attr-defined]
    call.__doc__ = (stage.__doc__ or "").replace(f"        {first.name}: the config", "        config: the config")
    del call.__wrapped__  # fire reads __signature__ and this docstring, not the stage's own
    return call


COMMANDS = {name: command(stage) for name, stage in STAGES.items()}


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
