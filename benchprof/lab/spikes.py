"""Spiked benchmarks: positive controls for the claim rule, built from per-document scores alone (no evaluation).

A spiked benchmark B' is benchmark B's documents plus a share f of ability A's held-out (test split) documents,
scored in every variant the profile holds: each variant's B' rows are its own B rows and its own rows of the same
A documents, so B' is what evaluating that mixture would have given. The rule, applied unchanged to the profile with
B' in B's place (the same family, controls and selections), must claim B' <- A; with another ability's documents
mixed in instead (the null side) it must not claim A. How often it claims, over resamples of which A documents are
mixed in, is the rule's reach on B: the smallest f claimed in at least 80% of resamples. Its reach in AIS: an effect
planted in A's top regions (`plant_effect`: round(AIS × the original's right answers) more of B's documents wrong in
each), and on the null side the same effect planted in every region; `--documents N` plans, B first resampled to N.

.venv/bin/python scripts/spike_profile.py docs/results/profile-qwen2.5-0.5b-claims \\
    --pairs arc_easy:Quantitative_Reasoning --null Temporal_Reasoning
"""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from benchprof import BenchprofError
from benchprof.core.layout import Layout, Variant
from benchprof.core.results import DocId, doc_id, iter_samples
from benchprof.profile.spikes import PLANTED, PLANTED_EVERYWHERE, RULES, SpikeRow, reach_lines, write_spikes

if TYPE_CHECKING:
    from tqdm import tqdm

    from benchprof.core.config import Config
    from benchprof.core.selection import Selection
    from benchprof.profile.rows import Profile
    from benchprof.stages.profile_scores import ScoreRun


def _variant_folders(model_dir: Path, benchmark: str) -> list[Path]:
    """Every eval folder under a model's outputs that holds `benchmark`'s result (the original's and each region's)."""
    return sorted({p.parent for p in model_dir.glob(f"**/eval/**/{benchmark}.json")})


def _rows(path: Path) -> list[dict]:
    return [row for _, row in iter_samples(path)]


class Draws(NamedTuple):
    """How a spike or plant is drawn: `resamples` draws from seed `seed` on (draw r: seed + r); `size`, a planned
    number of documents the benchmark is resampled to first (None: as it is)."""

    resamples: int
    seed: int
    size: int | None = None


class TooFew(BenchprofError):
    """A spike that cannot be made: no evaluation of the benchmark or no scores of the source to mix in, a share
    the source's documents cannot make, or one that mixes in no document. Said, not tried."""


def _own_rows(folder: Path, benchmark: str) -> list[dict]:
    """The benchmark's own rows in one variant's folder, as evaluate wrote them: kept beside, as
    `<benchmark>.unspiked.samples.jsonl`, the first time a spike or plant replaces them."""
    samples, kept = folder / f"{benchmark}.samples.jsonl", folder / f"{benchmark}.unspiked.samples.jsonl"
    if not kept.is_file():
        kept.write_bytes(samples.read_bytes())
    return _rows(kept)


def _unspiked(folder: Path, benchmark: str) -> list[dict]:
    """The benchmark's own rows in one variant's folder, read only: its kept copy once a spike replaced them."""
    kept = folder / f"{benchmark}.unspiked.samples.jsonl"
    return _rows(kept if kept.is_file() else folder / f"{benchmark}.samples.jsonl")


