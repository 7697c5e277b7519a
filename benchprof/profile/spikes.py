"""spikes.csv, the claim rule's reach on spiked benchmarks: its rows (`SpikeRow`), the file with the manifest that
ties it to the profile it was measured on (`write_spikes`, `current_spikes`), and the reach ais.md and the terminal
quote (`reach_lines`, `no_claim_reach`). lab/spikes.py measures it (`benchprof spikes`); aggregate quotes it in ais.md
while its manifest's inputs (the profile's per-document scores and settings) still hold.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchprof.core.layout import Output
from benchprof.core.storage import clear_manifest, file_hash, is_current, read_csv, write_csv, write_manifest

if TYPE_CHECKING:
    from benchprof.profile.rows import Profile

SPIKES = "spikes.csv"
PLANTED = "planted"  # source of a row whose effect is planted in the ability's top regions; fraction: the AIS planted
PLANTED_EVERYWHERE = "planted everywhere"  # the same AIS planted in every region alike: the null side
REACH_RATE = 0.8  # a share f is within the rule's reach when it is claimed in at least this share of resamples
# how a claim is counted -> its columns' suffix: the rule as ais.md states it, its conjunction form, on p_correct
RULES = {"claims": "", "conjunction": "_conjunction", "p_correct": "_p_correct"}
RULE_NAMES = {"claims": "the rule", "conjunction": "the conjunction form", "p_correct": "the rule on p_correct"}


@dataclass(frozen=True)
class SpikeRow:
    """One (benchmark, tested ability, mixed-in source, share) of spikes.csv: how often the rule claimed the
    benchmark draws on the tested ability, over resamples of the mixed-in documents."""

    model: str
    benchmark: str
    ability: str  # the ability whose claim is tested
    source: str  # whose documents were mixed in: the ability itself (the positive side) or another (the null); or
    # PLANTED, PLANTED_EVERYWHERE: an effect planted in the ability's top regions (every region) instead
    fraction: float  # the share of B' mixed in; the AIS planted
    documents: int  # mixed in, per resample; made wrong in each planted region
    resamples: int
    claimed: int  # under the rule as ais.md states it (profile/claims.py)
    claimed_conjunction: int = 0  # under its conjunction form (profile/claim_tests.py)
    size: int = 0  # planning: B resampled to this many documents before the effect is planted; 0: B as it is
    # under the rule on p_correct (aggregate.p_correct_claims); None (blank) where not measured: a planted effect
    # moves accuracy only
    claimed_p_correct: int | None = None

    def count(self, rule: str = "claims") -> int | None:
        """The resamples claimed under `rule` (RULES); None where not measured."""
        return getattr(self, f"claimed{RULES[rule]}")

    def rate(self, rule: str = "claims") -> float:
        count = self.count(rule)
        return math.nan if count is None else count / self.resamples


def spikes_output(folder: Path) -> Output:
    """spikes.csv in `folder` and the manifest that vouches for it."""
    return Output("spikes", folder.name, folder / "manifest.json", (folder / SPIKES,))


def write_spikes(rows: list[SpikeRow], out: Path, inputs: dict[str, Any] | None = None) -> Path:
    """spikes.csv in `out`: one row per (benchmark, ability, source, share) with its claim rate; with `inputs`
    (what the profile it was measured on is computed from), a manifest recording them, written last."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / SPIKES
    clear_manifest(out)  # a kill between the two files leaves no manifest vouching for another table
    columns = [f.name for f in fields(SpikeRow)] + [f"rate{RULES[rule]}" for rule in RULES]
    write_csv(path, columns, [asdict(r) | {f"rate{RULES[rule]}": r.rate(rule) for rule in RULES} for r in rows])
    if inputs is not None:
        write_manifest(out, inputs, extra={"command": "spikes"}, files=[path])
    return path


def read_spikes(path: Path) -> list[SpikeRow]:
    """spikes.csv's rows as write_spikes wrote them."""
    kinds = {f.name: str(f.type).removesuffix(" | None") for f in fields(SpikeRow)}
    cast = {"float": float, "int": int}
    return [
        SpikeRow(**{k: cast.get(kinds[k], str)(v) for k, v in r.items() if k in kinds and v != ""})
        for r in read_csv(path)
    ]


