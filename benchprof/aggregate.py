"""Stage `aggregate`: not implemented yet (issue 6)."""

from __future__ import annotations

from typing import Any, Optional

from . import BenchprofError


def aggregate(config: str = "config.yml", model: Optional[str] = None,
              report_k: Optional[float] = None) -> None:
    """Ability Impact Scores, bootstrap intervals, tables and plots under <model>/profile/.

    AIS = (s(original) - s(ablated)) / s(original) on each benchmark's primary metric.

    Arguments:
        config: path of config.yml.
        model: only this model (name or tag).
        report_k: k for the headline tables and plots; default aggregate.report_k or the largest k.
    """
    raise BenchprofError("benchprof aggregate: not implemented yet (issue 6)")
