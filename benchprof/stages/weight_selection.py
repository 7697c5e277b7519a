"""Which weights a region of n holds: the exact top and bottom, the authors' chunked approximation and uniform
random positions, over the candidate weights of weight_scores.Scores.

All candidates form one sequence (parameter names sorted, row-major flat index) ranked by (score desc,
position asc): **top** = the first n, **bottom** = the last n, so ties break deterministically and top and
bottom are disjoint when 2n <= candidates. `selection: exact` finds the n-th score by a streamed radix
select over the float bits (a 16-bit histogram, then a second one inside the cut bin), never concatenating
the scores; each pass reads the scores again. **random** = n uniform draws without replacement, seeded by
(extract.random_seed, ability, k). `selection: chunked` reproduces the authors' approximation: chunks of
max(chunk_size, floor(sqrt(N / f))) candidates each give their ceil(f · c) largest and smallest scores; the
chunks follow the same string-sorted names (layer 1, 10, 11, ..., 2), as the authors' code does, and the
random control is drawn at the size top gets (a little over n).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from benchprof import BenchprofError
from benchprof.core.config import ExtractSettings
from benchprof.core.layout import format_k
from benchprof.core.regions import Region
from benchprof.stages.weight_scores import Scores, order_keys

if TYPE_CHECKING:
    import torch

ORDER = "score desc, then position asc (parameter names sorted, row-major flat index)"
BINS = 1 << 16
RequestId = TypeVar("RequestId", bound=Hashable)


def _high(keys: torch.Tensor) -> torch.Tensor:
    return (keys >> 16).add_(BINS // 2)  # top 16 bits as a bin in [0, 65536)


def _low(keys: torch.Tensor) -> torch.Tensor:
    return keys & 0xFFFF


def _locate(hist: torch.Tensor, rank: int, largest: bool) -> tuple[int, int]:
    """The bin holding the rank-th element (1-based) counted from the largest or the smallest end,
    and how many elements lie strictly beyond that bin on that side."""
    import torch

    counts = hist.flip(0) if largest else hist
    cumulative = counts.cumsum(0)
    i = int(torch.searchsorted(cumulative, torch.tensor([rank], dtype=cumulative.dtype, device=cumulative.device)))
    beyond = int(cumulative[i] - counts[i])
    return (BINS - 1 - i if largest else i), beyond


@dataclass
class Cut:
    """Where a region of n ends in the total order: everything strictly beyond `key`, plus the
    tied weights (score key == `key`) whose rank among the ties lies in [tie_start, tie_stop)."""

    n: int
    largest: bool
    key: int = 0
    tie_start: int = 0
    tie_stop: int = 0


def exact_regions(scores: Scores, requests: dict[RequestId, tuple[int, bool]]) -> dict[RequestId, Region]:
    """For each request id -> (n, largest): the n largest (top) or smallest (bottom) scores over all
    candidate tensors together, in the total order of ORDER, as {name: sorted flat indices}.

    Three streamed passes over the tensors, whatever the number of requests (see module doc).
    """
    import torch

    cuts = {rid: Cut(n, largest) for rid, (n, largest) in requests.items()}
    for rid, cut in cuts.items():
        if not 0 <= cut.n <= scores.total:
            raise BenchprofError(f"request {rid}: n = {cut.n} is not within 0..{scores.total}")
    active = {rid: cut for rid, cut in cuts.items() if cut.n > 0}

    # pass 1: histogram of the high 16 bits of every key
    high_hist = torch.zeros(BINS, dtype=torch.int64, device=scores.device)
    if active:
        for name, values in scores:
            scores.check(name, values)
            high_hist += torch.bincount(_high(order_keys(values)), minlength=BINS)
    high_bin = {rid: _locate(high_hist, cut.n, cut.largest) for rid, cut in active.items()}

    # pass 2: histogram of the low 16 bits inside each bin that holds an n-th score
    bins = sorted({b for b, _ in high_bin.values()})
    low_hist = {b: torch.zeros(BINS, dtype=torch.int64, device=scores.device) for b in bins}
    if bins:
        for _, values in scores:
            keys = order_keys(values)
            high = _high(keys)
            for b in bins:
                low_hist[b] += torch.bincount(_low(keys[high == b]), minlength=BINS)
    for rid, cut in active.items():
        b, beyond_high = high_bin[rid]
        low, beyond_low = _locate(low_hist[b], cut.n - beyond_high, cut.largest)
        cut.key = (b - BINS // 2) * BINS + low
        ties = cut.n - beyond_high - beyond_low  # >= 1 weights scored exactly `key` to take
        equal = int(low_hist[b][low])
        # top takes the first tied positions, bottom the last (the two ends of one total order)
        cut.tie_start, cut.tie_stop = (0, ties) if cut.largest else (equal - ties, equal)

    # pass 3: the indices beyond each threshold, and the admitted ties
    selected: dict[RequestId, Region] = {rid: {} for rid in cuts}
    ties_seen = {rid: 0 for rid in active}
    if active:
        for name, values in scores:
            keys = order_keys(values)
            for rid, cut in active.items():
                beyond = keys > cut.key if cut.largest else keys < cut.key
                tied = torch.nonzero(keys == cut.key).flatten()
                seen = ties_seen[rid]
                admitted = tied[max(0, cut.tie_start - seen) : max(0, cut.tie_stop - seen)]
                ties_seen[rid] = seen + tied.numel()
                indices = torch.nonzero(beyond).flatten()  # ascending already
                if admitted.numel():
                    indices = torch.sort(torch.cat([indices, admitted])).values
                if indices.numel():
                    selected[rid][name] = indices.cpu()
    return selected


def chunk_length(total: int, n: int, chunk_size: int) -> int:
    """The authors' adaptive chunk: max(chunk_size, floor(sqrt(N / f))) with f = n / N."""
    fraction = n / total
    return max(chunk_size, int(math.sqrt(total / (fraction + 1e-9))))