def spikes_inputs(documents: Path, profile: dict[str, Any]) -> dict[str, Any]:
    """What a spikes.csv is tied to: the profile's per-document scores (its documents.tar.xz) and what the profile
    is computed from (`profile`: profile_scores.profile_inputs); aggregate quotes it while both hold."""
    return {"documents": file_hash(documents), "profile": profile}


def current_spikes(folder: Path, inputs: dict[str, Any]) -> list[SpikeRow]:
    """The rows of `folder`'s spikes.csv while its manifest holds exactly `inputs` (the profile as it is now); none
    where it is missing or was measured on another profile."""
    if not is_current(spikes_output(folder), inputs):
        return []
    return read_spikes(folder / SPIKES)


def first_reached(rows: list[SpikeRow], rule: str = "claims") -> SpikeRow | None:
    """The row of the smallest level (share or AIS) claimed in at least REACH_RATE of resamples under `rule`."""
    return next((r for r in sorted(rows, key=lambda r: r.fraction) if r.rate(rule) >= REACH_RATE), None)


def _reached(rows: list[SpikeRow], rule: str, what: str) -> str:
    """The smallest level (share or AIS, `what`) claimed in at least REACH_RATE of resamples, or the largest tried."""
    reached = first_reached(rows, rule)
    if reached is not None:
        return f"claimed from {what}{reached.fraction:g} ({_count(reached, rule)} of {reached.resamples})"
    last = max(rows, key=lambda r: r.fraction)
    tried = f"{what}{last.fraction:g} ({_count(last, rule)} of {last.resamples})"
    return f"not claimed in {REACH_RATE:.0%} of resamples up to {tried}"


def _count(row: SpikeRow, rule: str) -> int:
    return row.count(rule) or 0


def reach_lines(
    rows: list[SpikeRow], rule: str = "claims", unspiked: frozenset[tuple[str, str]] = frozenset()
) -> list[str]:
    """Per (benchmark, ability): spiked with its own documents, the smallest share claimed in at least REACH_RATE
    of resamples under `rule` (SpikeRow.rate), or the largest share tried, not reached; per null source, its highest
    claim rate; then, where measured, the same for an AIS planted in its top regions and in every region (not under
    the rule on p_correct: a plant moves accuracy only). A pair in `unspiked` (claimed on the profile as it is) says
    so first: its spikes and null sides measure nothing."""
    lines = []
    if rule == "p_correct":
        rows = [r for r in rows if r.source not in (PLANTED, PLANTED_EVERYWHERE)]
    for benchmark, ability, size in dict.fromkeys((r.benchmark, r.ability, r.size) for r in rows):
        pair = [r for r in rows if (r.benchmark, r.ability, r.size) == (benchmark, ability, size)]
        own = [r for r in pair if r.source == ability]
        planted = [r for r in pair if r.source == PLANTED]
        everywhere = [r for r in pair if r.source == PLANTED_EVERYWHERE]
        null = [r for r in pair if r.source not in (ability, PLANTED, PLANTED_EVERYWHERE)]
        parts = ["claimed unspiked"] if (benchmark, ability) in unspiked else []
        if own:
            parts.append(_reached(own, rule, "f = "))
        elif not planted:
            parts.append("not tried (too few documents to mix in)" if not everywhere else "not planted")
        if null:
            worst = max(null, key=lambda r: r.rate(rule))
            parts.append(f"spiked with {worst.source} instead: claimed {_count(worst, rule)} of {worst.resamples}")
        if planted:
            parts.append("an AIS planted in its top regions: " + _reached(planted, rule, ""))
        if everywhere:
            worst = max(everywhere, key=lambda r: r.rate(rule))
            parts.append(f"planted in every region: claimed {_count(worst, rule)} of {worst.resamples}")
        form = RULE_NAMES[rule]
        planned = f" at {size} documents (planned)" if size else ""
        lines.append(f"{benchmark}{planned} <- {ability} ({form}): " + "; ".join(parts))
    return lines


