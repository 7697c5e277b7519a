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
  benchprof compare a.yml --against b.yml   profiles of models from several configs side by side
  benchprof frontier                neuron regions: own-split damage against other splits and random (lab/)
  benchprof spikes                  the claim rule's reach: benchmarks spiked with an ability's documents (lab/)

Every stage is a function `stage(cfg: Config, ...)`; this layer reads config.yml once and calls it.
Stage modules import torch and friends inside their functions, so `benchprof --help` is instant.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import re
import sys
import textwrap
from collections.abc import Callable

from benchprof import BenchprofError, __version__
from benchprof.core.config import Config, ModelSpec
from benchprof.core.console import quiet
from benchprof.core.layout import Layout
from benchprof.core.loader import load_config
from benchprof.core.locks import folder_lock
from benchprof.core.modeling import use_threads
from benchprof.lab.frontier import frontier
from benchprof.lab.spikes import spikes
from benchprof.stages.aggregate import aggregate
from benchprof.stages.compare import compare
from benchprof.stages.damage import damage
from benchprof.stages.data import data
from benchprof.stages.evaluate import evaluate
from benchprof.stages.extract import extract
from benchprof.stages.finetune import finetune
from benchprof.stages.overlap import overlap
from benchprof.stages.run import run
from benchprof.stages.status import status


def adopt_results(cfg: Config, spec: ModelSpec, dry_run: bool = False) -> None:
    """A model whose outputs folder does not exist yet (a new or changed `tag:`) gets the results of the folder
    that holds the same checkpoint (modeling.same_model_folder), linked, so a tag change redoes nothing. A dry
    run only says so and writes nothing."""
    from benchprof.core.modeling import link_results
    from benchprof.stages.status import same_checkpoint_folder

    target = Layout(cfg.output_root, spec.tag).model_dir
    if target.exists() or (found := same_checkpoint_folder(cfg, spec)) is None:
        return
    if dry_run:
        print(f"{spec.tag}: same checkpoint as {cfg.output_root / found}; a run would link its results first")
        return
    linked = link_results(cfg.output_root / found, target)
    print(
        f"{spec.tag}: same checkpoint as {cfg.output_root / found}; its {linked} result files linked "
        "(only what this config asks differently is redone)"
    )


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
    "compare": compare,
    "frontier": frontier,
    "spikes": spikes,
}


def writes_model_folders(name: str, options: dict[str, object]) -> bool:
    """Whether a command writes under the models' outputs folders, and so holds their locks: not
    status, data or compare (it writes its own folder), not damage without --save, not an evaluate shard
    (shards run side by side by design, one writer per job), not the ranks above 0 of a launched finetune
    (rank 0 writes)."""
    if name in ("status", "data", "compare") or (name == "damage" and not options.get("save")):
        return False
    if name == "evaluate" and options.get("shard") is not None:
        return False
    return os.environ.get("RANK", "0") == "0"


def command(name: str, stage: Callable[..., None]) -> Callable[..., None]:
    """The command-line face of a stage: the same options and --help, with the config's path first.

    The stage's first parameter (`cfg: Config`) becomes `config: str = "config.yml"`, loaded and
    checked once here before the stage runs, under the lock of each model folder it writes.
    """
    signature = inspect.signature(stage)
    first, *rest = signature.parameters.values()
    path = first.replace(name="config", annotation=str, default="config.yml")
    own_verbose = "verbose" in signature.parameters  # status has its own --verbose
    if not own_verbose:
        rest.append(inspect.Parameter("verbose", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=bool))
    cli_signature = signature.replace(parameters=[path, *rest])

    @functools.wraps(stage)
    def call(*args: object, **kwargs: object) -> None:
        bound = cli_signature.bind(*args, **kwargs)  # fire passes options by position too
        options = dict(bound.arguments)
        config = str(options.pop("config", "config.yml"))
        for option, value in options.items():
            if cli_signature.parameters[option].annotation in (bool, "bool") and not isinstance(value, bool):
                options[option] = parse_bool(option, value)
        verbose = bool(options.get("verbose")) if own_verbose else bool(options.pop("verbose", False))
        cfg = load_config(config)
        use_threads(cfg.settings.thread_count())
        with contextlib.ExitStack() as locks:
            model = options.get("model")
            specs = cfg.selected_models(str(model) if model is not None else None)
            if writes_model_folders(name, options):
                for spec in specs:
                    adopt_results(cfg, spec, dry_run=bool(options.get("dry_run")))
            if name != "status" and not options.get("dry_run"):  # status prints only its own lines
                # before the locks, which create the model folders: a log only where work was done
                logs = [Layout(cfg.output_root, spec.tag).log_file(name) for spec in specs]
                locks.enter_context(quiet(name, logs, verbose))
            if writes_model_folders(name, options):
                for spec in specs:
                    locks.enter_context(folder_lock(Layout(cfg.output_root, spec.tag).model_dir, f"benchprof {name}"))
            stage(cfg, **options)

    call.__signature__ = cli_signature  # type: ignore[attr-defined]
    call.__doc__ = (stage.__doc__ or "").replace(f"        {first.name}: the config", "        config: the config")
    if not own_verbose:
        call.__doc__ += (
            "\n        verbose: show the libraries' own progress bars, logs and warnings on the terminal"
            " (default: in outputs/<model>/logs/<command>.log, each distinct warning shown once with a count).\n"
        )
    del call.__wrapped__  # fire reads __signature__ and this docstring, not the stage's own
    return call