def _put(folder: Path, benchmark: str, rows: list[dict]) -> None:
    """`rows` in place of the benchmark's samples file in one variant's folder."""
    (folder / f"{benchmark}.samples.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = folder / f"{benchmark}.json"
    payload = json.loads(result.read_text())
    payload.pop("files", None)  # the samples file is B' now: the record of B's would call it damaged
    result.write_text(json.dumps(payload))


def mixed_in(theirs: list[DocId], own: int, fraction: float, seed: int, spike: str) -> list[DocId]:
    """The documents of a source's split (`theirs`) drawn by `seed` to be a share `fraction` of a benchmark of `own`
    documents once mixed in: round(f / (1 - f) * own) of them. TooFew where that is none, or more than there are."""
    count = round(fraction / (1 - fraction) * own)
    if count < 1:
        raise TooFew(f"{spike} mixes in no document of its {own}")
    if count > len(theirs):
        raise TooFew(f"{spike} needs {count} of its documents; it has {len(theirs)}")
    return random.Random(seed).sample(sorted(theirs, key=str), count)


def spike_sources(model_dir: Path, benchmark: str, source: str) -> tuple[list[DocId], int]:
    """What `spike_benchmark` draws from: the documents of `source`'s split that the first variant folder scored, and
    how many documents the benchmark has there (its share is counted against those; mixed_in draws)."""
    return _sources(model_dir, _variant_folders(model_dir, benchmark), benchmark, source)


def _sources(model_dir: Path, folders: list[Path], benchmark: str, source: str) -> tuple[list[DocId], int]:
    """spike_sources over the benchmark's variant folders, found once by the caller."""
    if not folders:
        raise TooFew(f"{model_dir}: no evaluation of {benchmark!r} to spike")
    source_file = folders[0] / f"{source}.samples.jsonl"
    if not source_file.is_file():
        raise TooFew(f"{folders[0]}: no per-document scores of {source!r} to mix into {benchmark!r}")
    theirs = list(dict.fromkeys(doc_id(row) for row in _rows(source_file)))
    return theirs, len({doc_id(row) for row in _unspiked(folders[0], benchmark)})


def spike_benchmark(model_dir: Path, benchmark: str, source: str, fraction: float, seed: int) -> int:
    """Put B' in place of `benchmark` in every variant under `model_dir`: B's own rows (kept beside, as
    `<benchmark>.unspiked.samples.jsonl`, from the first call on) plus the rows of the same round(f / (1 - f) * n)
    documents of `source`'s split in that variant (`spike_sources`, `mixed_in`), so that they are a share `fraction` of
    B'. Returns how many documents were mixed in. A variant without `source`'s scores, or too few of them, is
    refused."""
    folders = _variant_folders(model_dir, benchmark)
    spike = f"{benchmark} spiked to {fraction:g} with {source}"
    chosen = mixed_in(*_sources(model_dir, folders, benchmark, source), fraction, seed, spike)
    for folder in folders:
        own = _own_rows(folder, benchmark)
        source_file = folder / f"{source}.samples.jsonl"
        if not source_file.is_file():
            raise TooFew(f"{folder}: no per-document scores of {source!r} to mix into {benchmark!r}")
        theirs = {doc_id(row): row for row in _rows(source_file)}
        missing = [d for d in chosen if d not in theirs]
        if missing:
            raise BenchprofError(f"{source_file}: document {missing[0]} of the original's is not scored here")
        _put(folder, benchmark, own + [theirs[d] for d in chosen])
    return len(chosen)


def _resampled(rows: list[dict], drawn: list[DocId] | None) -> list[dict]:
    """`rows` as they are; or, for a planned size, the rows of the `drawn` documents in order, each copy its own
    document (doc_id `<id>~<copy>`)."""
    if drawn is None:
        return rows
    by_doc: dict[DocId, list[dict]] = {}
    for row in rows:
        by_doc.setdefault(doc_id(row), []).append(row)
    return [row | {"doc_id": f"{d[1]}~{j}"} for j, d in enumerate(drawn) for row in by_doc.get(d, [])]


def plant_effect(
    model_dir: Path,
    benchmark: str,
    metric_key: str,
    effect: float,
    seed: int,
    planted: list[Variant],
    size: int | None = None,
) -> int:
    """Plant an AIS of `effect` on `benchmark` in the `planted` variants under `model_dir` (an ability's top
    regions, every selection; or every region, the null side): each loses round(effect × the original's total
    score) more documents on `metric_key` (0/1, higher is better), the first ones still right there in one order
    drawn by `seed`, so that its AIS rises by `effect` (to rounding) and the planted regions lose mostly the same
    documents. Every other variant keeps its own rows. With `size` (planning), the benchmark is first `size`
    documents drawn with replacement from its own (by `seed`, the same in every variant): what a benchmark of that
    size would give, this profile standing as the pilot. Returns how many documents a planted variant loses."""
    from benchprof.core.results import split_key

    layout = Layout(model_dir.parent, model_dir.name)
    metric, filter_name = split_key(metric_key)
    draw = random.Random(seed)
    original = _own_rows(layout.eval_dir(Variant()), benchmark)
    drawn = None if size is None else draw.choices(sorted({doc_id(r) for r in original}, key=str), k=size)
    original = [r for r in _resampled(original, drawn) if r.get("filter", "none") == filter_name]
    if any(r.get(metric) not in (0, 1) for r in original):
        raise TooFew(f"{benchmark}: {metric_key} is not a 0/1 metric on every document; no effect planted")
    count = round(effect * sum(r[metric] for r in original))
    if count < 1:
        raise TooFew(f"{benchmark}: an AIS of {effect:g} moves no document of its {len(original)}")
    documents = sorted({doc_id(r) for r in original}, key=str)
    order = {d: i for i, d in enumerate(draw.sample(documents, len(documents)))}
    chosen = {layout.eval_dir(v): v for v in planted if not v.is_original}
    folders = _variant_folders(model_dir, benchmark)
    if absent := [v.label() for d, v in chosen.items() if d not in folders]:  # never a plant that does nothing
        raise TooFew(f"{benchmark}: no evaluation of it in {absent[0]} to plant an effect in")
    for folder in folders:
        own = _resampled(_own_rows(folder, benchmark), drawn)
        variant = chosen.get(folder)
        if variant is None:
            _put(folder, benchmark, own)
            continue
        right = sorted((r for r in own if r.get("filter", "none") == filter_name and r.get(metric) == 1),
                       key=lambda r: order.get(doc_id(r), len(order)))  # fmt: skip
        if len(right) < count:
            raise TooFew(f"{benchmark}: an AIS of {effect:g} needs {count} documents right in {variant.label()}; it "
                         f"has {len(right)}")  # fmt: skip
        lost = {id(r) for r in right[:count]}  # these very rows (a document has one row per filter)
        _put(folder, benchmark, [r | {metric: 0.0} if id(r) in lost else r for r in own])
    return count


def claimed(profile: Profile, benchmark: str, ability: str, rule: str = "claims") -> bool:
    """Whether the profile claims `benchmark` draws on `ability`: under the rule as ais.md states it
    (profile/claims.py; `rule` "claims"), its conjunction form, every rule in one test (profile/claim_tests.py;
    "conjunction"), or the rule on p_correct ("p_correct")."""
    from benchprof.profile.claim_tests import conjunction_claims
    from benchprof.profile.claims import claimed_pairs

    if rule == "conjunction":
        return (benchmark, ability) in conjunction_claims(profile)
    return (benchmark, ability) in claimed_pairs(profile, on_p=rule == "p_correct")


def spike_rows(
    folder: Path,
    pairs: list[tuple[str, str, str]],
    fractions: list[float],
    resamples: int,
    seed: int = 0,
    skipped: list[str] | None = None,
    effects: list[float] | None = None,
    size: int | None = None,
) -> list[SpikeRow]:
    """spikes.csv's rows for a profile folder (documents.tar.xz and config.yml, lab/rederive.py): for each
    (benchmark, ability, source) and share, the rule applied to the profile with the spiked benchmark in place,
    `resamples` times (each its own draw of documents); with `effects`, for each of the pairs' (benchmark, ability)
    and effect, the same with that AIS planted in the ability's top regions (source PLANTED) and, the null side, in
    every region (PLANTED_EVERYWHERE), with B resampled to `size` documents first where given (planning: plant_effect).
    A share or effect that cannot be made is left out, and why is added to `skipped`."""
    skipped = [] if skipped is None else skipped
    from tqdm import tqdm

    from benchprof.lab.rederive import folder_config
    from benchprof.profile.documents import DOCUMENTS, unpack_documents
    from benchprof.stages.profile_scores import load_scores, rescore_benchmark

    archive = folder / DOCUMENTS
    if not archive.is_file():
        raise BenchprofError(f"{archive}: no per-document scores to spike")
    rows: list[SpikeRow] = []
    effects = effects or []
    with tempfile.TemporaryDirectory(prefix="benchprof-spikes-") as root:
        cfg = folder_config(folder, Path(root))
        tag = cfg.models[0].tag
        unpack_documents(archive, Path(root) / tag)
        runs: list[ScoreRun] = []
        load_scores(cfg, tag, progress=False, run_out=runs)  # every other benchmark's rows, computed once
        pairs = _through_gate(runs[0].profile, pairs, skipped)
        tested = {b: list(dict.fromkeys(a for b2, a, _ in pairs if b2 == b)) for b, _, _ in pairs}
        todo = [(pair, f) for pair in pairs for f in fractions]
        planted = sum(len(a) + 1 for a in tested.values()) * len(effects)
        with tqdm(total=(len(todo) + planted) * resamples, desc="spikes", unit="profile") as bar:
            for (benchmark, ability, source), fraction in todo:
                hits = one_test = on_p = documents = 0
                try:
                    for r in range(resamples):
                        documents = spike_benchmark(Path(root) / tag, benchmark, source, fraction, seed + r)
                        profile = rescore_benchmark(runs[0], benchmark)
                        hits += claimed(profile, benchmark, ability)
                        one_test += claimed(profile, benchmark, ability, "conjunction")
                        on_p += claimed(profile, benchmark, ability, "p_correct")
                        bar.update()
                except TooFew as err:  # a spike that cannot be made: said, not tried
                    skipped.append(str(err))
                    bar.update(resamples)
                    continue
                rows.append(
                    SpikeRow(tag, benchmark, ability, source, fraction, documents, resamples, hits, one_test,
                             claimed_p_correct=on_p)
                )  # fmt: skip
            for benchmark, abilities in tested.items():
                for effect in effects:
                    rows += _planted(runs[0], Path(root) / tag, benchmark, abilities, effect,
                                     Draws(resamples, seed, size), skipped, bar)  # fmt: skip
    return rows


def _through_gate(
    profile: Profile, pairs: list[tuple[str, str, str]], skipped: list[str]
) -> list[tuple[str, str, str]]:
    """The pairs whose ability the gate lets in (claim_tests.gate; every pair where there is none): a spike of an
    ability outside it cannot be claimed, so it is said in `skipped`, not measured as a miss."""
    from benchprof.profile.claim_tests import gate

    opened = gate(profile, profile.report_k)
    if opened is None:
        return pairs
    for ability in dict.fromkeys(a for _, a, _ in pairs if a not in opened):
        skipped.append(f"{ability}: outside the gate (its region is not claimed on its own split), so not tested")
    return [p for p in pairs if p[1] in opened]


def _planted(
    run: ScoreRun,
    model_dir: Path,
    benchmark: str,
    abilities: list[str],
    effect: float,
    draws: Draws,
    skipped: list[str],
    bar: tqdm,
) -> list[SpikeRow]:
    """One benchmark's rows at one planted effect: per ability, planted in its top regions at the profile's report
    k (must be claimed), and planted in every region (must not be: what every region of the size does alike)."""
    from benchprof.profile.rows import is_top
    from benchprof.stages.profile_scores import rescore_benchmark

    resamples, seed, size = draws
    profile, k = run.profile, run.profile.report_k
    metric_key = profile.metrics.get(benchmark)
    if metric_key is None:
        skipped.append(f"{benchmark}: no original evaluation to plant an effect in")
        bar.update(resamples * (len(abilities) + 1))
        return []
    everywhere = [Variant(a, k, r) for a in profile.abilities for r in profile.regions]
    plans = [(a, PLANTED, [Variant(a, k, r) for r in profile.regions if is_top(r)]) for a in abilities]
    plans.append(("", PLANTED_EVERYWHERE, everywhere))
    rows = []
    for ability, source, variants in plans:
        tested = abilities if source == PLANTED_EVERYWHERE else [ability]
        hits, one_test = dict.fromkeys(tested, 0), dict.fromkeys(tested, 0)
        done = documents = 0
        try:
            for done in range(resamples):
                documents = plant_effect(model_dir, benchmark, metric_key, effect, seed + done, variants, size)
                spiked = rescore_benchmark(run, benchmark)
                for a in tested:
                    hits[a] += claimed(spiked, benchmark, a)
                    one_test[a] += claimed(spiked, benchmark, a, "conjunction")
                bar.update()
        except TooFew as err:
            skipped.append(str(err))
            bar.update(resamples - done)
            continue
        rows += [
            SpikeRow(
                model_dir.name, benchmark, a, source, effect, documents, resamples, hits[a], one_test[a], size or 0
            )
            for a in tested
        ]
    return rows


def _listed(value: object) -> list[str]:
    """A comma-separated option as its items (the command line hands `0.1,0.2` over as a tuple, `0.1` as a float)."""
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    return [str(item).strip() for item in items if str(item).strip()]


def _shares(values: object, option: str = "--fractions", empty: bool = False) -> list[float]:
    """A comma-separated option of shares (--fractions) or effects (--planted): each between 0 and 1, refused in one
    line otherwise; none only where `empty` allows it ("" leaves that part out)."""
    try:
        shares = [float(f) for f in _listed(values)]
    except ValueError:
        raise BenchprofError(f"{option}: {values!r} is not a comma-separated list of numbers") from None
    if (not shares and not empty) or any(not 0 < f < 1 for f in shares):
        raise BenchprofError(f"{option}: one value or more, each between 0 and 1 (got {values!r})")
    return shares


def _resamples(resamples: int) -> int:
    """--resamples: at least 1, refused in one line otherwise."""
    if int(resamples) < 1:
        raise BenchprofError(f"--resamples: at least 1 (got {resamples})")
    return int(resamples)


def _size(documents: object) -> int | None:
    """--documents: a planned number of documents (None for 0: the benchmark as it is); else one line."""
    if isinstance(documents, bool) or not isinstance(documents, int) or documents < 0:
        raise BenchprofError(f"--documents: a number of documents, 0 or more (got {documents!r})")
    return documents or None


def main(
    folder: str,
    pairs: str | tuple[str, ...],
    fractions: str | tuple[float, ...] = "0.05,0.1,0.2,0.3",
    resamples: int = 5,
    null: str = "",
    out: str = "",
    seed: int = 0,
    planted: str | tuple[float, ...] = "",
    documents: int = 0,
) -> None:
    """The claim rule's reach on spiked benchmarks of a profile folder: spikes.csv and one line per pair.

    Arguments:
        folder: a profile folder holding documents.tar.xz and config.yml (docs/results/profile-*).
        pairs: benchmark:ability pairs, comma-separated (arc_easy:Quantitative_Reasoning): B spiked with A's own
            test documents, is B' <- A claimed?
        fractions: the shares f of B' that are A's documents, comma-separated.
        resamples: draws of the mixed-in documents per share.
        null: an ability whose documents are mixed in instead, at the same shares (is A claimed all the same?).
        out: the folder spikes.csv goes to (default: a new folder spikes-<profile folder's name> here).
        seed: the first draw's seed (resample r uses seed + r).
        planted: AIS values planted in each pair's top regions, and in every region (the null side),
            comma-separated; default none.
        documents: planning: each benchmark resampled to this many documents before an AIS is planted (0: as it is).
    """
    source = Path(folder)
    triples = []
    for pair in _listed(pairs):
        benchmark, _, ability = pair.partition(":")
        if not ability:
            raise BenchprofError(f"--pairs: {pair!r} is not benchmark:ability")
        triples.append((benchmark, ability, ability))
        if null:
            triples.append((benchmark, ability, null))
    effects = _shares(planted, "--planted", empty=True)
    shares = _shares(fractions, empty=bool(effects))
    resamples = _resamples(resamples)
    skipped: list[str] = []
    rows = spike_rows(source, triples, shares, resamples, int(seed), skipped, effects, _size(documents))
    path = write_spikes(rows, Path(out) if out else Path(f"spikes-{source.resolve().name}"))
    for rule in RULES:
        for line in reach_lines(rows, rule):
            print(line)
    for why in skipped:
        print(f"not tried: {why}")
    print(f"spikes: {len(rows)} rows -> {path}")


def spikes(
    cfg: Config,
    model: str | None = None,
    benchmark: Selection = None,
    ability: Selection = None,
    fractions: str | tuple[float, ...] = "0.05,0.1,0.2",
    resamples: int = 5,
    seed: int = 0,
    planted: str | tuple[float, ...] = "0.02,0.05,0.1,0.2",
    documents: int = 0,
) -> None:
    """Positive controls for the claim rule on this config's profile: each real benchmark B spiked with a share f of
    ability A's test documents (scored in every variant already: no evaluation), and the rule applied unchanged; the
    reach on B is the smallest f claimed in at least 80% of resamples (B not claimed then takes no more than f of A, at
    that power). On the null side B is spiked with the next ability's documents instead (the abilities in config order,
    the last followed by the first): how often A is claimed there, a false claim only where B itself is not claimed to
    draw on A. The reach in AIS: an effect planted in A's top regions on B (each loses that AIS more of B's documents,
    mostly the same ones across the selections), the smallest claimed in 80% of resamples; ais.md's "no claim" lines
    quote both; planted in every region alike (what any region of the size does), it must not be claimed. Reads the
    profile's documents.tar.xz as `benchprof aggregate` last wrote it; writes outputs/<model>/spikes/spikes.csv and
    prints one line per (benchmark, ability), and one more under the rule on p_correct (aggregate.p_correct_claims: the
    mixed-in documents carry their own p_correct; a planted effect moves accuracy only); the next `benchprof aggregate`
    quotes them in ais.md while the profile and the config's aggregate settings are those they were measured under.
    docs/claims.md says how to read them.

    Arguments:
        cfg: the config (on the command line: the path of config.yml).
        model: only this model (name or tag); default every model.
        benchmark: the benchmarks spiked (comma-separated); default every benchmark that is not an ability's split.
        ability: the abilities spiked in (comma-separated); default every ability whose test split is a benchmark.
            Only abilities through the gate (aggregate.claim_gate) are measured; the others are named, not tried.
        fractions: the shares f of B' that are A's documents, comma-separated, each between 0 and 1 ("": none,
            where --planted is given).
        resamples: draws of the mixed-in documents per share, and of the planted documents per AIS (at least 1).
        seed: the first draw's seed (resample r uses seed + r).
        planted: the AIS values planted, comma-separated, each between 0 and 1; "" plants none.
        documents: planning: each benchmark first resampled to this many documents (with replacement, the same in
            every variant) before an AIS is planted, this profile standing as the pilot; 0 (default): as it is.
            A planning run writes spikes/plan-<N>/spikes.csv, which ais.md does not quote.

    spikes.csv holds this run's pairs only: a run narrowed by --benchmark or --ability replaces a wider one.
    """
    import dataclasses
    import shutil
    import time

    from benchprof.core.layout import Layout
    from benchprof.core.loader import effective_config
    from benchprof.core.selection import select
    from benchprof.core.storage import read_json
    from benchprof.profile.documents import DOCUMENTS
    from benchprof.profile.spikes import spikes_inputs
    from benchprof.stages.profile_scores import default_report_k, profile_inputs

    started = time.time()
    splits = [a for a in cfg.abilities() if a in cfg.evals.benchmarks]
    real = [b for b in cfg.evals.benchmarks if cfg.split_of(b) is None]
    spiked, sources = select(benchmark, real, "--benchmark"), select(ability, splits, "--ability")
    effects = _shares(planted, "--planted", empty=True)
    shares = _shares(fractions, empty=bool(effects))  # "" spikes no documents where effects are planted
    resamples, size = _resamples(resamples), _size(documents)
    nulls = {a: splits[(splits.index(a) + 1) % len(splits)] for a in sources if len(splits) > 1}
    triples = [(b, a, s) for b in spiked for a in sources for s in dict.fromkeys([a, nulls.get(a, a)])]
    if not triples:
        raise BenchprofError("spikes: no real benchmark and ability split to spike (evals.benchmarks names both)")
    for spec in cfg.selected_models(model):
        layout = Layout(cfg.output_root, spec.tag)
        archive = layout.profile_dir / DOCUMENTS
        recorded = read_json(layout.profile_dir / "manifest.json") if archive.is_file() else None
        if not isinstance(recorded, dict) or not isinstance(recorded.get("inputs"), dict):
            raise BenchprofError(f"{archive}: no complete profile; run `benchprof aggregate {cfg.path}` first")
        if recorded.get("missing"):  # its archive may hold evaluations aggregate judged stale: not that profile
            raise BenchprofError(
                f"{layout.profile_dir}: the profile lists {recorded['missing']} missing or stale evaluation(s); "
                "spikes read a complete profile (evaluate, then aggregate)"
            )
        profile = recorded["inputs"]  # as aggregate computed it, at its report k
        try:  # the k it was aggregated at, as settings.k_values holds it
            default_report_k(cfg, profile.get("report_k"))
        except BenchprofError:
            raise BenchprofError(
                f"{layout.profile_dir}: the profile is at k = {profile.get('report_k')}, which settings.k_values of "
                f"{cfg.path} no longer holds; run `benchprof aggregate {cfg.path}` first"
            ) from None
        measured = dataclasses.replace(
            cfg, models=[spec], aggregate=dataclasses.replace(cfg.aggregate, report_k=profile.get("report_k"))
        )
        with tempfile.TemporaryDirectory(prefix="benchprof-spikes-") as root:  # the folder spike_rows reads
            folder = Path(root)
            shutil.copyfile(effective_config(measured), folder / "config.yml")
            (folder / DOCUMENTS).symlink_to(archive.resolve())
            skipped: list[str] = []
            rows = spike_rows(folder, triples, shares, resamples, int(seed), skipped, effects, size)
        # a planning run goes beside, never in place of the reach ais.md quotes
        out = layout.spikes_dir / f"plan-{size}" if size else layout.spikes_dir
        # tied to the profile under the rule this run applied (the config's aggregate settings, which may have
        # changed since aggregate): the next aggregate quotes it only under that rule
        path = write_spikes(rows, out, spikes_inputs(archive, profile_inputs(cfg, profile.get("report_k"))))
        on_p = reach_lines(rows, "p_correct") if cfg.aggregate.p_correct_claims else []
        for line in reach_lines(rows) + on_p + [f"not tried: {why}" for why in skipped]:
            print(f"{spec.tag}: {line}")
        print(f"spikes: {spec.tag}: {len(rows)} rows -> {path} ({time.time() - started:.0f}s)")
