"""benchprof: which abilities an LLM benchmark really measures (Benchmark Profiling, Kim et al., EMNLP 2025)."""

__version__ = "0.1.0"


class BenchprofError(Exception):
    """A problem the user can fix (bad input, missing file); the CLI prints it as one line."""
