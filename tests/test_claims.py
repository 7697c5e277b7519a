import math

import numpy as np
import pytest

from benchprof.profile.claims import benchmark_claims, claim_line, claim_lines, claims_markdown
from benchprof.profile.formatting import md_table, terminal_table
from benchprof.profile.report import merged_notes, render_markdown
from benchprof.profile.rows import ADJUSTED, DAMAGE, OWN, P_CORRECT, PRIMARY, SPECIFICITY, AisRow, Profile
from benchprof.profile.terminal import claims_terminal

K = 0.01


def row(ability, benchmark, region, ais, **fields):
    values = {"score_original": 0.6, "score_ablated": None if region == ADJUSTED else 0.5, "metric": "acc,none"}
    return AisRow("m", ability, benchmark, K, region, ais=ais, **(values | fields))


def small_profile() -> Profile:
    """Three benchmarks by hand: `known` with one starred claim (A) and one not (B); `faint` tested and nothing
    starred, its top regions' minimum detectable AIS 0.30 and 0.50; `coin` at chance."""
    claim = {"family": PRIMARY, "control_draws": 4}
    own = {"family": OWN, "control_draws": 4}  # specificity: the own family
    rows = [
        row("A", "known", "top", 0.40, family=DAMAGE, p_value=0.001, significant=True, mde=0.2),
        row("A", "known", ADJUSTED, 0.25, ci_low=0.1, ci_high=0.4, p_value=0.001, significant=True, **claim),
        row("B", "known", "top", 0.15, family=DAMAGE, p_value=0.03, significant=True, mde=0.2),
        row("B", "known", ADJUSTED, 0.02, ci_low=-0.1, ci_high=0.14, p_value=0.7, significant=False, **claim),
        row("A", "known", ADJUSTED, 0.9, metric=P_CORRECT, p_value=0.0, significant=True),  # not the primary metric
        row("A", "faint", "top", 0.10, family=DAMAGE, p_value=0.2, significant=False, mde=0.30),
        row("B", "faint", "top", 0.05, family=DAMAGE, p_value=0.5, significant=False, mde=0.50),
        row("A", "faint", ADJUSTED, 0.05, p_value=0.4, significant=False, **claim),
        row("B", "faint", ADJUSTED, 0.01, p_value=0.9, significant=False, **claim),
        row("A", "coin", "top", 0.3, at_chance=True, chance=0.25, score_original=0.26, p_value=0.01),
        row("A", "coin", ADJUSTED, 0.3, at_chance=True, score_original=0.26, p_value=0.01),
        row("A", SPECIFICITY, ADJUSTED, 0.2, ci_low=0.05, ci_high=0.35, p_value=0.01, significant=True, **own),
    ]
    return Profile(
        model="m",
        name="model",
        abilities=["A", "B"],
        benchmarks=["known", "faint", "coin"],
        k_values=[K],
        regions=["top", "random"],
        report_k=K,
        threshold=0.05,
        bootstrap=100,
        metrics={b: "acc,none" for b in ("known", "faint", "coin")},
        original_scores={"known": 0.6, "faint": 0.6, "coin": 0.26},
        rows=rows,
        chance={"known": 0.25, "faint": 0.25, "coin": 0.25},
        chance_p={"known": 1e-9, "faint": 1e-9, "coin": 0.4},
        notes=[
            "known (p_correct): rows with too few changed documents get no mean test",
            "faint (p_correct): rows with too few changed documents get no mean test",
            "top-random rows at k=0.01: 2 random draw(s) cannot say how much random regions differ",
        ],
    )


def test_each_benchmark_gets_its_verdict_from_the_claim_rows():
    claims = {c.benchmark: c for c in benchmark_claims(small_profile())}
    assert [c.kind for c in claims.values()] == ["claims", "none", "chance"]
    assert [r.ability for r in claims["known"].draws_on] == [
        "A"
    ]  # B's claim row is not starred; p_correct's is not one
    assert claims["known"].top == {"A": 0.40, "B": 0.15}
    assert claims["faint"].mde == 0.40  # the median of 0.30 and 0.50
    assert (claims["coin"].original, claims["coin"].chance) == (0.26, 0.25)


def test_the_lines_say_each_verdict_in_words_with_its_figures():
    lines = claim_lines(small_profile())
    assert lines == [
        "known draws on A (AIS +0.400, +0.250 [+0.100, +0.400] beyond random regions).",
        "faint: no claim (minimum detectable AIS 0.40).",
        "coin: at chance (0.260 against 0.250); no claim.",
        "Specificity: the regions of A (+0.200 [+0.050, +0.350]) lower their own split more than the other splits, "
        "beyond what random regions show there (1 of 1 tested).",
    ]


