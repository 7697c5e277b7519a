"""The terminal of a stage: benchprof's own progress bar and one-line summary, and each distinct library warning
once, with a count; everything else (lm-eval's, transformers' and datasets' progress bars, their log lines and
warnings) goes to a log file per stage under outputs/<model>/logs/<stage>.log. `--verbose` leaves the terminal as
the libraries make it (and writes no log).

Python-level output is redirected (sys.stdout, sys.stderr, logging, warnings), and so is file descriptor 2 while the
stage runs: what a child process or a C extension writes to stderr directly (lm-eval's `git describe` outside a
checkout, deepspeed's op compiler) goes to the stage's log too. Descriptor 1 is left alone: it carries the
summaries of benchprof's own worker processes, which get the terminal as their stderr (`terminal_fd`) and keep
their own quiet logs. A command refused on bad input writes no log, so what its children wrote to stderr is
shown on the terminal instead.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from benchprof import BenchprofError

if TYPE_CHECKING:
    from tqdm import tqdm

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _Log:
    """The log files of the running stage (<model>/logs/<stage>.log). Where the model's folder existed when
    the stage began, written as it comes; else kept in memory and written at the end, unless the stage
    stopped on bad input (a BenchprofError): a command refused before doing any work creates no folder.

    A log that cannot be written (a full or read-only disk) is one BenchprofError line: raised at once when the
    files are opened, and kept in `error` when a write fails later (a print must not raise), for `quiet`."""

    def __init__(self, paths: list[Path]):
        from benchprof.core.storage import writable_folder, write_error

        self.files: dict[Path, TextIO] = {}
        self.error: BenchprofError | None = None
        self.pending: list[str] = []
        self.spool: io.BufferedRandom | None = None  # file descriptor 2's output while no log file exists yet
        self.later = [path for path in paths if not path.parent.parent.is_dir()]
        for path in paths:
            try:
                if path in self.later:  # written at the end: refused now if it cannot be, before any work
                    writable_folder(path.parent)
                    continue
                path.parent.mkdir(exist_ok=True)
                # line-buffered, so that what is written to file descriptor 2 directly lands in order
                self.files[path] = _append_text(path)
            except OSError as err:
                self.close(bad_input=True)
                raise write_error(path, err) from None
            except BenchprofError:
                self.close(bad_input=True)
                raise

    def failed(self, path: Path, err: OSError) -> None:
        """Keep the first write error; the file is closed and written no more."""
        from benchprof.core.storage import write_error

        if self.error is None:
            self.error = write_error(path, err)
        handle = self.files.pop(path, None)
        if handle is not None:
            with contextlib.suppress(OSError):
                handle.close()

    def descriptor(self) -> int:
        """A new file descriptor for file descriptor 2 to point at: the first log file, appended as written
        (it survives a crash), or where no log file exists yet a spool, written into the log at the end."""
        if self.files:
            return os.dup(self.files[next(iter(self.files))].fileno())
        self.spool = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        return os.dup(self.spool.fileno())

    def write(self, text: str) -> None:
        if self.later:
            self.pending.append(text)
        for path, handle in list(self.files.items()):
            try:
                handle.write(text)
            except OSError as err:
                self.failed(path, err)

    def close(self, bad_input: bool) -> str:
        """Close the files and write what was kept for the end; returns what file descriptor 2 received that no
        log will hold (a stage refused on bad input writes none), for the terminal."""
        for path in list(self.files):
            try:
                self.files.pop(path).close()
            except OSError as err:  # the last buffered line could not be written
                self.failed(path, err)
        spooled = ""
        if self.spool is not None:
            self.spool.seek(0)
            spooled = self.spool.read().decode("utf-8", errors="replace")
            self.pending.append(spooled)
            self.spool.close()
        if bad_input:
            return spooled
        for path in self.later:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                with _append_text(path) as handle:
                    handle.write("".join(self.pending))
            except OSError as err:
                self.failed(path, err)
            except BenchprofError as err:  # a link put there while the stage ran
                self.error = self.error or err
        return ""


def _append_text(path: Path) -> TextIO:
    """A log file opened to append text, line-buffered, never through a link (storage.open_for_append)."""
    from benchprof.core.storage import open_for_append

    return open(open_for_append(path), "a", encoding="utf-8", buffering=1)  # noqa: SIM115 (the caller closes it)


class _Stream:
    """sys.stdout or sys.stderr while a stage is quiet: writes go to the stage's log (and, for stdout, on to
    the terminal too); once no stage is quiet, straight to the original stream. Handlers a library created
    during the stage keep a reference to this object, so it must outlive the stage."""

    def __init__(self, original: TextIO, echo: bool):
        self.original, self.echo = original, echo

    def write(self, text: str) -> int:
        if _state.log is None:
            return self.original.write(text)
        _state.log.write(text)
        if self.echo:
            self.original.write(text)
        return len(text)

    def flush(self) -> None:
        self.original.flush()

    def isatty(self) -> bool:
        return False  # libraries' bars see a file, not a terminal

    def __getattr__(self, name: str) -> Any:  # encoding, fileno, ... of the original
        return getattr(self.original, name)


class _WarningCount(logging.Handler):
    """Counts each distinct warning (logged at WARNING or above) of the stage."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        first_line = record.getMessage().strip().splitlines()[0] if record.getMessage().strip() else ""
        self.counts[f"{record.name}: {first_line}"[:240]] += 1