COMMANDS = {name: command(name, stage) for name, stage in STAGES.items()}
# one example per command, shown by its --help (tests/test_cli.py runs each one's argument check)
EXAMPLES = {
    "run": "benchprof run configs/demo.yml",
    "data": "benchprof data configs/demo.yml --ability Quantitative_Reasoning",
    "finetune": "benchprof finetune configs/demo.yml --ability Quantitative_Reasoning",
    "extract": "benchprof extract configs/demo.yml --k 0.01024",
    "overlap": "benchprof overlap configs/demo.yml",
    "damage": "benchprof damage configs/demo.yml --k 0.03 --region top",
    "evaluate": "benchprof evaluate configs/demo.yml --benchmark Quantitative_Reasoning --force",
    "aggregate": "benchprof aggregate configs/demo.yml --report_k 0.03",
    "status": "benchprof status configs/demo.yml --verbose",
    "compare": "benchprof compare configs/demo.yml --against my.yml",
    "frontier": "benchprof frontier configs/demo.yml --ability Quantitative_Reasoning,Long_Term_Knowledge",
    "spikes": "benchprof spikes configs/demo.yml --benchmark quant_knowledge_mix --fractions 0.1,0.2",
}
HELP_WIDTH = 100


def _paragraphs(text: str) -> tuple[str, dict[str, str]]:
    """A stage's docstring as (its description, parameter -> its line of `Arguments:`, continuation lines joined)."""
    doc = inspect.cleandoc(text)
    description, _, arguments = doc.partition("\nArguments:\n")
    described: dict[str, str] = {}
    current = ""
    for line in arguments.splitlines():
        match = re.match(r"^    (\w+): (.*)$", line)
        if match:
            current = match.group(1)
            described[current] = match.group(2).strip()
        elif current and line.strip():
            described[current] += " " + line.strip()
    return description.strip(), described


def command_help(name: str) -> str:
    """`benchprof NAME --help`: usage with the positional config, each option's meaning, and an example."""
    parameters = list(inspect.signature(COMMANDS[name]).parameters.values())
    description, described = _paragraphs(COMMANDS[name].__doc__ or "")
    flags = [f"[{_flag(p)}]" for p in parameters[1:]]
    usage = textwrap.fill(
        " ".join([f"usage: benchprof {name} [CONFIG]", *flags]), HELP_WIDTH, subsequent_indent=" " * 7
    )
    lines = [usage, ""]
    for paragraph in description.split("\n\n"):
        lines += [textwrap.fill(" ".join(paragraph.split()), HELP_WIDTH), ""]
    lines.append("arguments:")
    config_help = described.get("config", "the config file").replace(
        " (on the command line: the path of config.yml)", ""
    )
    lines.append(_option_line("CONFIG", f"{config_help.rstrip('.')} (default config.yml)"))
    lines.append("options:")
    for p in parameters[1:]:
        lines.append(_option_line(_flag(p), described.get(p.name, "")))
    lines += ["", "example:", f"  {EXAMPLES[name]}"]
    return "\n".join(lines)


