"""The claim rule on p_correct (aggregate.p_correct_claims, docs/claims.md): its own Holm family, its lines, and its
rates over many simulated profiles through the whole aggregate path (result files with each option's log-likelihood
in, ais.csv rows and Claims out).

The situation the continuous metric is for: every region the procedure chooses lowers the right option's margin a
little on every benchmark, and regions differ. With no ability doing more, the rule on p_correct must keep its false
claims at alpha; with Quantitative_Reasoning's regions lowering one benchmark's margins more, by an amount that flips
few answers, it must find the claim that the rule on accuracy mostly misses.
"""

import math
import shutil
import statistics

import numpy as np
import pytest
from test_aggregate import write_eval
from test_placebo_rates import ABILITIES, BENCHMARKS, REGIONS, TARGET, K, rule_config

from benchprof.core.layout import Layout, Variant
from benchprof.core.loader import load_config
from benchprof.lab.rerender import folder_profile
from benchprof.profile.cells import family_of
from benchprof.profile.claims import benchmark_claims, claim_lines, claimed_pairs, claims_markdown
from benchprof.profile.report import write_tables
from benchprof.profile.rows import ADJUSTED, P_CLAIM, P_CORRECT, PRIMARY, SECONDARY, AisRow
from benchprof.stages.aggregate import load_scores

PROFILES = 100  # per scenario: the rate's standard error at 0.05 is 0.022
N = 200  # items per benchmark
HURT = 0.1  # every region lowers every right option's margin by this much on average (a real LLM's regions all hurt)
PROCEDURE = 0.3  # every chosen region (top or placebo) lowers it by this much more


def simulate(tmp_path, rng: np.random.Generator, effect: float, centre: float = 1.0, p_claims: bool = True):
    """One profile of two-option items: each document's margin (the right option's log-likelihood less the
    other's) is N(centre, 1.5) in the original run; a region moves every margin by its own shift (N(−HURT, 0.1):
    regions differ) and each by N(0, 0.3); top and placebo regions also by −PROCEDURE everywhere, and
    with `effect` the Quantitative_Reasoning top regions by −effect more on TARGET (a claim that is true)."""
    cfg = rule_config(tmp_path, rng, p_correct_claims=p_claims, claim_gate=False)  # the gate: test_claim_gate.py

    def write(variant: Variant, benchmark: str, margin: np.ndarray) -> None:
        acc = (margin > 0).astype(float)
        samples = {"acc": list(acc), "loglikelihoods": [[0.0, -float(m)] for m in margin], "target": [0] * N}
        write_eval(cfg, variant, benchmark, {"acc,none": float(acc.mean())}, samples)

    for benchmark in BENCHMARKS:
        original = rng.normal(centre, 1.5, N)
        write(Variant(), benchmark, original)
        for ability in ABILITIES:
            for region in REGIONS:
                shift = rng.normal(-HURT, 0.1) + (0.0 if region.startswith("random") else -PROCEDURE)
                if region.startswith("top") and ability == ABILITIES[0] and benchmark == TARGET:
                    shift -= effect
                write(Variant(ability, K, region), benchmark, original + shift + rng.normal(0, 0.3, N))
    return load_scores(cfg, progress=False)


@pytest.mark.parametrize(("centre", "effect"), [(1.0, 0.0), (4.0, 0.0), (4.0, 1.0)])
def test_the_rule_on_p_correct_holds_false_claims_at_alpha_and_sees_what_accuracy_misses(tmp_path, centre, effect):
    """centre 1: accuracy about 0.74; centre 4: about 0.99, where the true effect (margins 1.0 lower) flips few
    answers."""
    rng = np.random.default_rng(81 + int(centre * 10 + effect))
    true_claim = (TARGET, ABILITIES[0])
    false_p, false_acc, found_p, found_acc = [], [], [], []
    for i in range(PROFILES):
        profile = simulate(tmp_path / str(i), rng, effect, centre)
        on_p, on_acc = claimed_pairs(profile, True), claimed_pairs(profile, False)
        real = {(b, a) for b, a in on_p | on_acc if b not in ABILITIES}
        false_p.append(any(c != true_claim or not effect for c in on_p if c in real))
        false_acc.append(any(c != true_claim or not effect for c in on_acc if c in real))
        found_p.append(true_claim in on_p)
        found_acc.append(true_claim in on_acc)
    error = math.sqrt(0.05 * 0.95 / PROFILES)
    print(
        f"centre {centre}, effect {effect}: profiles with a false claim on p_correct {np.mean(false_p):.3f}, on "
        f"accuracy {np.mean(false_acc):.3f} (+-{error:.3f}); true claim found on p_correct {np.mean(found_p):.2f}, on "
        f"accuracy {np.mean(found_acc):.2f}"
    )
    assert np.mean(false_p) <= 0.05 + 2 * error and np.mean(false_acc) <= 0.05 + 2 * error
    if effect:
        assert np.mean(found_p) >= 0.6
        assert np.mean(found_p) >= np.mean(found_acc) + 0.3