def test_a_region_that_does_less_than_random_and_benchmarks_without_a_test():
    profile = small_profile()
    faint_b = next(r for r in profile.rows if (r.ability, r.benchmark, r.region) == ("B", "faint", ADJUSTED))
    faint_b.ais, faint_b.ci_low, faint_b.ci_high, faint_b.significant = -0.2, -0.3, -0.1, True
    profile.rows = [r for r in profile.rows if not (r.benchmark == "coin" and r.region == "top")]
    for r in profile.rows:
        if r.benchmark == "coin":
            r.at_chance, r.family, r.p_value = False, "", math.nan
    profile.rows.append(row("A", "other", "top", 0.1))
    lines = claim_lines(profile)
    assert lines[1] == (
        "faint: the region of B (AIS +0.050, -0.200 [-0.300, -0.100] against random regions) lowers it less than "
        "random regions do."
    )
    assert lines[2].startswith("coin, other: no claim can be tested")  # said once for both
    # compare.md says each benchmark's verdict on its own line: an untested one in the same words, never "coin: ."
    untested = {c.benchmark: claim_line(c) for c in benchmark_claims(profile) if c.kind == "untested"}
    assert untested == {b: f"{b}: no claim can be tested, {lines[2].split(' no claim can be tested, ')[1]}"
                        for b in ("coin", "other")}  # fmt: skip


def test_ais_md_opens_with_the_claims_and_the_terminal_says_the_same():
    profile = small_profile()
    text = render_markdown(profile)
    lines = text.splitlines()
    assert lines[0] == "# Benchmark profile: model (`m`)"
    assert lines[2] == "## Claims"
    assert (
        "Holm's correction over the 4 rows of the claim family (the ability splits' rows are a family apart)"
        in lines[4]
    )
    assert lines[6 : 6 + 4] == [f"- {line}" for line in claim_lines(profile)]
    terminal = claims_terminal(profile)
    assert claims_markdown(profile)[-4:] == [" ".join(entry.split()) for entry in terminal[1:]]  # wrapping undone
    assert max(len(line) for entry in terminal for line in entry.splitlines()) <= 120
    assert any("\n  " in entry for entry in terminal)  # a long entry wraps, its lines after the first indented
    assert text.count("rows with too few changed documents") == 1


def test_a_wide_table_is_split_into_tables_that_fit_the_terminal():
    """Each block fits the width and repeats the first column; read side by side, the blocks are the whole table."""
    header = ["ability"] + [f"benchmark_with_a_long_name_{i}" for i in range(7)]
    rows = [[f"Ability_{r}"] + [f"+0.{r}{i}0*" for i in range(7)] for r in range(4)]
    text = terminal_table(header, rows, width=120)
    blocks = [block.splitlines() for block in text.split("\n\n")]
    assert len(blocks) == 3 and max(len(line) for block in blocks for line in block) <= 120
    cells = [[line.strip("| ").split(" | ") for line in block if not line.startswith("|---")] for block in blocks]
    assert all(block[i][0] == ([header] + rows)[i][0] for block in cells for i in range(5))
    joined = [cells[0][i] + [c for block in cells[1:] for c in block[i][1:]] for i in range(5)]
    assert joined == [header] + rows
    assert terminal_table(header[:3], rows, width=120) == md_table(header[:3], [r[:3] for r in rows])  # fits: one


def test_a_note_that_differs_only_in_its_benchmark_is_said_once():
    notes = [
        "arc (p_correct): too few",
        "piqa (p_correct): too few",
        "arc (changes between k values): too few",
        "piqa (changes between k values): too few",
        "a note of its own",
        "arc (p_correct): too few",
        "hellaswag A/k0.01: 3 of 100 resamples had no AIS",
    ]
    assert merged_notes(notes) == [
        "arc, piqa (p_correct): too few",
        "arc, piqa (changes between k values): too few",
        "a note of its own",
        "hellaswag A/k0.01: 3 of 100 resamples had no AIS",
    ]
    assert merged_notes(merged_notes(notes)) == merged_notes(notes)


def test_a_row_read_back_from_ais_csv_is_the_row_written():
    from dataclasses import asdict

    from benchprof.core.storage import csv_cell

    original = row("A", "known", ADJUSTED, 0.25, ci_low=0.1, p_value=0.001, significant=True, family=PRIMARY)
    original.flips_lost, original.at_chance = 3, True
    record = {key: csv_cell(value) if key != "k" else "0.01" for key, value in asdict(original).items()}
    back = AisRow.from_record(record)
    assert back.score_ablated is None and math.isnan(back.ci_high) and back.flips_gained is None
    assert (back.flips_lost, back.at_chance, back.significant, back.k, back.n_docs) == (3, True, True, 0.01, 0)
    assert {key: csv_cell(value) if key != "k" else "0.01" for key, value in asdict(back).items()} == record


