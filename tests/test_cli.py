"""The command line: a typo or an extra argument fails before any work, booleans parse strictly, and
every stage's --help is its docstring with the config path first; run.sh's own arguments."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from benchprof import BenchprofError
from benchprof.cli import COMMANDS, STAGES, bool_flags_alone, check_arguments, parse_bool

ROOT = Path(__file__).resolve().parents[1]


def test_every_stage_is_a_command_with_the_config_path_first():
    import inspect

    for name, stage in STAGES.items():
        stage_params = list(inspect.signature(stage).parameters)
        cli_params = list(inspect.signature(COMMANDS[name]).parameters)
        assert stage_params[0] == "cfg" and cli_params[0] == "config", name
        # every command also takes --verbose (console.py); status has its own
        extra = [] if "verbose" in stage_params else ["verbose"]
        assert cli_params[1:] == stage_params[1:] + extra, name
        assert "config: the config" in COMMANDS[name].__doc__ and "verbose:" in COMMANDS[name].__doc__, name


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "c.yml", "--dryrun"], "run: unknown option --dryrun"),
        (["run", "c.yml", "extra"], "run: unexpected argument 'extra'"),
        (["extract", "c.yml", "--k", "0.01", "more"], "extract: unexpected argument 'more'"),
        (["bogus"], "unknown command 'bogus'"),
        # a non-boolean option with no value: fire would read it as True
        (["extract", "c.yml", "--k"], "extract: --k needs a value"),
        (["evaluate", "c.yml", "--limit", "--force"], "evaluate: --limit needs a value"),
        (["evaluate", "--benchmark", "--", "c.yml"], "evaluate: --benchmark needs a value"),
        (["extract", "c.yml", "-k"], "extract: -k needs a value"),
        (["run", "--config"], "run: --config needs a value"),
        (["run", "a.yml", "--config", "b.yml"], r"run: the config file is given twice \(by position and as --config\)"),
        (["run", "--config=a.yml", "b.yml"], "run: the config file is given twice"),
        (["run", "-c", "a.yml", "b.yml"], "run: the config file is given twice"),
    ],
)
def test_bad_arguments_are_refused_before_anything_runs(argv, message):
    with pytest.raises(BenchprofError, match=message):
        check_arguments(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "c.yml", "--dry_run"],
        ["run", "--dry-run", "c.yml"],
        ["aggregate", "c.yml", "--plots", "false"],  # a boolean's value after a space, as fire reads it
        ["aggregate", "--plots", "no", "c.yml"],
        ["run", "c.yml", "--noforce"],
        ["extract", "c.yml", "--k", "0.01", "--ability=Spatial_Reasoning"],
        ["extract", "c.yml", "-k", "0.01"],
        ["status", "--verbose", "c.yml"],
        ["evaluate", "c.yml", "--help"],
        ["evaluate", "c.yml", "--limit", "--help"],
        ["run", "c.yml", "--force", "--verbose", "--dry_run"],
        ["damage", "c.yml", "--save", "--k", "0.01"],
        ["evaluate", "c.yml", "--limit=5", "--noforce"],
        ["extract", "c.yml", "--k", "-1"],  # a negative number is a value (and refused as such by the config)
        ["run", "--config", "c.yml"],  # as --help documents it
        ["run", "--config=c.yml", "--dry_run"],
        ["run", "-c", "c.yml"],
        ["status", "--verbose", "--config", "c.yml"],
    ],
)
def test_good_arguments_pass(argv):
    check_arguments(argv)


def test_booleans_parse_strictly():
    assert parse_bool("force", "false") is False and parse_bool("force", "True") is True
    assert parse_bool("force", 1) is True and parse_bool("force", 0) is False
    with pytest.raises(BenchprofError, match="--force: 'maybe' is not true or false"):
        parse_bool("force", "maybe")


def demo_config(folder: Path) -> Path:
    """configs/demo.yml writing its data and outputs under `folder`."""
    demo = yaml.safe_load((ROOT / "configs" / "demo.yml").read_text())
    demo["settings"]["output_dir"] = str(folder / "outputs")
    demo["data"]["dir"] = str(folder / "data")
    demo["models"][0]["name"] = str(ROOT / "benchprof" / "assets" / "demo-model")
    config = folder / "demo.yml"
    config.write_text(yaml.safe_dump(demo))
    return config


def test_dryrun_typo_writes_nothing_and_exits_nonzero(tmp_path):
    config = demo_config(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "benchprof", "run", str(config), "--dryrun"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "benchprof: error: run: unknown option --dryrun (options: --config, --eval_only, --force, --dry_run, --verbose)"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.yml"]  # no data, no outputs


@pytest.mark.parametrize("option", ["--k", "--limit"])
def test_an_option_without_its_value_writes_nothing_and_exits_nonzero(tmp_path, option):
    config = demo_config(tmp_path)
    command = "extract" if option == "--k" else "evaluate"
    proc = subprocess.run(
        [sys.executable, "-m", "benchprof", command, str(config), option], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"benchprof: error: {command}: {option} needs a value"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.yml"]  # no data, no outputs


def test_config_as_an_option_is_the_same_as_by_position(tmp_path):
    """`--config demo.yml` and `--config=demo.yml` as --help documents them (refused as unknown options before)."""
    config = demo_config(tmp_path)
    outputs = []
    for args in ([str(config)], ["--config", str(config)], [f"--config={config}"], ["-c", str(config)]):
        proc = subprocess.run(
            [sys.executable, "-m", "benchprof", "run", *args, "--dry_run"], capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        outputs.append(proc.stdout)
    assert outputs[0].splitlines()[-1].startswith("status: 0 done") and len(set(outputs)) == 1


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["extract", "--k="], "--k"),
        (["extract", "--ability", ","], "--ability"),
        (["evaluate", "--benchmark", ""], "--benchmark"),
        (["finetune", "--ability="], "--ability"),
    ],
)
def test_an_empty_selection_is_refused(tmp_path, capsys, argv, flag):
    """An empty --k, --ability or --benchmark selected nothing, did nothing and exited 0."""
    from benchprof.cli import main

    config = demo_config(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main([argv[0], str(config), *argv[1:]])
    assert exit_info.value.code == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"benchprof: error: {flag}: an empty selection; leave {flag} out for all ("), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.yml"]  # no data, no outputs


def run_sh(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(ROOT / "run.sh"), *args], capture_output=True, text=True)


def test_run_sh_refuses_unknown_and_extra_arguments():
    proc = run_sh("-x")
    assert proc.returncode == 2 and "run.sh: unknown option -x" in proc.stderr
    proc = run_sh("a.yml", "b.yml")
    assert proc.returncode == 2 and "one config file only (got a.yml and b.yml)" in proc.stderr


def test_run_sh_passes_eval_only_in_any_order(tmp_path):
    """-e after the config is kept (it was dropped before); a stand-in benchprof records its argv."""
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    shutil.copy(ROOT / "run.sh", tmp_path / "run.sh")
    fake = tmp_path / ".venv" / "bin" / "benchprof"
    fake.write_text('#!/bin/sh\necho "$@"\n')
    fake.chmod(0o755)
    for args in (["my.yml", "-e"], ["-e", "my.yml"]):
        proc = subprocess.run(["bash", str(tmp_path / "run.sh"), *args], capture_output=True, text=True)
        assert proc.stdout.strip() == "run my.yml --eval_only", proc.stderr
    proc = subprocess.run(["bash", str(tmp_path / "run.sh")], capture_output=True, text=True)
    assert proc.stdout.strip() == "run config.yml"
    proc = subprocess.run(["bash", str(tmp_path / "run.sh"), "-f", "-e", "my.yml"], capture_output=True, text=True)
    assert proc.stdout.strip() == "run my.yml --eval_only --force", proc.stderr  # -f: redo current evaluations too


@pytest.mark.parametrize(
    "argv, want",
    [
        (["run", "--dry_run", "cfg.yml"], ["run", "--dry_run=true", "cfg.yml"]),  # fire: dry_run='cfg.yml'
        (["run", "--dry-run", "cfg.yml"], ["run", "--dry-run=true", "cfg.yml"]),
        (["run", "--dry_run", "--force", "cfg.yml"], ["run", "--dry_run", "--force=true", "cfg.yml"]),
        (["run", "cfg.yml", "--dry_run"], ["run", "cfg.yml", "--dry_run"]),
        (["extract", "--k", "0.01", "cfg.yml"], ["extract", "--k", "0.01", "cfg.yml"]),  # --k takes a value
    ],
)
def test_a_boolean_option_before_the_config_is_a_flag(argv, want):
    assert bool_flags_alone(argv) == want
    check_arguments(want)  # and the result passes the argument check


def test_a_reader_that_leaves_early_gets_no_broken_pipe(tmp_path):
    """`benchprof status config.yml | head`: the reader closes the pipe before status has printed; status ends
    quietly (exit 141, as `yes | head` does), with nothing on stderr."""
    config = tmp_path / "config.yml"
    config.write_text((ROOT / "configs" / "demo.yml").read_text())
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchprof", "status", str(config)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first line
    stderr = proc.stderr.read().decode()
    assert proc.wait() == 141 and stderr == ""


@pytest.mark.parametrize("name", list(COMMANDS))
def test_help_shows_the_config_every_option_and_an_example(capsys, name):
    """`benchprof NAME --help`: our own help (no fire INFO line, no Optional['str | None'] types), the positional
    config in the usage line, every option with its meaning, an example that passes the argument check, lines of at
    most 120 characters."""
    import inspect
    import itertools
    import shlex

    from benchprof.cli import EXAMPLES, main

    main([name, "--help"])
    out = capsys.readouterr().out
    assert out.startswith(f"usage: benchprof {name} [CONFIG]") and "INFO" not in out and "Optional" not in out
    for option in list(inspect.signature(COMMANDS[name]).parameters.values())[1:]:
        flag = f"--no{option.name}" if option.default is True else f"--{option.name}"  # a boolean on by default
        lines = out.splitlines()
        [at] = [i for i, line in enumerate(lines) if line.split()[:1] == [flag]]
        following = itertools.takewhile(lambda line: line.startswith(" " * 26), lines[at + 1 :])
        entry = lines[at] + "".join(" " + line for line in following)  # its text wrapped onto the next lines
        words = entry.split(maxsplit=1 if option.annotation in (bool, "bool") else 2)
        assert len(words) == (2 if option.annotation in (bool, "bool") else 3), f"{flag} has no meaning: {entry}"
    assert out.rstrip().endswith(f"example:\n  {EXAMPLES[name]}")
    assert max(len(line) for line in out.splitlines()) <= 120
    argv = shlex.split(EXAMPLES[name])
    assert argv[:2] == ["benchprof", name]
    check_arguments(argv[1:])


def test_version_and_the_command_list(capsys):
    from benchprof import __version__
    from benchprof.cli import main

    main(["--version"])
    assert capsys.readouterr().out == f"benchprof {__version__}\n"
    main([])
    out = capsys.readouterr().out
    assert out.startswith("usage: benchprof COMMAND [CONFIG] [OPTIONS]") and "INFO" not in out
    listed = [line.split()[0] for line in out.split("commands:\n")[1].split("\n\n")[0].splitlines()]
    assert listed == list(COMMANDS)


def readme_code() -> list[str]:
    """The README's code: its code blocks' lines and its inline code spans, comments cut."""
    import re

    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
    prose = re.sub(r"```[a-z]*\n.*?```", "", text, flags=re.S)
    inline = [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", prose)]  # a span may wrap a line
    return [line.split("  #")[0].split(" # ")[0] for span in blocks + inline for line in span.splitlines()]


def test_every_command_and_flag_the_readme_names_exists():
    """Each `benchprof COMMAND ...` the README writes passes the argument check (the command and its options
    exist, values where they need them), and each --flag it names is an option of some command, of run.sh's
    `benchprof run`, or of the script on its line."""
    import re
    import shlex

    commands = []
    for line in readme_code():
        for match in re.finditer(r"benchprof (\w+)([^;&|)`]*)", line):
            commands.append([match.group(1), *shlex.split(match.group(2).replace("[CONFIG]", "c.yml"))])
    assert len(commands) >= 10 and ["extract", "configs/demo.yml", "--k", "0.01024"] in commands
    for argv in commands:
        assert argv[0] in COMMANDS, argv
        check_arguments(argv)
    import inspect

    options = {p for command in COMMANDS.values() for p in inspect.signature(command).parameters}
    options.add("include_path")  # lm-eval's own flag, named for the folder convention evals.include_path follows
    for line in readme_code():
        if not ("benchprof " in line or line.startswith("--")) or "scripts/" in line or "run.sh" in line:
            continue  # prose, a script's own flags, run.sh's -e and -f
        for flag in re.findall(r"(?<![\w-])--(\w+)", line):
            if flag in ("version", "help"):  # the command line's own (test_version_..., test_help_...)
                continue
            assert flag in options or flag.removeprefix("no") in options, (flag, line)
