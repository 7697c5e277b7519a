"""The committed claims profiles (docs/results/profile-qwen2.5-0.5b-claims, profile-qwen2.5-1.5b-claims,
profile-qwen2.5-1.5b-mmlu and profile-smollm2-claims, docs/research/claims-runs.md's declared runs) read back from their
files: each figure over selections equals the mean of its selections' top AIS less the mean of the random pool, computed
here from ais.csv's own rows; the claims ais.md states are exactly the (benchmark, ability) pairs
docs/research/claims-runs.md's rule admits, applied by hand to ais.csv's columns."""

from __future__ import annotations

import math
import re
import statistics
from pathlib import Path

import pytest

from benchprof.core.storage import read_csv

FOLDER = Path(__file__).resolve().parents[1] / "docs" / "results" / "profile-qwen2.5-0.5b-claims"
ROWS = read_csv(FOLDER / "ais.csv")
# folder: (figured top-random rows, random regions in the pool, the known answers the profile claims)
CLAIMS_RUNS = {
    "profile-qwen2.5-0.5b-claims": (232, 8, set()),
    "profile-qwen2.5-1.5b-claims": (49, 4, set()),
    "profile-qwen2.5-1.5b-mmlu": (57, 4, set()),
    "profile-smollm2-claims": (232, 8, set()),
}
KNOWN_ANSWERS = {
    ("basic_arithmetic", "Quantitative_Reasoning"),
    ("copa", "Commonsense_Causal"),
    ("mmlu_elementary_mathematics", "Quantitative_Reasoning"),
}


def number(text: str) -> float:
    return float(text) if text else math.nan


@pytest.mark.parametrize("name", CLAIMS_RUNS)
def test_each_figure_over_selections_is_its_selections_mean_less_the_random_pool(name: str):
    rows = read_csv(FOLDER.parent / name / "ais.csv")
    count, pool_size, _ = CLAIMS_RUNS[name]
    figured = [r for r in rows if r["region"] == "top-random" and r["selections_ais"]]
    assert len(figured) == count  # each ability on each benchmark, on each metric with a top-random row
    for row in figured:
        cell = [r for r in rows if (r["benchmark"], r["k"], r["metric"]) == (row["benchmark"], row["k"], row["metric"])]
        tops = [
            number(r["ais"]) for r in cell if r["ability"] == row["ability"] and r["region"] in ("top", "top2", "top3")
        ]
        pool = [number(r["ais"]) for r in cell if re.fullmatch(r"random\d*", r["region"])]
        assert len(tops) == 3 and len(pool) == pool_size
        assert number(row["selections_ais"]) == pytest.approx(statistics.mean(tops) - statistics.mean(pool), abs=1e-12)
        assert number(row["selections_low"]) < number(row["selections_ais"]) < number(row["selections_high"])


@pytest.mark.parametrize("name", CLAIMS_RUNS)
def test_the_stated_claims_are_the_rule_applied_by_hand(name: str):
    """Rule 1-4 in at least 2 of 3 selections (selections_agree), rule 5 (selections_low above 0), on benchmarks
    the model is above chance on; ais.md's Claims name exactly those, and of the declared known answers exactly the
    ones docs/research/claims-runs.md reports found."""
    folder = FOLDER.parent / name
    by_hand = {
        (r["benchmark"], r["ability"])
        for r in read_csv(folder / "ais.csv")
        if r["region"] == "top-random"
        and r["family"] == "claim"
        and int(r["selections_agree"] or 0) >= 2
        and number(r["selections_low"]) > 0
    }
    text = (folder / "ais.md").read_text()
    claims = text[text.index("## Claims") : text.index("## How to read")]
    stated = {
        (benchmark, ability)
        for benchmark, abilities in re.findall(r"^- (\S+) draws on (.+?) \(AIS", claims, re.M)
        for ability in re.split(r", | and ", abilities)
    }
    assert stated == by_hand
    assert stated & KNOWN_ANSWERS == CLAIMS_RUNS[name][2]


