"""The quiet terminal of a stage: what a child process writes to stderr during a quiet stage lands in the stage's
log, not the terminal; benchprof's own bars and summaries, errors after the stage and benchprof's own worker
processes still reach the terminal; --verbose changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from benchprof.console import TERMINAL_ENV, quiet, terminal

NOISE = "fatal: not a git repository (or any of the parent directories): .git"


def child_stderr(text: str) -> None:
    """What lm-eval's `git describe` does outside a checkout: a child process writing to the inherited stderr."""
    subprocess.run([sys.executable, "-c", f"import sys; sys.stderr.write({text!r} + '\\n')"], check=True)


@pytest.mark.parametrize("folder_exists", [True, False])  # a log written as it comes, or at the end
def test_a_child_process_stderr_goes_to_the_log_during_a_quiet_stage(tmp_path, capfd, folder_exists):
    if folder_exists:
        (tmp_path / "demo").mkdir()
    log = tmp_path / "demo" / "logs" / "evaluate.log"
    with quiet("evaluate", [log]):
        child_stderr(NOISE)
        print("evaluate: 4 jobs run", flush=True)  # the stage's summary
        print("importance 3/3", file=terminal(), flush=True)  # benchprof's own progress bar
    shown = capfd.readouterr()
    assert NOISE not in shown.out + shown.err
    assert "evaluate: 4 jobs run" in shown.out and "importance 3/3" in shown.err
    assert NOISE in log.read_text()
    assert TERMINAL_ENV not in os.environ
    child_stderr("after the stage")  # file descriptor 2 is the terminal again
    assert "after the stage" in capfd.readouterr().err


def test_a_nested_stage_logs_to_its_own_file_and_gives_the_outer_log_back(tmp_path, capfd):
    (tmp_path / "demo").mkdir()
    outer, inner = (tmp_path / "demo" / "logs" / f"{name}.log" for name in ("run", "evaluate"))
    with quiet("run", [outer]):
        with quiet("evaluate", [inner]):
            child_stderr("inside evaluate")
        child_stderr("between stages")
    assert "inside evaluate" in inner.read_text() and "between stages" not in inner.read_text()
    assert "between stages" in outer.read_text()
    assert "inside evaluate" not in capfd.readouterr().err


def test_an_error_prints_in_full_on_the_terminal_after_the_stage(tmp_path):
    """A stage that fails: its traceback reaches the terminal once the stage lets go of file descriptor 2."""
    (tmp_path / "demo").mkdir()
    code = f"""
        import subprocess, sys
        from benchprof.console import quiet
        with quiet("evaluate", [__import__("pathlib").Path({str(tmp_path / "demo" / "logs" / "evaluate.log")!r})]):
            subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('library noise')"])
            raise RuntimeError("the stage failed: " + "details " * 50)
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True)
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "RuntimeError: the stage failed: " + "details " * 50 in done.stderr
    assert "library noise" not in done.stderr
    assert "library noise" in (tmp_path / "demo" / "logs" / "evaluate.log").read_text()


def test_a_worker_started_by_a_quiet_stage_writes_to_the_terminal(tmp_path, capfd):
    """torchrun's ranks and evaluate's shard workers inherit the stage's log as stderr: reattach_terminal
    (cli.main) gives them the terminal back for their own bars and errors; their libraries' noise goes to
    their own log."""
    for name in ("demo", "worker"):
        (tmp_path / name).mkdir()
    worker_log = tmp_path / "worker" / "logs" / "evaluate.log"
    code = f"""
        import subprocess, sys
        from pathlib import Path
        from benchprof.console import quiet, reattach_terminal, terminal
        reattach_terminal()
        with quiet("evaluate", [Path({str(worker_log)!r})]):
            print("worker bar", file=terminal(), flush=True)
            subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('worker library noise')"])
        print("worker error", file=sys.stderr, flush=True)
    """
    with quiet("evaluate", [tmp_path / "demo" / "logs" / "evaluate.log"]):
        subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=True)
    shown = capfd.readouterr().err
    assert "worker bar" in shown and "worker error" in shown and "worker library noise" not in shown
    assert "worker library noise" in worker_log.read_text()


def test_verbose_leaves_the_terminal_as_it_is(tmp_path, capfd):
    log = tmp_path / "demo" / "logs" / "evaluate.log"
    (tmp_path / "demo").mkdir()
    with quiet("evaluate", [log], verbose=True):
        child_stderr(NOISE)
        print("a library line", file=sys.stderr, flush=True)
    shown = capfd.readouterr().err
    assert NOISE in shown and "a library line" in shown
    assert not log.exists() and TERMINAL_ENV not in os.environ


def test_the_stages_of_a_verbose_command_are_verbose_too(tmp_path, capfd):
    """`benchprof run --verbose`: run's own stages (nested quiet) leave the terminal as it is as well."""
    (tmp_path / "demo").mkdir()
    logs = tmp_path / "demo" / "logs"
    with quiet("run", [logs / "run.log"], verbose=True):
        with quiet("evaluate", [logs / "evaluate.log"]):
            child_stderr(NOISE)
            print("a library line", file=sys.stderr, flush=True)
    shown = capfd.readouterr().err
    assert NOISE in shown and "a library line" in shown
    assert not logs.exists()