def test_p_correct_claims_are_a_holm_family_of_their_own_and_say_so(tmp_path):
    """One profile: the claim rows on p_correct are the claim_p_correct family, their q-values Holm over that
    family alone (by hand), their claim_q Holm over its pairs alone; the accuracy family's stars are the same with
    the key off; the lines mark the metric."""
    profile = simulate(tmp_path / "on", np.random.default_rng(5), 0.5)
    family = [r for r in profile.rows if r.family == P_CLAIM]
    assert family and all(r.metric == P_CORRECT and r.benchmark not in ABILITIES for r in family)
    assert {r.region for r in family} == {f"top{s}-{c}" for s in ("", "2", "3") for c in ("random", "placebo")}
    p = np.array([r.p_value for r in family])
    order = np.argsort(p)
    by_hand = np.minimum(1, np.maximum.accumulate((len(p) - np.arange(len(p))) * p[order]))
    assert [family[i].q_value for i in order] == pytest.approx(by_hand, rel=1e-12)
    pairs = [r for r in family if r.region == ADJUSTED]
    assert len(pairs) == len(ABILITIES) * 2  # two real benchmarks
    cp = np.array([r.claim_p for r in pairs])
    order = np.argsort(cp)
    by_hand = np.minimum(1, np.maximum.accumulate((len(cp) - np.arange(len(cp))) * cp[order]))
    assert [pairs[i].claim_q for i in order] == pytest.approx(by_hand, rel=1e-12)
    assert claimed_pairs(profile, True) == {(TARGET, ABILITIES[0])}
    lines = claim_lines(profile)
    assert any(line.startswith(f"{TARGET} (p_correct) draws on {ABILITIES[0]} (AIS +") for line in lines)
    # the benchmark without a claim on p_correct says what the rule could have seen there, from its p_correct rows
    mdes = [r.mde for r in profile.rows if r.benchmark == "piqa_like" and r.metric == P_CORRECT and r.region == "top"]
    (unclaimed,) = [c for c in benchmark_claims(profile, True) if c.benchmark == "piqa_like"]
    assert unclaimed.mde == pytest.approx(statistics.median(mdes)) and 0 < unclaimed.mde_placebo < 1
    assert (
        f"On p_correct: no claim on piqa_like (minimum detectable AIS {unclaimed.mde:.2f} against the original model, "
        f"at least {unclaimed.mde_placebo:.2f} beyond placebo regions)." in lines
    )
    assert f"Holm over its own {len(pairs)} pairs" in "\n".join(claims_markdown(profile))
    off = simulate(tmp_path / "off", np.random.default_rng(5), 0.5, p_claims=False)
    assert not any(r.family == P_CLAIM for r in off.rows) and not benchmark_claims(off, on_p=True)
    primary = [(r.ability, r.benchmark, r.region, r.q_value) for r in profile.rows if r.family == PRIMARY]
    assert primary == [(r.ability, r.benchmark, r.region, r.q_value) for r in off.rows if r.family == PRIMARY]
    assert not any("p_correct" in line for line in claim_lines(off))


def test_a_profile_read_back_from_ais_csv_says_the_same_claims_on_both_metrics(tmp_path):
    """ais.csv's family column carries the declaration: the Claims of a profile read back from it (lab/rerender.py,
    as for a committed folder) are the ones aggregate computed, the p_correct rows never taken for the primary
    metric."""
    profile = simulate(tmp_path, np.random.default_rng(5), 0.5)
    layout = Layout(load_config(tmp_path / "config.yml").output_root, "t")
    write_tables(profile, layout)
    shutil.copy(tmp_path / "config.yml", layout.profile_dir / "config.yml")
    back = folder_profile(layout.profile_dir)
    assert {b: back.metrics[b] for b in BENCHMARKS} == {b: "acc,none" for b in BENCHMARKS}
    assert claim_lines(back) == claim_lines(profile) and claimed_pairs(back, True) == {(TARGET, ABILITIES[0])}


def test_a_p_correct_row_is_a_claim_row_only_where_declared_and_on_a_real_benchmark():
    def on(benchmark: str, region: str = ADJUSTED) -> AisRow:
        return AisRow("m", "A", benchmark, K, region, P_CORRECT, 0.6, 0.5, 0.1, p_value=0.01)

    splits = frozenset({"A"})
    assert family_of(on("arc"), splits, p_claims=True) == P_CLAIM
    assert family_of(on("arc", "top2-placebo"), splits, p_claims=True) == P_CLAIM
    assert family_of(on("arc"), splits) == SECONDARY
    assert family_of(on("A"), splits, p_claims=True) == SECONDARY  # an ability split: no claim on p_correct
    assert family_of(on("arc", "top"), splits, p_claims=True) == SECONDARY  # a damage row, not a claim's
    assert family_of(on("arc", "random2"), splits, p_claims=True) == "control"