def test_compare_states_each_models_claims_as_its_own_ais_md_does():
    """compare.md's claims section, for this profile beside another model's at a different k (the size rule), gives
    each benchmark's verdict in exactly the words of that model's ais.md, and claims.csv holds exactly the tested
    claim rows of each ais.csv at its report k, with the claimed pairs the rule admits by hand."""
    from benchprof.core.layout import format_k
    from benchprof.lab.rerender import folder_profile
    from benchprof.profile.analyses import compare_models
    from benchprof.profile.compare_report import claim_table, render_comparison

    other = FOLDER.parent / "profile-smollm2-qwen-match"
    profiles = [folder_profile(FOLDER), folder_profile(other)]
    ks = [p.report_k for p in profiles]
    assert ks[0] != ks[1]
    comparison = compare_models(profiles, [{}, {}], own_k=True)
    markdown = render_comparison(comparison)
    section = markdown[markdown.index("## Each model's claims") : markdown.index("## Each benchmark's profile")]
    for profile, folder in zip(profiles, (FOLDER, other), strict=True):
        text = (folder / "ais.md").read_text()
        lines = re.findall(r"^- (.+)$", text[text.index("## Claims") : text.index("## How to read")], re.M)
        stated = [line for line in lines if not line.startswith("Specificity:")]
        k = format_k(profile.report_k)
        assert stated and all(f"- {profile.model} (k = {k}): {line}\n" in section for line in stated)
    table = [r for r in claim_table(comparison) if r["model"] == profiles[0].model]
    rows = {
        (r["benchmark"], r["ability"]): r
        for r in ROWS
        if r["region"] == "top-random" and r["family"] == "claim" and r["p_value"] and r["benchmark"] != "specificity"
    }  # the specificity rows are claim rows of another kind, not a benchmark's
    got = {(r["benchmark"], r["ability"]): r["selections_ais"] for r in table}
    assert got == pytest.approx({key: number(r["selections_ais"]) for key, r in rows.items()}, nan_ok=True)
    by_hand = {
        key for key, r in rows.items() if int(r["selections_agree"] or 0) >= 2 and number(r["selections_low"]) > 0
    }
    assert {(r["benchmark"], r["ability"]) for r in table if r["claimed"]} == by_hand
    assert "**+0.609 [+0.459, +0.759] 3/3**" in section  # Quantitative_Reasoning on its own split, claimed


def test_two_committed_folders_compare_from_their_documents_alone(tmp_path):
    """scripts/rederive_profile.py --compare: the two folders' per-document scores unpacked and compared by
    `benchprof compare`, each model at its own k; every difference is the two committed ais.csv's top AIS apart,
    and claims.csv's figures are the committed ones."""
    from benchprof.lab.rederive import main

    other = FOLDER.parent / "profile-smollm2-qwen-match"
    main(str(other), str(FOLDER), compare=str(tmp_path / "out"), plots=False)
    top = {
        (r["model"], r["benchmark"], r["ability"]): number(r["ais"])
        for folder in (FOLDER, other)
        for r in read_csv(folder / "ais.csv")
        if r["region"] == "top" and r["family"] in ("damage", "claim")
    }
    differences = [r for r in read_csv(tmp_path / "out" / "differences.csv") if r["benchmark"] != "specificity"]
    assert len(differences) == 80  # 10 benchmarks above chance in both x 8 abilities
    for r in differences:
        assert (r["model_a"], float(r["k"]), float(r["k_b"])) == ("smollm2-qwen-match", 0.0033, 0.002493)
        a, b = top[(r["model_a"], r["benchmark"], r["ability"])], top[(r["model_b"], r["benchmark"], r["ability"])]
        assert float(r["difference"]) == pytest.approx(a - b, abs=1e-9)
    claims = [r for r in read_csv(tmp_path / "out" / "claims.csv") if r["model"] == "qwen2.5-0.5b-claims"]
    kept = {
        (r["benchmark"], r["ability"]): number(r["selections_ais"])
        for r in ROWS
        if r["region"] == "top-random" and r["family"] == "claim"
    }
    # 15 benchmarks above chance x 8 abilities, less the 7 real benchmarks' pairs of the 4 abilities outside the gate
    # (their regions are not claimed on their own split: not tested, so no claim row)
    assert len(claims) == 120 - 7 * 4
    gated = {"Commonsense_Causal", "Deductive_Reasoning", "Long_Term_Knowledge", "Semantic_Relationship"}
    splits = {r["ability"] for r in claims}  # the 8 abilities' own splits, whose pairs the gate never removes
    assert not [r for r in claims if r["ability"] in gated and r["benchmark"] not in splits]
    assert len([r for r in claims if r["benchmark"] in splits]) == 8 * 8
    for r in claims:
        assert number(r["selections_ais"]) == pytest.approx(kept[(r["benchmark"], r["ability"])], abs=1e-12)