def chunked_count(total: int, n: int, chunk_size: int) -> int:
    """How many weights the chunked top (and bottom) region holds: Σ over chunks of ceil(n · c / N),
    slightly more than n; the chunked random control is drawn at this size, so all three match."""
    if n == 0:
        return 0
    length = chunk_length(total, n, chunk_size)
    full, rest = divmod(total, length)
    return full * -(-n * length // total) + (-(-n * rest // total) if rest else 0)


def chunked_regions(scores: Scores, n: int, chunk_size: int) -> tuple[Region, Region]:
    """(top, bottom) by the authors' per-chunk ranking: each chunk of length c of the candidate
    sequence gives its ceil(n * c / N) largest and smallest scores (ties by ORDER inside a chunk)."""
    import torch

    if n == 0:
        return {}, {}
    length = chunk_length(scores.total, n, chunk_size)
    top, bottom = [], []
    pending, pending_start = [], 0  # scores not yet in a full chunk, and the global position of the first

    def take(chunk: torch.Tensor, start: int) -> None:
        count = -(-n * chunk.numel() // scores.total)  # ceil(f * c) in exact integer arithmetic
        order = torch.sort(order_keys(chunk), descending=True, stable=True).indices
        top.append(order[:count] + start)
        bottom.append(order[-count:] + start)

    for name, values in scores:
        scores.check(name, values)
        pending.append(values)
        buffered = torch.cat(pending) if len(pending) > 1 else pending[0]
        done = 0
        while buffered.numel() - done >= length:
            take(buffered[done : done + length], pending_start + done)
            done += length
        pending, pending_start = [buffered[done:]], pending_start + done
    if pending[0].numel():
        take(pending[0], pending_start)
    return split_positions(scores, torch.cat(top)), split_positions(scores, torch.cat(bottom))


def derived_seed(random_seed: int, ability: str, k: float, draw: int = 1) -> int:
    """A 63-bit seed from (random_seed, ability, k, draw): stable across runs, k orders and machines.
    Draw 1 (the paper's single random region) hashes without the draw, as before draws existed."""
    suffix = "" if draw == 1 else f":{draw}"
    digest = hashlib.sha256(f"{random_seed}:{ability}:{format_k(k)}{suffix}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


def random_positions(total: int, n: int, seed: int) -> torch.Tensor:
    """n distinct positions in [0, total), uniform over all n-subsets, sorted; memory O(n).

    Draw with replacement until n distinct values are seen, then keep a uniformly random n of
    them: the procedure treats every position alike, so each n-subset is equally likely.
    """
    import torch

    if not 0 <= n <= total:
        raise BenchprofError(f"random region: n = {n} is not within 0..{total}")
    generator = torch.Generator().manual_seed(seed)
    chosen = torch.empty(0, dtype=torch.int64)
    while chosen.numel() < n:
        draws = torch.randint(total, (2 * (n - chosen.numel()) + 64,), generator=generator, dtype=torch.int64)
        chosen = torch.unique(torch.cat([chosen, draws]))
    keep = torch.randperm(chosen.numel(), generator=generator)[:n]
    return torch.sort(chosen[keep]).values


def split_positions(scores: Scores, positions: torch.Tensor) -> Region:
    """Global candidate positions -> {name: sorted flat indices in that tensor} (empty ones left out)."""
    import torch

    positions = torch.sort(positions.cpu()).values
    bounds = torch.searchsorted(positions, torch.tensor(scores.offsets, dtype=positions.dtype))
    out = {}
    for i, name in enumerate(scores.names):
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        if hi > lo:
            out[name] = positions[lo:hi] - scores.offsets[i]
    return out


def ranked_regions(
    scores: Scores, sizes: dict[float, int], settings: ExtractSettings
) -> dict[float, dict[str, Region]]:
    """{k: {region: indices}} for the top and bottom regions of n = sizes[k] weights that `settings` asks for."""
    regions = settings.region_names()
    chosen: dict[float, dict[str, Region]] = {k: {} for k in sizes}
    if settings.selection == "exact":
        requests = {
            (k, region): (n, region == "top")
            for k, n in sizes.items()
            for region in regions
            if region in ("top", "bottom")
        }
        for (k, region), indices in exact_regions(scores, requests).items():
            chosen[k][region] = indices
    else:
        for k, n in sizes.items():
            top, bottom = chunked_regions(scores, n, settings.chunk_size)
            chosen[k].update({r: v for r, v in (("top", top), ("bottom", bottom)) if r in regions})
    return chosen
