"""Which spikes the documents could show at all: a lenient test beside the claim rule's reach (lab/spikes.py).

A spike mixes a share f of ability A's own test documents into benchmark B (`spikes.spike_sources`, `spikes.mixed_in`).
On the mixture the claim's core question is whether A's top regions lower B' more than random regions of their size,
beyond what the controls (placebo regions, breadth) say any region of the kind does to B. The lenient test takes those
controls as perfect and free: per document, d = (the random pool's mean score) − (A's top regions' mean score, over the
selections); B's own documents' d are centred (whatever they lose to A's regions beyond random ones is taken as
explained, at no cost in noise), the mixed-in documents' d kept; then the package's paired mean test
(stats.paired.units_mean_p, one-sided) at alpha, with no selections test, no variance of the random draws and no
correction over the family. A share it misses in most draws is one the rule, which pays for all of those, is unlikely to
reach on these documents. It is no strict bound: centring removes all of B's own loss, which a rule's controls need not,
and the rule's reach rests on a few resamples; where the rule reaches a share the lenient test does not, the summary
counts it.

.venv/bin/python scripts/spike_bound.py docs/results/profile-qwen2.5-0.5b-claims docs/results/spikes/g-q05.csv
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from benchprof import BenchprofError
from benchprof.core.layout import Layout, Variant, format_k
from benchprof.core.results import DocId, primary_metric, read_p_correct, read_results, read_samples
from benchprof.lab.spikes import TooFew, mixed_in, spike_sources
from benchprof.profile.spikes import REACH_RATE

if TYPE_CHECKING:
    from benchprof.core.config import Config

METRICS = ("accuracy", "p_correct")  # the benchmark's primary metric, and each item's probability of the right option


@dataclass(frozen=True)
class BoundRow:
    """One (benchmark, ability, share, metric): how often the lenient test passed over resamples of the mix."""

    benchmark: str
    ability: str
    fraction: float
    metric: str
    documents: int  # mixed in, per resample
    resamples: int
    passed: int

    @property
    def rate(self) -> float:
        return self.passed / self.resamples


class Differences:
    """Per document, the random pool's mean score minus A's top regions' mean score, for each benchmark and each
    ability's split, on the benchmark's metric (and on p_correct where it has one): read once from a profile's
    outputs tree at its report k."""

    def __init__(self, cfg: Config, k: float) -> None:
        self.cfg, self.layout = cfg, Layout(cfg.output_root, cfg.models[0].tag)
        self.k_dir = f"k{format_k(k)}"
        self.randoms = [v for a in cfg.abilities() for v in self._regions(a, "random")]
        if not self.randoms:
            raise BenchprofError(f"{self.layout.model_dir}: no random regions at {self.k_dir} to compare with")

    def _regions(self, ability: str, prefix: str) -> list[Path]:
        folder = self.layout.model_dir / ability / "eval" / self.k_dir
        return sorted(p for p in folder.glob(f"{prefix}*") if p.is_dir()) if folder.is_dir() else []

    def metric_key(self, benchmark: str) -> str:
        """The benchmark's primary metric as aggregate reads it (aggregate.metrics, else the first of acc_norm, …)."""
        _, results = read_results(self.layout.eval_file(Variant(), benchmark))
        key = primary_metric(results, self.cfg.aggregate.metrics.get(benchmark))
        if key is None:
            raise BenchprofError(f"{benchmark}: no metric in its original results")
        return key

    def of(self, file: str, ability: str, metric_key: str, metric: str) -> dict[DocId, float]:
        """For the documents in `file` (a benchmark's or a split's, read with `metric_key`): d = mean over the
        random pool − mean over `ability`'s top regions; only documents every region scored."""
        tops = self._regions(ability, "top")
        if not tops:
            raise BenchprofError(f"{self.layout.model_dir / ability}: no top regions at {self.k_dir}")

        def scores(folder: Path) -> dict[DocId, float]:
            path = folder / f"{file}.samples.jsonl"
            per_doc, why = (read_p_correct if metric == "p_correct" else read_samples)(path, metric_key)
            if per_doc is None:
                raise BenchprofError(f"{path}: no per-document {metric} ({why})")
            return {key[:2]: value for key, value in per_doc.items()}

        top, rand = [scores(f) for f in tops], [scores(f) for f in self.randoms]
        docs = set.intersection(*(set(s) for s in top + rand))
        return {d: float(np.mean([s[d] for s in rand]) - np.mean([s[d] for s in top])) for d in docs}


def lenient_test(differences: np.ndarray, alpha: float) -> bool:
    """Whether the mean of the per-document `differences` is above 0 at `alpha`, one-sided, by the paired mean test
    of the profile's p_correct rows (stats.paired: sign flips up to EXACT_UNITS changed documents, else Student's t)."""
    from benchprof.stats.paired import one_sided_p, units_mean_p

    return bool(one_sided_p(float(units_mean_p(differences)), float(differences.mean())) < alpha)


