"""spikes.csv, the claim rule's reach on spiked benchmarks: its rows (`SpikeRow`), the file with the manifest that
ties it to the profile it was measured on (`write_spikes`), and the reach lines ais.md and the terminal quote
(`reach_lines`, `current_reach`). lab/spikes.py measures it (`benchprof spikes`); aggregate quotes it in ais.md
while its manifest's inputs (the profile's per-document scores and settings) still hold.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from benchprof.core.layout import Output
from benchprof.core.storage import clear_manifest, file_hash, is_current, read_csv, write_csv, write_manifest

SPIKES = "spikes.csv"
REACH_RATE = 0.8  # a share f is within the rule's reach when it is claimed in at least this share of resamples


@dataclass(frozen=True)
class SpikeRow:
    """One (benchmark, tested ability, mixed-in source, share) of spikes.csv: how often the rule claimed the
    benchmark draws on the tested ability, over resamples of the mixed-in documents."""

    model: str
    benchmark: str
    ability: str  # the ability whose claim is tested
    source: str  # whose documents were mixed in: the ability itself (the positive side) or another (the null)
    fraction: float
    documents: int  # mixed in, per resample
    resamples: int
    claimed: int  # under the rule as ais.md states it (profile/claims.py)
    claimed_conjunction: int = 0  # under its conjunction form (profile/claim_tests.py)

    def rate(self, rule: str = "claims") -> float:
        return (self.claimed_conjunction if rule == "conjunction" else self.claimed) / self.resamples


def spikes_output(folder: Path) -> Output:
    """spikes.csv in `folder` and the manifest that vouches for it."""
    return Output("spikes", folder.name, folder / "manifest.json", (folder / SPIKES,))


def write_spikes(rows: list[SpikeRow], out: Path, inputs: dict[str, Any] | None = None) -> Path:
    """spikes.csv in `out`: one row per (benchmark, ability, source, share) with its claim rate; with `inputs`
    (what the profile it was measured on is computed from), a manifest recording them, written last."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / SPIKES
    clear_manifest(out)  # a kill between the two files leaves no manifest vouching for another table
    columns = [f.name for f in fields(SpikeRow)] + ["rate", "rate_conjunction"]
    write_csv(path, columns, [asdict(r) | {"rate": r.rate(), "rate_conjunction": r.rate("conjunction")} for r in rows])
    if inputs is not None:
        write_manifest(out, inputs, extra={"command": "spikes"}, files=[path])
    return path


def read_spikes(path: Path) -> list[SpikeRow]:
    """spikes.csv's rows as write_spikes wrote them."""
    kinds = {f.name: f.type for f in fields(SpikeRow)}
    cast = {"float": float, "int": int}
    return [
        SpikeRow(**{k: cast.get(str(kinds[k]), str)(v) for k, v in r.items() if k in kinds}) for r in read_csv(path)
    ]


def spikes_inputs(documents: Path, profile: dict[str, Any]) -> dict[str, Any]:
    """What a spikes.csv is tied to: the profile's per-document scores (its documents.tar.xz) and what the profile
    is computed from (`profile`: profile_scores.profile_inputs); aggregate quotes it while both hold."""
    return {"documents": file_hash(documents), "profile": profile}


def current_reach(folder: Path, inputs: dict[str, Any]) -> list[str]:
    """The reach lines of `folder`'s spikes.csv while its manifest holds exactly `inputs` (the profile as it is
    now); none where it is missing or was measured on another profile."""
    if not is_current(spikes_output(folder), inputs):
        return []
    return reach_lines(read_spikes(folder / SPIKES))


def reach_lines(rows: list[SpikeRow], rule: str = "claims") -> list[str]:
    """Per (benchmark, ability) spiked with its own documents: the smallest share claimed in at least REACH_RATE
    of resamples under `rule` (SpikeRow.rate), or the largest share tried, not reached; per null source: its
    highest claim rate."""
    lines = []
    for benchmark, ability in dict.fromkeys((r.benchmark, r.ability) for r in rows):
        own = sorted((r for r in rows if (r.benchmark, r.ability, r.source) == (benchmark, ability, ability)),
                     key=lambda r: r.fraction)  # fmt: skip
        null = [r for r in rows if (r.benchmark, r.ability) == (benchmark, ability) and r.source != ability]
        reached = next((r for r in own if r.rate(rule) >= REACH_RATE), None)
        text = f"{benchmark} <- {ability} ({'the conjunction form' if rule == 'conjunction' else 'the rule'}): "
        count = (lambda r: r.claimed_conjunction) if rule == "conjunction" else (lambda r: r.claimed)
        if reached is not None:
            text += f"claimed from f = {reached.fraction:g} ({count(reached)} of {reached.resamples})"
        elif own:
            text += f"not claimed in {REACH_RATE:.0%} of resamples up to f = {own[-1].fraction:g}"
            text += f" ({count(own[-1])} of {own[-1].resamples})"
        else:
            text += "not tried (too few documents to mix in)"
        if null:
            worst = max(null, key=lambda r: r.rate(rule))
            text += f"; spiked with {worst.source} instead: claimed {count(worst)} of {worst.resamples}"
        lines.append(text)
    return lines