class _State:
    log: _Log | None = None
    terminal: TextIO | None = None  # the real stderr while a stage is quiet
    terminal_fd: int | None = None  # a duplicate of the real file descriptor 2 while a stage points 2 at its log
    verbose = False  # within a --verbose command, whose nested stages (run's) are verbose too


_state = _State()


def run_script(component: Any) -> None:
    """A script under scripts/ run as fire's command line for `component`: a BenchprofError (bad input) ends it
    with one line on stderr, "error: <the problem>", and exit status 1, not a traceback."""
    import fire

    try:
        fire.Fire(component)
    except BenchprofError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:  # Ctrl-C: one line, as the benchprof command says it
        print("interrupted; rerun the same command", file=sys.stderr)
        sys.exit(130)


def terminal() -> TextIO:
    """Where benchprof's own progress bars go: the terminal, also while a stage is quiet."""
    return _state.terminal or sys.stderr


def progress(*args: Any, **kwargs: Any) -> tqdm:
    """benchprof's progress bar (tqdm) on the terminal: one per stage."""
    from tqdm import tqdm

    kwargs.setdefault("file", terminal())
    return tqdm(*args, **kwargs)


def log_line(text: str) -> None:
    """A line for the stage's log only (a shared-queue worker's own summary: its parent prints the total), on
    stdout where no log is kept (--verbose)."""
    if _state.log is not None:
        _state.log.write(text + "\n")
    else:
        print(text)


def warn(text: str) -> None:
    """A warning of benchprof's own that the user can act on (the preflight's): on the terminal once, also while
    a stage is quiet, and in the stage's log."""
    if _state.log is not None:
        _state.log.write(text + "\n")
    print(text, file=terminal(), flush=True)


# lm-eval's pair of warnings whenever HFLM gets a model object, which benchprof hands it on purpose (one load,
# ablated in place); their advice (no accelerate launch, no parallelize=True) is about settings benchprof never uses
MODEL_OBJECT_WARNINGS = (
    "`pretrained` model kwarg is not of type `str`",
    "Passed an already-initialized model through `pretrained`",
)


class _DropMessages(logging.Filter):
    """Drops the records whose message starts with one of `starts`; every other record passes."""

    def __init__(self, starts: tuple[str, ...]):
        super().__init__()
        self.starts = starts

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.starts)


# lm-eval's warning when a task's few-shot count is passed in, for the tasks benchprof writes itself (local copies
# of real benchmarks, prefix benchprof_): the count is evals.num_fewshot, passed on purpose (a user's own task keeps
# the warning). Writing it into their YAML instead would change every local task's hash and redo its evaluations.
OWN_TASK_FEWSHOT_WARNINGS = ("Overwriting default num_fewshot of benchprof_",)


def drop_model_object_warning() -> None:
    """Filter exactly lm-eval's MODEL_OBJECT_WARNINGS from its HF model's logger, and OWN_TASK_FEWSHOT_WARNINGS
    from its evaluator's (once per process)."""
    for name, starts in (
        ("lm_eval.models.huggingface", MODEL_OBJECT_WARNINGS),
        ("lm_eval.evaluator", OWN_TASK_FEWSHOT_WARNINGS),
    ):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropMessages) and f.starts == starts for f in logger.filters):
            logger.addFilter(_DropMessages(starts))


def terminal_fd() -> int | None:
    """The terminal's file descriptor while a quiet stage has pointed file descriptor 2 at its log, else None: the
    stderr to give the processes benchprof starts itself (evaluate's shard workers, torchrun's ranks), so their own
    progress bars and errors show; each is a benchprof stage with a quiet log of its own."""
    return _state.terminal_fd


def _stderr_fd_redirect(log: _Log) -> int | None:
    """Point file descriptor 2 at the stage's log; return a duplicate of what it was (None where fd 2 is closed)."""
    try:
        saved = os.dup(2)
    except OSError:
        return None
    sys.stderr.flush()
    target = log.descriptor()
    os.dup2(target, 2)
    os.close(target)
    return saved