def bound_rows(
    folder: Path, pairs: list[tuple[str, str]], fractions: list[float], resamples: int, seed: int = 0
) -> tuple[list[BoundRow], list[str]]:
    """For each (benchmark, ability) pair and share f of a profile folder (documents.tar.xz, config.yml): the lenient
    test on B' = B's documents plus the documents spikes.mixed_in draws for resample r (seed + r, as `benchprof
    spikes` draws them), on each metric the benchmark has; and the shares that cannot be made, said."""
    from benchprof.lab.rederive import folder_config
    from benchprof.profile.documents import DOCUMENTS, unpack_documents
    from benchprof.stages.profile_scores import default_report_k

    archive = folder / DOCUMENTS
    if not archive.is_file():
        raise BenchprofError(f"{archive}: no per-document scores to bound")
    rows: list[BoundRow] = []
    skipped: list[str] = []
    with tempfile.TemporaryDirectory(prefix="benchprof-bound-") as root:
        cfg = folder_config(folder, Path(root))
        model_dir = Path(root) / cfg.models[0].tag
        unpack_documents(archive, model_dir)
        diffs = Differences(cfg, default_report_k(cfg))
        for benchmark, ability in pairs:
            key = diffs.metric_key(benchmark)
            for metric in METRICS:
                try:
                    own = diffs.of(benchmark, ability, key, metric)
                    theirs = diffs.of(ability, ability, key, metric)
                except BenchprofError as err:
                    if metric == "p_correct":  # a benchmark without p_correct (a string target): accuracy only
                        skipped.append(str(err))
                        continue
                    raise
                base = np.array([own[d] for d in sorted(own, key=str)])
                base -= base.mean()  # the controls, perfect: B's own loss to A's regions explained
                drawn_from = spike_sources(model_dir, benchmark, ability)
                for fraction in fractions:
                    passed = documents = 0
                    spike = f"{benchmark} spiked to {fraction:g} with {ability}"
                    try:
                        for r in range(resamples):
                            chosen = mixed_in(*drawn_from, fraction, seed + r, spike)
                            unscored = [d for d in chosen if d not in theirs]
                            if unscored:
                                raise BenchprofError(f"{ability}: document {unscored[0]} is not scored in every region")
                            mixed = np.concatenate([base, [theirs[d] for d in chosen]])
                            passed += lenient_test(mixed, cfg.aggregate.alpha)
                            documents = len(chosen)
                    except TooFew as err:
                        skipped.append(str(err))
                        continue
                    rows.append(BoundRow(benchmark, ability, fraction, metric, documents, resamples, passed))
    return rows, skipped


@dataclass
class Tally:
    """What `main`'s summary counts: pairs reached on either metric by the rule, by the lenient test, by neither,
    and the (pair, metric) cases the rule reaches at a smaller share than the lenient test."""

    pairs: int = 0
    rule: int = 0
    lenient: int = 0
    neither: int = 0
    rule_first: int = 0


def main(folder: str, spikes: str, resamples: int = 200, seed: int = 0) -> None:
    """The lenient test beside the rule's reach: for each pair of a spikes.csv measured on the profile folder (its
    rows whose source is the ability itself, at their shares), the rate the lenient test passes over `resamples`
    draws, on accuracy and on p_correct; one line per pair, then a summary with the pairs neither reaches.

    Arguments:
        folder: a profile folder holding documents.tar.xz and config.yml (docs/results/profile-*).
        spikes: a spikes.csv of the rule on that profile (`benchprof spikes` or scripts/spike_profile.py).
        resamples: draws of the mixed-in documents per share (the rule's spikes.csv has its own, often 5).
        seed: the first draw's seed (resample r uses seed + r; the rule's first draws are the same documents).
    """
    import time

    from benchprof.profile.spikes import first_reached, read_spikes

    started = time.time()
    if not Path(spikes).is_file():
        raise BenchprofError(f"{spikes}: no such spikes.csv")
    try:
        measured = read_spikes(Path(spikes))
    except (TypeError, ValueError) as err:  # a column missing, unknown or not a number
        raise BenchprofError(f"{spikes}: not a spikes.csv ({err})") from None
    rule = [r for r in measured if r.source == r.ability and not r.size]
    if not rule:
        raise BenchprofError(f"{spikes}: no row of an ability's own items mixed in")
    pairs = list(dict.fromkeys((r.benchmark, r.ability) for r in rule))
    rows, skipped = bound_rows(Path(folder), pairs, sorted({r.fraction for r in rule}), int(resamples), int(seed))
    tally = Tally(pairs=len(pairs))
    for benchmark, ability in pairs:
        theirs = [r for r in rule if (r.benchmark, r.ability) == (benchmark, ability)]
        said, by_rule_any, lenient_any = [], False, False
        for metric, name in (("accuracy", "claims"), ("p_correct", "p_correct")):
            hit = first_reached(theirs, name)
            by_rule = None if hit is None else hit.fraction
            mine = sorted(
                (r for r in rows if (r.benchmark, r.ability, r.metric) == (benchmark, ability, metric)),
                key=lambda r: r.fraction,
            )
            lenient = next((r.fraction for r in mine if r.rate >= REACH_RATE), None)
            rates = ", ".join(f"{r.fraction:g}: {r.rate:.2f}" for r in mine) or "not measured"
            said.append(f"{metric}: rule {by_rule if by_rule is not None else '-'}, lenient test {rates}")
            by_rule_any |= by_rule is not None
            lenient_any |= lenient is not None
            tally.rule_first += by_rule is not None and (lenient is None or lenient > by_rule)
        tally.rule += by_rule_any
        tally.lenient += lenient_any
        tally.neither += not (by_rule_any or lenient_any)
        print(f"{benchmark} <- {ability}: " + "; ".join(said))
    for why in dict.fromkeys(skipped):
        print(f"not measured: {why}")
    print(
        f"spike_bound: {tally.pairs} pairs reached at f <= {max(r.fraction for r in rule):g} on either metric: by the "
        f"rule {tally.rule}, by the lenient test {tally.lenient}, by neither {tally.neither}; (pair, metric) cases the "
        f"rule reaches at a smaller share than the lenient test: {tally.rule_first} ({time.time() - started:.0f}s)"
    )