def test_with_selections_and_placebo_a_claim_needs_a_majority_of_the_selections():
    """The rule of docs/claims.md: a starred top-random row is a claim only where a majority of the ability's
    selections meet the tests (selections_agree, claim_tests.apply_claim_rule) and their mean is above random
    regions once selections are resampled too (selections_low > 0); the line quotes that mean and says how
    many agree."""
    claim = {"family": PRIMARY, "control_draws": 4, "selections": 3}
    mean = {"selections_ais": 0.22, "selections_low": 0.05, "selections_high": 0.39}
    rows = [
        row("A", "known", "top", 0.40, family=DAMAGE, p_value=0.001, significant=True, mde=0.2),
        row("A", "known", ADJUSTED, 0.25, p_value=0.001, significant=True, selections_agree=2, **claim, **mean),
        row("A", "known", "top-placebo", 0.20, p_value=0.001, significant=True, family=PRIMARY),
        row("B", "known", "top", 0.30, family=DAMAGE, p_value=0.001, significant=True, mde=0.2),
        row("B", "known", ADJUSTED, 0.30, p_value=0.001, significant=True, selections_agree=1, **claim, **mean),
        row("C", "known", "top", 0.30, family=DAMAGE, p_value=0.001, significant=True, mde=0.2),
        row("C", "known", ADJUSTED, 0.30, p_value=0.001, significant=True, selections_agree=3, **claim),
    ]
    rows[-1].selections_ais, rows[-1].selections_low, rows[-1].selections_high = 0.2, -0.01, 0.41
    profile = small_profile()
    profile.rows = rows
    claims = {c.benchmark: c for c in benchmark_claims(profile)}
    # B is starred in 1 of 3 selections only; C in all three, but its selections disagree too much for their mean
    assert [r.ability for r in claims["known"].draws_on] == ["A"]
    line = claim_lines(profile)[0]
    figure = "A (AIS +0.400, +0.220 [+0.050, +0.390] beyond random regions on average over 3 selections, 2 agreeing)"
    assert figure in line and "B (" not in line and "C (" not in line and "untested" not in line
    rows[-1].selections_low = math.nan  # no interval (no per-document results): no claim either, and it says so
    assert [r.ability for r in benchmark_claims(profile)[0].draws_on] == ["A"]
    assert "C met the tests in a majority of selections but has no figure over them" in claim_lines(profile)[0]
    # the top AIS quoted under the rule is the mean over the ability's selections' top regions
    rows.append(row("A", "known", "top2", 0.30, family=DAMAGE, p_value=0.001, significant=True, mde=0.2))
    assert "A (AIS +0.350, +0.220" in claim_lines(profile)[0]
    assert "more than placebo regions" in "\n".join(claims_markdown(profile))
    for r in rows:
        r.selections_agree = 1
    assert benchmark_claims(profile)[0].kind == "none"
    # nothing claimed: what the comparison with the pool of placebo regions (every ability's) could have seen
    placebos = [0.10, 0.16, 0.12, 0.07]
    rows += [
        row(a, "known", f"placebo{s}", v) for (a, s), v in zip([("A", ""), ("A", 2), ("B", ""), ("C", 3)], placebos)
    ]
    from benchprof.stats.power import minimum_detectable_beyond_control

    level = 0.05 / sum(r.family == PRIMARY for r in rows)
    expected = minimum_detectable_beyond_control(float(np.std(placebos, ddof=1)), 4, level)
    assert benchmark_claims(profile)[0].mde_placebo == pytest.approx(expected, abs=1e-12)
    assert f"against the original model, at least {expected:.2f} beyond placebo regions)" in claim_lines(profile)[0]


def test_the_minimum_detectable_ais_beyond_placebo_regions_has_its_power_over_many_pools():
    """The smallest top − placebo the predictive t detects with 80% power (stats.power.
    minimum_detectable_beyond_control): over 4,000 simulated pools of D normal placebo regions with a top region
    shifted by that figure, stats.control.top_against_random rejects at the level in 0.80 of them (± 2 × 0.0063);
    and with many draws the figure tends to the normal one, (z_{1−α/2} + z_0.8)·σ."""
    from statistics import NormalDist

    from benchprof.stats.control import top_against_random
    from benchprof.stats.power import minimum_detectable_beyond_control

    rng = np.random.default_rng(5)
    for draws, level in ((8, 0.05), (24, 0.05 / 40)):
        delta = minimum_detectable_beyond_control(0.03, draws, level)
        pools = rng.normal(0.0, 0.03, (4000, draws + 1))
        rejected = [top_against_random(p[0] + delta, list(p[1:])).p_value < level for p in pools]
        assert abs(np.mean(rejected) - 0.8) <= 2 * math.sqrt(0.8 * 0.2 / 4000), (draws, np.mean(rejected))
    normal = (NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)) * 0.03
    assert minimum_detectable_beyond_control(0.03, 100_000, 0.05) == pytest.approx(normal, rel=1e-3)
    assert math.isnan(minimum_detectable_beyond_control(0.03, 2)) and math.isnan(
        minimum_detectable_beyond_control(0, 8)
    )
