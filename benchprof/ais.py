"""Pure statistics of benchprof: arrays in, numbers out; no files, no plots.

Sections: per-item scores (p_correct) · chance level · paired tests (McNemar, sign-flip) ·
multiplicity (Benjamini–Hochberg, Holm) · resampling (resample_counts, two-level bootstrap, null calibration) ·
power (minimum detectable AIS, items needed).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike, NDArray