def _levels(rows: list[SpikeRow], rule: str) -> tuple[dict[float, list[str]], dict[float, list[str]]]:
    """`rows` (one benchmark, one kind of source) by ability: the smallest level claimed in at least REACH_RATE of
    resamples under `rule` -> the abilities reached there; the largest level tried -> those reached nowhere. Rows
    that `rule` did not measure (SpikeRow.count None) are left out."""
    found: dict[float, list[str]] = {}
    missed: dict[float, list[str]] = {}
    rows = [r for r in rows if r.count(rule) is not None]
    for ability in dict.fromkeys(r.ability for r in rows):
        mine = [r for r in rows if r.ability == ability]
        hit = first_reached(mine, rule)
        if hit is None:
            missed.setdefault(max(r.fraction for r in mine), []).append(ability)
        else:
            found.setdefault(hit.fraction, []).append(ability)
    return dict(sorted(found.items())), dict(sorted(missed.items()))


def no_claim_reach(rows: list[SpikeRow], rule: str = "claims") -> dict[str, str]:
    """Per benchmark, the reach its "no claim" line quotes under `rule`, by ability: the smallest share of an
    ability's own items that, mixed in, is claimed in at least REACH_RATE of resamples (a benchmark the rule does not
    claim then takes no more than that share of the ability, at that power), and, under the rule as ais.md states it,
    the smallest AIS planted in the ability's top regions so claimed; or the largest tried where none is. Planned
    sizes (SpikeRow.size) are never quoted."""
    rows = [r for r in rows if not r.size]
    reach = {}
    for benchmark in dict.fromkeys(r.benchmark for r in rows):
        mine = [r for r in rows if r.benchmark == benchmark]
        parts = []
        found, missed = _levels([r for r in mine if r.source == r.ability], rule)
        if found or missed:
            said = []
            if found:  # with the reading a "no claim" allows, at the reach's power
                reached = " and ".join(f"of {', '.join(names)} from {level:g}" for level, names in found.items())
                takes = (
                    "that ability takes no more than that share of it"
                    if sum(map(len, found.values())) == 1
                    else "each of these takes no more than the share it is reached from"
                )
                said.append(f"{reached}, so {takes} ({REACH_RATE:.0%} power)")
            said += [f"of {', '.join(names)} not up to {level:g}" for level, names in missed.items()]
            parts.append("mixed in as a share of it, the items " + "; ".join(said))
        found, missed = _levels([r for r in mine if r.source == PLANTED], rule) if rule != "p_correct" else ({}, {})
        if found or missed:
            said = [f"from {level:g} for {', '.join(names)}" for level, names in found.items()]
            said += [f"not up to {level:g} for {', '.join(names)}" for level, names in missed.items()]
            parts.append("an AIS planted in the top regions " + "; ".join(said))
        if parts:
            text = ". ".join(parts[:1] + [p[0].upper() + p[1:] for p in parts[1:]])
            reach[benchmark] = f"Reach (`benchprof spikes`, claimed in {REACH_RATE:.0%} of resamples): {text}."
    return reach


def quote_reach(profile: Profile, rows: list[SpikeRow]) -> None:
    """Give `profile` the reach its ais.md quotes from spikes.csv's `rows` (none: no reach): the reach lines under
    the rule, and under the rule on p_correct where the profile claims on it, and each benchmark's planted reach
    for its "no claim" line. aggregate quotes a current spikes.csv so; a committed folder's spikes.csv is read back
    so (lab/rerender.folder_profile)."""
    from benchprof.profile.claims import claimed_pairs

    profile.reach, profile.no_claim_reach = reach_lines(rows, unspiked=claimed_pairs(profile)), no_claim_reach(rows)
    if profile.p_correct_claims:  # the same spikes read under the rule on p_correct
        profile.reach += reach_lines(rows, "p_correct", unspiked=claimed_pairs(profile, on_p=True))
        profile.no_claim_reach_p = no_claim_reach(rows, "p_correct")
