"""The quiet terminal of a stage: what a child process writes to stderr during a quiet stage lands in the stage's
log, not the terminal; benchprof's own bars and summaries, errors after the stage and benchprof's own worker
processes still reach the terminal; --verbose changes nothing."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from benchprof import BenchprofError
from benchprof.core.console import quiet, terminal, terminal_fd

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
    assert terminal_fd() is None
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
        from benchprof.core.console import quiet
        with quiet("evaluate", [__import__("pathlib").Path({str(tmp_path / "demo" / "logs" / "evaluate.log")!r})]):
            subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('library noise')"])
            raise RuntimeError("the stage failed: " + "details " * 50)
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True)
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "RuntimeError: the stage failed: " + "details " * 50 in done.stderr
    assert "library noise" not in done.stderr
    assert "library noise" in (tmp_path / "demo" / "logs" / "evaluate.log").read_text()


def test_a_worker_started_by_a_quiet_stage_writes_to_the_terminal(tmp_path):
    """evaluate's shard workers (spawn_workers; torchrun's ranks alike) get the terminal as stderr, not the stage's
    log: their own bars and errors show, their libraries' noise goes to their own log. Here the terminal is a file
    (`2> file`) and the parent writes while the worker runs: the two share the file's offset, so neither overwrites
    the other."""
    for name in ("demo", "worker"):
        (tmp_path / name).mkdir()
    worker_log = tmp_path / "worker" / "logs" / "evaluate.log"
    worker = f"""
        import subprocess, sys, time
        from pathlib import Path
        from benchprof.core.console import quiet, terminal
        with quiet("evaluate", [Path({str(worker_log)!r})]):
            print("worker bar", file=terminal(), flush=True)
            subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('worker library noise')"])
            time.sleep(0.5)
        print("worker error", file=sys.stderr, flush=True)
    """
    stage = f"""
        import os, sys, threading, time
        from pathlib import Path
        from benchprof.core.console import quiet, terminal
        from benchprof.stages.evaluate import spawn_workers
        with quiet("evaluate", [Path({str(tmp_path / "demo" / "logs" / "evaluate.log")!r})]):
            print("parent bar 1", file=terminal(), flush=True)
            writer = threading.Timer(0.3, lambda: print("parent bar 2", file=terminal(), flush=True))
            writer.start()
            spawn_workers([([sys.executable, "-c", {textwrap.dedent(worker)!r}], dict(os.environ))])
            writer.join()
            print("parent bar 3", file=terminal(), flush=True)
    """
    shown = tmp_path / "terminal.txt"
    with open(shown, "w") as terminal_file:
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(stage)], stderr=terminal_file)
    assert done.returncode == 0
    text = shown.read_text()
    for line in ("parent bar 1", "parent bar 2", "parent bar 3", "worker bar", "worker error"):
        assert line in text, (line, text)
    assert "worker library noise" not in text and "worker library noise" in worker_log.read_text()


def test_a_refused_command_shows_what_its_children_wrote_instead_of_a_log(tmp_path, capfd):
    """A stage that stops on bad input before the model's folder exists writes no log; what a child process wrote
    to stderr meanwhile (kept aside) is printed on the terminal rather than lost."""
    log = tmp_path / "demo" / "logs" / "evaluate.log"
    with pytest.raises(BenchprofError), quiet("evaluate", [log]):
        child_stderr("CUDA error: out of memory")
        raise BenchprofError("evaluate: 1 worker(s) failed")
    assert "CUDA error: out of memory" in capfd.readouterr().err
    assert not (tmp_path / "demo").exists()


def test_verbose_leaves_the_terminal_as_it_is(tmp_path, capfd):
    log = tmp_path / "demo" / "logs" / "evaluate.log"
    (tmp_path / "demo").mkdir()
    with quiet("evaluate", [log], verbose=True):
        child_stderr(NOISE)
        print("a library line", file=sys.stderr, flush=True)
    shown = capfd.readouterr().err
    assert NOISE in shown and "a library line" in shown
    assert not log.exists() and terminal_fd() is None


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


def test_a_log_on_a_full_disk_is_one_line_before_any_work(tmp_path):
    """A log that no write reaches (a real file-size limit, RLIMIT_FSIZE in the child, reached by the log as it
    stands, as a full disk refuses every write): the command stops with one line naming the log (a 30-42-line
    traceback from the log writer before), and no data is written."""
    import yaml

    logs = tmp_path / "outputs" / "tiny" / "logs"
    logs.mkdir(parents=True)
    (logs / "data.log").write_text("an earlier run's lines\n")
    raw = {
        "models": [{"name": "some/model", "tag": "tiny"}],
        "datasets": [{"name": "Spatial_Reasoning"}],
        "settings": {"output_dir": "outputs"},
        "data": {"dir": "data", "train_size": 4, "test_size": 4},
    }
    (tmp_path / "config.yml").write_text(yaml.safe_dump(raw))
    size = (logs / "data.log").stat().st_size
    child = textwrap.dedent(f"""
        import resource
        from benchprof.cli import main
        resource.setrlimit(resource.RLIMIT_FSIZE, ({size}, resource.RLIM_INFINITY))
        main(["data", {str(tmp_path / "config.yml")!r}])
    """)
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"benchprof: error: {logs / 'data.log'}: cannot write (File too large); no partial file left; rerun to resume"
    ]
    assert not (tmp_path / "data").exists()  # stopped before the stage's work


def test_lm_evals_warning_about_the_model_object_is_dropped_and_no_other(tmp_path, capfd, tiny_model_dir):
    """benchprof hands HFLM a model object on purpose; lm-eval's warning about it (a pair of lines on the demo's
    terminal) is one a user cannot act on. Exactly that message is filtered, lm-eval's other warnings still show."""
    import logging

    from lm_eval.models.huggingface import HFLM

    from benchprof.core.console import MODEL_OBJECT_WARNINGS, drop_model_object_warning
    from benchprof.core.modeling import load_model

    model, tokenizer = load_model(str(tiny_model_dir))
    log = tmp_path / "demo" / "logs" / "evaluate.log"
    log.parent.mkdir(parents=True)
    with quiet("evaluate", [log]):
        drop_model_object_warning()
        drop_model_object_warning()  # once per process, however often it is called
        HFLM(pretrained=model, tokenizer=tokenizer, batch_size=1)
        logging.getLogger("lm_eval.models.huggingface").warning("another warning")
        evaluator = logging.getLogger("lm_eval.evaluator")
        evaluator.warning("Overwriting default num_fewshot of benchprof_local_piqa from None to 0")
        evaluator.warning("Overwriting default num_fewshot of sums_mc from None to 0")  # a user's own task
    shown = capfd.readouterr().err
    for message in MODEL_OBJECT_WARNINGS:
        assert message not in shown + log.read_text()
    assert "benchprof_local_piqa" not in shown + log.read_text()
    assert "evaluate: warning: lm_eval.models.huggingface: another warning" in shown
    assert "Overwriting default num_fewshot of sums_mc" in shown
    assert len(logging.getLogger("lm_eval.models.huggingface").filters) == 1
