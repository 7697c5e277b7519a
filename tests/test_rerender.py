import shutil
from collections import Counter
from pathlib import Path

import pytest

from benchprof import BenchprofError
from benchprof.lab.rerender import folder_profile, rerender, with_claims
from benchprof.profile.claims import claims_markdown

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = sorted((ROOT / "docs" / "results").glob("profile-*"))


def notes(text: str) -> list[str]:
    """The bullets of ais.md's Notes section."""
    lines = text.splitlines()
    if "## Notes" not in lines:
        return []
    section = lines[lines.index("## Notes") + 1 :]
    end = next((i for i, line in enumerate(section) if line.startswith("## ")), len(section))
    return [line for line in section[:end] if line.startswith("- ")]


def note_bodies(text: str) -> list[str]:
    """Each note without the benchmarks it opens with: what a reader would find said twice."""
    return [line.split("): ", 1)[-1] for line in notes(text)]


@pytest.mark.parametrize("folder", COMMITTED, ids=lambda p: p.name)
def test_every_committed_profile_opens_with_its_claims_and_says_each_note_once(folder):
    text = (folder / "ais.md").read_text()
    lines = text.splitlines()
    assert lines[0].startswith("# Benchmark profile: ") and lines[2] == "## Claims"
    assert lines[2 : 2 + len(claims_markdown(folder_profile(folder)))] == claims_markdown(folder_profile(folder))
    assert [body for body, n in Counter(note_bodies(text)).items() if n > 1] == []
    assert with_claims(text, folder_profile(folder)) == text  # re-rendering changes nothing: it is current


def test_committed_profiles_are_found():
    assert len(COMMITTED) >= 7


def test_rerender_puts_the_claims_first_merges_the_notes_and_keeps_the_rest(tmp_path):
    folder = tmp_path / "profile"
    shutil.copytree(COMMITTED[0], folder)
    old = [
        "# Benchmark profile: x (`x`)",
        "",
        "AIS = the reading paragraph.",
        "",
        "## Primary metrics",
        "",
        "a table",
        "",
        "## Notes",
        "",
        "- arc (p_correct): too few changed documents",
        "- piqa (p_correct): too few changed documents",
        "- a note of its own",
    ]
    (folder / "ais.md").write_text("\n".join(old) + "\n")
    rerender(folder)
    text = (folder / "ais.md").read_text()
    claims = claims_markdown(folder_profile(folder))
    assert text.splitlines() == [
        old[0],
        "",
        *claims,
        "",
        "## How to read the tables",
        "",
        *old[2:10],
        "- arc, piqa (p_correct): too few changed documents",
        "- a note of its own",
    ]
    rerender(folder)
    assert (folder / "ais.md").read_text() == text


def test_a_folder_without_ais_csv_is_refused_in_one_line(tmp_path):
    (tmp_path / "ais.md").write_text("# x\n")
    with pytest.raises(BenchprofError, match="no ais.csv"):
        rerender(tmp_path)


def test_a_profile_read_back_says_what_placebo_regions_alone_would_claim(tmp_path):
    """placebo_stars is not a column of ais.csv: read back, it is computed again from the rows, and equals what
    aggregate's profile said (a benchmark at chance left out), so a rerendered ais.md keeps the sentence."""
    from dataclasses import asdict

    from benchprof.core.storage import write_csv
    from benchprof.profile.controls import placebo_stars
    from benchprof.profile.report import CSV_COLUMNS
    from benchprof.profile.rows import ADJUSTED, PRIMARY, AisRow, Profile

    def row(benchmark, ability, region, ais, **fields):
        return AisRow("m", ability, benchmark, 0.01, region, "acc,none", 0.6, 0.5, ais, **fields)

    rows = []
    for benchmark, chance in (("arc", False), ("piqa", True)):
        for i, ability in enumerate("ABC"):
            rows += [
                row(benchmark, ability, "random", 0.01 * i, at_chance=chance),
                row(benchmark, ability, "random2", 0.02 - 0.01 * i, at_chance=chance),
                row(benchmark, ability, "placebo", 0.30 if i == 0 else 0.011, at_chance=chance),
                row(benchmark, ability, ADJUSTED, 0.1, family="" if chance else PRIMARY, at_chance=chance),
            ]
    profile = Profile("m", "m", list("ABC"), ["arc", "piqa"], [0.01], [], 0.01, 0.0, 0, rows=rows)
    profile.metrics = {"arc": "acc,none", "piqa": "acc,none"}
    profile.chance_p = {"arc": 0.001, "piqa": 0.4}
    expected = list(placebo_stars(profile))
    assert expected == [1, 3]  # A's placebo region far beyond the random ones; piqa at chance, not tested
    folder = tmp_path / "profile"
    folder.mkdir()
    write_csv(folder / "ais.csv", CSV_COLUMNS, (asdict(r) for r in rows))
    assert folder_profile(folder).placebo_stars == expected


def test_a_kept_spikes_csv_gives_the_reach_and_without_it_there_is_none(tmp_path):
    """The confirmatory profile keeps the spikes.csv measured on it: its Reach is read back from that file, so a
    folder whose spikes.csv is gone re-renders without it, and one whose spikes.csv says another reach re-renders
    with that."""
    kept = ROOT / "docs" / "results" / "profile-qwen2.5-0.5b-confirm"
    folder = tmp_path / "profile"
    shutil.copytree(kept, folder)
    text = (folder / "ais.md").read_text()
    quantitative = "basic_skills_arithmetic <- Quantitative_Reasoning (the rule): claimed from f = 0.1 (5 of 5)"
    assert "**Reach**" in text and quantitative in text
    assert with_claims(text, folder_profile(folder)) == text
    (folder / "spikes.csv").unlink()
    bare = with_claims(text, folder_profile(folder))
    assert "**Reach**" not in bare and quantitative not in bare and "Reach: an AIS planted" not in bare
    lines = (kept / "spikes.csv").read_text().splitlines()  # the share 0.1 never claimed: the reach is not reached
    (folder / "spikes.csv").write_text(
        "\n".join(
            [lines[0]]
            + [
                line.replace(",5,5,5,0,5,1.0,1.0,1.0", ",5,0,0,0,0,0.0,0.0,0.0")
                if line.startswith("qwen2.5-0.5b-confirm,basic_skills_arithmetic,Quantitative_Reasoning,Quantitative")
                else line
                for line in lines[1:]
            ]
        )
        + "\n"
    )
    moved = with_claims(text, folder_profile(folder))
    assert "basic_skills_arithmetic <- Quantitative_Reasoning (the rule): not claimed in 80% of resamples" in moved
