"""The terminal of a stage: benchprof's own progress bar and one-line summary, and each distinct library warning
once, with a count; everything else (lm-eval's, transformers' and datasets' progress bars, their log lines and
warnings) goes to a log file per stage under outputs/<model>/logs/<stage>.log. `--verbose` leaves the terminal as
the libraries make it (and writes no log).

Only Python-level output is redirected: what a C extension or a child process (torchrun's workers, deepspeed's op
compiler) writes to the file descriptors directly still reaches the terminal.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from . import BenchprofError

if TYPE_CHECKING:
    from tqdm import tqdm

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _Log:
    """The log files of the running stage (<model>/logs/<stage>.log). Where the model's folder existed when
    the stage began, written as it comes; else kept in memory and written at the end, unless the stage
    stopped on bad input (a BenchprofError): a command refused before doing any work creates no folder."""

    def __init__(self, paths: list[Path]):
        self.files: dict[Path, TextIO] = {}
        self.later = [path for path in paths if not path.parent.parent.is_dir()]
        for path in paths:
            if path not in self.later:
                path.parent.mkdir(exist_ok=True)
                self.files[path] = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())
        self.pending: list[str] = []

    def write(self, text: str) -> None:
        if self.later:
            self.pending.append(text)
        for handle in self.files.values():
            handle.write(text)

    def close(self, bad_input: bool) -> None:
        for handle in self.files.values():
            handle.close()
        if bad_input:
            return
        for path in self.later:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as handle:
                handle.write("".join(self.pending))


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


_state = _State()


def terminal() -> TextIO:
    """Where benchprof's own progress bars go: the terminal, also while a stage is quiet."""
    return _state.terminal or sys.stderr


def progress(*args: Any, **kwargs: Any) -> tqdm:
    """benchprof's progress bar (tqdm) on the terminal: one per stage."""
    from tqdm import tqdm

    kwargs.setdefault("file", terminal())
    return tqdm(*args, **kwargs)


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
    if verbose:
        yield
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
    if outermost:
        _state.terminal = sys.stderr
        stdout, stderr = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = _Stream(stdout, echo=True), _Stream(stderr, echo=False)
    _state.log = log
    log.write(f"=== benchprof {stage} {time.strftime('%Y-%m-%d %H:%M:%S')}: {' '.join(sys.argv)}\n")
    bad_input = False
    try:
        yield
    except BenchprofError:
        bad_input = True
        raise
    finally:
        _state.log = outer_log
        if outermost:
            sys.stdout.flush()
            sys.stdout, sys.stderr = stdout, stderr
            _state.terminal = None
        warnings.showwarning = shown
        root.handlers = saved_root
        for logger, handlers, propagate in saved:
            logger.handlers, logger.propagate = handlers, propagate
        log.close(bad_input)
        for message, n in count.counts.items():
            times = f" (x{n})" if n > 1 else ""
            print(f"{stage}: warning{times}: {message}", file=terminal())


class _LogWriter:
    """A file-like view of a stage's log for logging.StreamHandler."""

    def __init__(self, log: _Log):
        self.log = log

    def write(self, text: str) -> int:
        self.log.write(text)
        return len(text)

    def flush(self) -> None:
        pass