def _flag(parameter: inspect.Parameter) -> str:
    """An option as help shows it: --force (a boolean, off by default), --nooriginal (on by default), --k K."""
    if parameter.annotation in (bool, "bool"):
        return f"--no{parameter.name}" if parameter.default is True else f"--{parameter.name}"
    return f"--{parameter.name} {parameter.name.upper()}"


def _option_line(name: str, text: str) -> str:
    head = f"  {name:<24}" if len(name) < 24 else f"  {name}\n" + " " * 26
    return textwrap.fill(text, HELP_WIDTH, initial_indent=head, subsequent_indent=" " * 26, drop_whitespace=True)


def main_help() -> str:
    """`benchprof --help`: the commands, one line each, then the README's two starting points."""
    lines = [
        f"usage: benchprof COMMAND [CONFIG] [OPTIONS]     benchprof {__version__}",
        "",
        "Which abilities an LLM benchmark really measures (Benchmark Profiling, Kim et al., EMNLP 2025).",
        "",
        "commands:",
    ]
    for name, stage in COMMANDS.items():
        description, _ = _paragraphs(stage.__doc__ or "")
        sentence = " ".join(description.split("\n\n")[0].split()).split(": for every")[0].split(". ")[0]
        lines.append(f"  {name:<11}" + textwrap.shorten(sentence.rstrip("."), HELP_WIDTH, placeholder=" ..."))
    lines += [
        "",
        "`benchprof COMMAND --help` shows a command's options and an example; `benchprof --version` the version.",
        "examples:",
        "  benchprof run configs/demo.yml             the demo, end to end",
        "  benchprof extract configs/demo.yml --k 0.01024",
        "  ./run.sh -e configs/demo.yml               evaluation and aggregation only",
    ]
    return "\n".join(lines)


TRUE, FALSE = ("true", "yes", "1"), ("false", "no", "0")


def parse_bool(name: str, value: object) -> bool:
    """A boolean option's value, strictly: --force=false is False, --force=maybe an error."""
    text = str(value).strip().lower()
    if text in TRUE or text in FALSE:
        return text in TRUE
    raise BenchprofError(f"--{name}: {value!r} is not true or false")


def is_flag(arg: str) -> bool:
    """fire's reading of an argument as an option (--k, -k) rather than a value (0.01, -1)."""
    return arg.startswith("--") or re.match(r"-[A-Za-z]", arg) is not None


def bool_flags_alone(argv: list[str]) -> list[str]:
    """argv with each boolean option given without a value (`--dry_run`) written `--dry_run=true` when a
    non-boolean argument follows it: fire would read `run --dry_run cfg.yml` as dry_run='cfg.yml'."""
    if not argv or argv[0] not in COMMANDS:
        return argv
    parameters = inspect.signature(COMMANDS[argv[0]]).parameters
    out = argv[:1]
    for i, arg in enumerate(argv[1:], 1):
        option = arg[2:].replace("-", "_") if arg.startswith("--") and "=" not in arg else ""
        following = argv[i + 1] if i + 1 < len(argv) else ""
        if (
            option in parameters
            and parameters[option].annotation in (bool, "bool")
            and following
            and not is_flag(following)
            and following.strip().lower() not in TRUE + FALSE
        ):
            arg += "=true"
        out.append(arg)
    return out