def _stderr_fd_restore(saved: int | None) -> None:
    if saved is None:
        return
    sys.stderr.flush()
    os.dup2(saved, 2)
    os.close(saved)


def _terminal_stream(stderr: TextIO, terminal_fd: int) -> tuple[TextIO, bool]:
    """(where benchprof's own bars go during the stage, whether it is ours to close): sys.stderr itself unless it
    writes to file descriptor 2, which now points at the log; then a stream on the terminal's duplicate."""
    try:
        on_fd2 = stderr.fileno() == 2
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both: pytest's capsys, a StringIO
        on_fd2 = False
    if not on_fd2:
        return stderr, False
    encoding = getattr(stderr, "encoding", None) or "utf-8"
    stream = open(os.dup(terminal_fd), "w", buffering=1, encoding=encoding, errors="backslashreplace")  # noqa: SIM115
    return stream, True


def _captured_loggers() -> list[tuple[logging.Logger, list[logging.Handler], bool]]:
    """Every logger that prints by itself (its own handlers, or not propagating), with what it had."""
    saved = []
    for name in list(logging.root.manager.loggerDict):
        logger = logging.getLogger(name)
        if logger.handlers or not logger.propagate:
            saved.append((logger, logger.handlers[:], logger.propagate))
    return saved


@contextlib.contextmanager
def quiet(stage: str, log_paths: list[Path], verbose: bool = False) -> Iterator[None]:
    """Run a stage with a readable terminal (module docstring); nested stages (`run`'s) log to their own files.

    At the end, each distinct warning is printed once to the terminal with how often it came.
    """
    if verbose or _state.verbose:  # a stage of `run --verbose` is verbose too
        outer_verbose, _state.verbose = _state.verbose, True
        try:
            yield
        finally:
            _state.verbose = outer_verbose
        return
    outer_log = _state.log
    log = _Log(log_paths)
    count = _WarningCount()
    to_log = logging.StreamHandler(_LogWriter(log))
    to_log.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    saved_root = root.handlers[:]
    saved = _captured_loggers()
    for logger, _, _ in saved:  # their records reach the root's handlers below instead
        logger.handlers, logger.propagate = [], True
    root.handlers = [to_log, count]
    shown = warnings.showwarning

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        logging.getLogger("py.warnings").warning("%s: %s (%s:%s)", category.__name__, message, filename, lineno)

    warnings.showwarning = show
    outermost = _state.terminal is None
    stdout, stderr = sys.stdout, sys.stderr
    saved_fd2: int | None = None
    owned_terminal = bad_input = failed = False
    try:
        saved_fd2 = _stderr_fd_redirect(log)  # the terminal, or the log of the stage around this one
        if outermost:
            if saved_fd2 is None:
                _state.terminal = stderr
            else:
                _state.terminal, owned_terminal = _terminal_stream(stderr, saved_fd2)
                _state.terminal_fd = saved_fd2
            sys.stdout, sys.stderr = _Stream(stdout, echo=True), _Stream(stderr, echo=False)
        _state.log = log
        log.write(f"=== benchprof {stage} {time.strftime('%Y-%m-%d %H:%M:%S')}: {' '.join(sys.argv)}\n")
        if log.error is not None:  # a full disk: stop before any work
            raise log.error
        yield
    except BenchprofError:
        bad_input = True
        raise
    except BaseException:
        failed = True
        raise
    finally:
        _state.log = outer_log
        if outermost:
            sys.stdout.flush()
            sys.stdout, sys.stderr = stdout, stderr
            if _state.terminal is not None:
                _state.terminal.flush()
            if owned_terminal and _state.terminal is not None:
                _state.terminal.close()
            _state.terminal = _state.terminal_fd = None
        _stderr_fd_restore(saved_fd2)
        warnings.showwarning = shown
        root.handlers = saved_root
        for logger, handlers, propagate in saved:
            logger.handlers, logger.propagate = handlers, propagate
        unlogged = log.close(bad_input)
        if unlogged:
            print(unlogged, end="" if unlogged.endswith("\n") else "\n", file=terminal())
        for message, n in count.counts.items():
            times = f" (x{n})" if n > 1 else ""
            print(f"{stage}: warning{times}: {message}", file=terminal())
        if log.error is not None and not (bad_input or failed):  # the stage's work is done, its log is not
            raise log.error


class _LogWriter:
    """A file-like view of a stage's log for logging.StreamHandler."""

    def __init__(self, log: _Log):
        self.log = log

    def write(self, text: str) -> int:
        self.log.write(text)
        return len(text)

    def flush(self) -> None:
        pass
