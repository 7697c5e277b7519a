"""A committed profile's ais.md brought up to the current report's opening, from the files its folder keeps.

A committed profile (docs/results/profile-*/) keeps ais.csv, ais.md, benchmarks.csv, similarity.csv, overlap.csv,
its config.yml and, where `benchprof spikes` measured it, spikes.csv; not ais.json nor the evaluations. The chance
tests' p-values, the null calibration, the k steps, the missing evaluations and the notes are only in ais.md's text,
so the whole report cannot be computed again from the folder. What the Claims need is all in ais.csv: every row with
its family, star, interval, minimum detectable AIS and at-chance flag; their Reach is in spikes.csv. So this
rewrites two parts of ais.md and leaves every other line as it was: its opening (the Claims of profile/claims.py and
the Reach, then the heading over the reading paragraph) and its Notes (each said once, report.merged_notes).
"""

from __future__ import annotations

from pathlib import Path

from benchprof import BenchprofError
from benchprof.core.config import AggregateSettings
from benchprof.core.storage import read_csv, write_text
from benchprof.profile.claims import claims_markdown
from benchprof.profile.controls import placebo_stars
from benchprof.profile.report import READING, merged_notes, reach_markdown
from benchprof.profile.rows import HOLM_FAMILIES, P_CLAIM, P_CORRECT, SPECIFICITY, AisRow, Profile
from benchprof.profile.spikes import SPIKES, quote_reach, read_spikes

NOTES = "## Notes"
MORE = "- ... and "  # the line that counts the notes ais.md did not show


def folder_profile(folder: Path) -> Profile:
    """The profile the Claims need, from a committed folder: ais.csv's rows (with what they say of each benchmark's
    primary metric and chance, and the placebo regions' stars computed again from them), aggregate.alpha and
    report_k from its config.yml (the defaults where it names none: the largest k), and the reach of the spikes.csv
    it keeps, if any (measured on this profile by `benchprof spikes`)."""
    import yaml

    csv_path, config_path = folder / "ais.csv", folder / "config.yml"
    if not csv_path.is_file():
        raise BenchprofError(f"{folder}: no ais.csv to read the claims from")
    rows = [AisRow.from_record(record) for record in read_csv(csv_path)]
    if not rows:
        raise BenchprofError(f"{csv_path}: no rows")
    config = yaml.safe_load(config_path.read_text()) if config_path.is_file() else {}
    aggregate = (config or {}).get("aggregate") or {}
    k_values = sorted({row.k for row in rows})
    report_k = float(aggregate.get("report_k") or k_values[-1])
    defaults = AggregateSettings()
    profile = Profile(
        model=rows[0].model,
        name=rows[0].model,
        abilities=list(dict.fromkeys(row.ability for row in rows)),
        benchmarks=list(dict.fromkeys(row.benchmark for row in rows if row.benchmark != SPECIFICITY)),
        k_values=k_values,
        regions=list(dict.fromkeys(row.region for row in rows)),
        report_k=report_k,
        threshold=float(aggregate.get("threshold", defaults.threshold)),
        bootstrap=int(aggregate.get("bootstrap", defaults.bootstrap)),
        rows=rows,
        alpha=float(aggregate.get("alpha", defaults.alpha)),
        claim_gate=bool(aggregate.get("claim_gate", defaults.claim_gate)),  # as aggregate would test them again
        # each benchmark's primary metric (its claim rows') and whether it is at chance, as the rows say
        metrics={row.benchmark: row.metric for row in rows if row.family in HOLM_FAMILIES and row.metric != P_CORRECT},
        chance_p={row.benchmark: 1.0 if row.at_chance else 0.0 for row in rows if row.benchmark != SPECIFICITY},
    )
    profile.placebo_stars = list(placebo_stars(profile))  # what ais.md's Claims say of the placebo regions
    declared = aggregate.get("p_correct_claims")  # an older config names none: the rows say whether it claimed so
    profile.p_correct_claims = bool(declared) if declared is not None else any(row.family == P_CLAIM for row in rows)
    if (folder / SPIKES).is_file():  # the spikes.csv measured on this profile, kept beside its ais.md
        quote_reach(profile, read_spikes(folder / SPIKES))
    return profile


def with_claims(text: str, profile: Profile) -> str:
    """ais.md's text opening with the profile's Claims and Reach (replacing any it had) and its Notes each said once;
    the rest unchanged."""
    lines = text.rstrip("\n").split("\n")
    title, rest = lines[0], lines[1:]
    if READING in rest:  # rendered since the Claims exist: replace them
        rest = rest[rest.index(READING) + 1 :]
    while rest and not rest[0].strip():
        rest = rest[1:]
    lines = [title, "", *claims_markdown(profile), *reach_markdown(profile), "", READING, "", *rest]
    if NOTES in lines:
        start = lines.index(NOTES) + 1
        end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
        section = lines[start:end]
        notes = [line[2:] for line in section if line.startswith("- ") and not line.startswith(MORE)]
        more = [line for line in section if line.startswith(MORE)]
        lines[start:end] = ["", *[f"- {note}" for note in merged_notes(notes)], *more] + (
            [""] if end < len(lines) else []
        )
    return "\n".join(lines) + "\n"


def rerender(folder: Path) -> Path:
    """Rewrite `folder`/ais.md to open with its Claims (from ais.csv) and say each note once; returns its path."""
    path = folder / "ais.md"
    if not path.is_file():
        raise BenchprofError(f"{folder}: no ais.md to re-render")
    write_text(path, with_claims(path.read_text(), folder_profile(folder)))
    return path


def main(*folders: str) -> None:
    """Re-render each committed profile folder's ais.md (docs/results/profile-*) so that it opens with its Claims.

    Arguments:
        folders: profile folders holding ais.csv, ais.md and config.yml.
    """
    if not folders:
        raise BenchprofError("name at least one profile folder (docs/results/profile-*)")
    for folder in folders:
        path = rerender(Path(folder))
        print(f"{path}: opens with its Claims")