def check_arguments(argv: list[str]) -> None:
    """Refuse, before anything runs, an unknown command or option, a non-boolean option without a value
    and extra positional arguments.

    fire would otherwise run the stage first and complain about the leftovers afterwards, and read an
    option given no value (`--k` last, or before another option) as True.
    """
    if not argv or argv[0].startswith("-"):
        return  # fire prints the command list
    name, *args = argv
    if name not in COMMANDS:
        raise BenchprofError(f"unknown command {name!r} (commands: {', '.join(COMMANDS)})")
    parameters = inspect.signature(COMMANDS[name]).parameters
    is_bool = {p: parameters[p].annotation in (bool, "bool") for p in parameters}  # config too: --config, -c
    positional = 0
    config_option = False  # the config given as --config (or -c) rather than by position
    takes_value = ""  # the option before, whose value the next argument is unless it is an option itself
    needs_value = False  # ... and that must have one: a non-boolean option
    boolean_before = False  # the argument before is a boolean option without =, which may take true or false
    for arg in args:
        if arg == "-h" or arg.startswith("--help"):
            return  # fire's own help
        if takes_value and not is_flag(arg):
            takes_value, needs_value = "", False  # the value of the option before it (--k 0.01, -k 0.01, --k -1)
            continue
        if boolean_before and arg.strip().lower() in TRUE + FALSE:
            boolean_before = False  # a boolean option's value (--plots false), as fire reads it
            continue
        boolean_before = False
        if needs_value:
            raise BenchprofError(f"{name}: {takes_value} needs a value")
        takes_value, needs_value = "", False
        if arg == "--":
            return  # fire's separator
        if arg.startswith("--"):
            option = arg[2:].split("=", 1)[0].replace("-", "_")
            if option not in is_bool and not (option.startswith("no") and is_bool.get(option[2:])):
                known = ", ".join(f"--{p}" for p in is_bool)
                raise BenchprofError(f"{name}: unknown option --{option} (options: {known})")
            if "=" not in arg and not is_bool.get(option, True):
                takes_value, needs_value = f"--{option}", True
            boolean_before = "=" not in arg and is_bool.get(option, False)
            config_option = config_option or option == "config"
        elif is_flag(arg):  # a short flag: fire reads -k as the one option starting with k, else complains
            matches = [p for p in is_bool if p.startswith(arg[1])]
            takes_value = arg if "=" not in arg else ""
            needs_value = bool(takes_value) and len(arg) == 2 and len(matches) == 1 and not is_bool[matches[0]]
            config_option = config_option or matches == ["config"]
        else:
            positional += 1
            if positional > 1:
                raise BenchprofError(f"{name}: unexpected argument {arg!r} (the config file is the only one)")
        if config_option and positional:
            raise BenchprofError(f"{name}: the config file is given twice (by position and as --config)")
    if needs_value:
        raise BenchprofError(f"{name}: {takes_value} needs a value")


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `benchprof` console script."""
    import fire

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    argv = sys.argv[1:] if argv is None else argv
    rank = "TORCHELASTIC_RUN_ID" in os.environ and argv[:1] == ["finetune"]  # an importance rank of torchrun
    if rank:
        from benchprof.stages.sharding import die_with_launcher

        die_with_launcher()  # first: a rank whose torchrun is killed ends too
    try:
        if not argv or argv[0] in ("-h", "--help", "help"):
            print(main_help())
            return
        if argv[0] == "--version":
            print(f"benchprof {__version__}")
            return
        if argv[0] in COMMANDS and any(a in ("-h", "--help") for a in argv[1:]):
            print(command_help(argv[0]))
            return
        argv = bool_flags_alone(argv)
        check_arguments(argv)
        # fire prints a stage's return value; stages return None and print their own summary
        fire.Fire(COMMANDS, command=argv, name="benchprof")
        sys.stdout.flush()  # here, where a reader that left (`| head`) is caught below, not at the interpreter's exit
        if rank:  # its files written and closed
            # skip the interpreter's teardown, where gloo's destructors aborted about one 2-process run in six
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
    except BenchprofError as err:
        for line in str(err).splitlines() or [type(err).__name__]:  # preflight reports one line per problem
            print(f"benchprof: error: {line}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("benchprof: interrupted; rerun the same command to resume", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:  # `benchprof status | head`: the reader has what it wanted; the rest goes nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)  # as a process killed by SIGPIPE (128 + 13), like `yes | head`
    except OSError as err:  # an I/O failure no stage put in its own words (a folder where a file goes): one line
        print(f"benchprof: error: {io_failure(err)}; rerun the same command to resume", file=sys.stderr)
        sys.exit(1)


def io_failure(err: OSError) -> str:
    """An OSError in one line: the file(s) it names, the system's reason and the error's type."""
    files = " -> ".join(str(f) for f in (err.filename, err.filename2) if f is not None)
    why = err.strerror or (str(err).splitlines() or ["?"])[0]
    return f"{files + ': ' if files else ''}{why} ({type(err).__name__})"


if __name__ == "__main__":  # `accelerate launch -m benchprof.cli …` as well as `-m benchprof`
    main()
