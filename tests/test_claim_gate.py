"""The gate (aggregate.claim_gate, profile/claim_tests.py): a real benchmark's pairs enter the claim families only for
the abilities whose region is claimed on their own split. Its Holm over the pairs it lets through, its lines, and its
rates over many simulated profiles through the whole aggregate path, in the situation that could fool it: a region's
general damage is shared by every benchmark it is scored on, so the regions that pass the gate on their own split
tend to be the broad ones that also lower the real benchmarks. The gate must keep false claims at alpha there, must
not let in the null pairs that look claimed more often than it leaves out (independent filtering), and must find a
true claim through an ability whose own split it removes.
"""

import math

import numpy as np
import pytest
from test_placebo_rates import ABILITIES, TARGET, K
from test_placebo_rates import simulate as placebo_profile

from benchprof.core.layout import format_k
from benchprof.profile.analyses import compare_models
from benchprof.profile.claim_tests import apply_claim_rule, gate, pair_tests
from benchprof.profile.claims import claim_lines, claimed_pairs, claims_markdown
from benchprof.profile.compare_report import render_comparison
from benchprof.profile.rows import ADJUSTED, OWN, PRIMARY
from benchprof.stats.paired import one_sided_p

PROFILES = 100  # per scenario: the rate's standard error at 0.05 is 0.022
OWNED = ABILITIES[:2]  # the abilities whose top regions remove them on their own split


def simulate(tmp_path, rng: np.random.Generator, effect: float, own: float, gated: bool = True):
    """One profile of test_placebo_rates.simulate whose regions' breadth is the same on every benchmark (a broad
    region is broad everywhere), with OWNED's top regions turning `own` more of their own split's right items wrong,
    judged with the gate (`gated`)."""
    return placebo_profile(tmp_path, rng, effect, own=own, owned=tuple(OWNED), shared=True, gated=gated)


@pytest.mark.slow
@pytest.mark.parametrize(("own", "effect"), [(0.15, 0.0), (0.4, 0.0), (0.4, 0.3)])
def test_the_gate_holds_false_claims_at_alpha_and_finds_a_true_claim_through_it(tmp_path, own, effect):
    """own 0.15: the gate opens for OWNED in some profiles, most readily for their broadest regions; own 0.4: it
    opens for them in most. The same profile is judged with the gate and without (apply_claim_rule again)."""
    rng = np.random.default_rng(12 + int(own * 100 + effect * 10))
    true_claim = (TARGET, ABILITIES[0])
    false_gated, false_open, found_gated, found_open, opened, stray = [], [], [], [], [], []
    small: dict[bool, list[bool]] = {True: [], False: []}  # null pairs' rule 2 p < 0.05: through the gate or not
    for i in range(PROFILES):
        profile = simulate(tmp_path / str(i), rng, effect, own)
        through = gate(profile, K) or set()
        opened.append(len(through & set(OWNED)) / len(OWNED))
        stray.append(bool(through - set(OWNED)))  # an ability without an own effect, through by chance
        for r in profile.rows:  # top − placebo of the first selection (rule 2): null on every real benchmark but
            # the true claim's, and passed more readily by a broad region, on its own split as on B
            if r.family == PRIMARY and r.region == "top-placebo" and (r.benchmark, r.ability) != true_claim:
                small[r.ability in through].append(one_sided_p(r.p_value, r.ais) < 0.05)
        gated = {c for c in claimed_pairs(profile) if c[0] not in ABILITIES}
        profile.claim_gate = False
        apply_claim_rule(profile)
        ungated = {c for c in claimed_pairs(profile) if c[0] not in ABILITIES}
        false_gated.append(any(c != true_claim or not effect for c in gated))
        false_open.append(any(c != true_claim or not effect for c in ungated))
        found_gated.append(true_claim in gated)
        found_open.append(true_claim in ungated)
        assert gated <= ungated | {true_claim}  # fewer pairs, each asked less: only the gate's can be added
    error = math.sqrt(0.05 * 0.95 / PROFILES)
    shares = {key: (float(np.mean(v)), math.sqrt(0.05 * 0.95 / max(1, len(v)))) for key, v in small.items()}
    print(
        f"own {own}, effect {effect}: gate open for the owned abilities {np.mean(opened):.2f}, for the other "
        f"{np.mean(stray):.3f}; profiles with a false "
        f"claim with the gate {np.mean(false_gated):.3f}, without {np.mean(false_open):.3f} (+-{error:.3f}); true "
        f"claim found with the gate {np.mean(found_gated):.2f}, without {np.mean(found_open):.2f}; null pairs with "
        f"top - placebo p < 0.05: through the gate {shares[True][0]:.3f} of {len(small[True])}, outside it "
        f"{shares[False][0]:.3f} of {len(small[False])}"
    )
    assert np.mean(false_gated) <= 0.05 + 2 * error and np.mean(stray) <= 0.05 + 2 * error
    if small[True] and small[False]:  # independent filtering: the gate does not pick the null pairs that look claimed
        assert shares[True][0] <= shares[False][0] + 2 * shares[True][1]
    if own >= 0.4:
        assert np.mean(opened) >= 0.8
    if effect:  # the gate's cost: a true claim is lost with its ability's own-split claim (the gate shut)
        assert np.mean(found_gated) >= 0.3 and np.mean(found_open) >= np.mean(found_gated) - 2 * error


def test_the_gate_tests_only_the_pairs_of_abilities_claimed_on_their_own_split(tmp_path):
    """One profile: the gate is the set of abilities whose own-split pair is claimed (by hand from the own family's
    rows), every other ability's real-benchmark pairs keep claim_p with claim_q NaN, the pairs through it get Holm
    over themselves alone (by hand), the conjunction form tests the same pairs, and the lines say which were
    tested; with the key off, every pair is in the family."""
    profile = simulate(tmp_path / "on", np.random.default_rng(4), 0.3, 0.5)
    own = {
        r.ability: r
        for r in profile.rows
        if r.family == OWN and r.region == ADJUSTED and r.benchmark == r.ability and r.metric == "acc,none"
    }
    by_hand = {a for a, r in own.items() if r.claim_q < 0.05 and r.selections_low > 0}
    assert gate(profile, K) == by_hand == set(OWNED)
    pairs = [r for r in profile.rows if r.family == PRIMARY and r.region == ADJUSTED]
    through = [r for r in pairs if r.ability in by_hand]
    assert all(math.isnan(r.claim_q) and not math.isnan(r.claim_p) for r in pairs if r not in through)
    cp = np.array([r.claim_p for r in through])
    order = np.argsort(cp)
    holm = np.minimum(1, np.maximum.accumulate((len(cp) - np.arange(len(cp))) * cp[order]))
    assert [through[i].claim_q for i in order] == pytest.approx(holm, rel=1e-12)
    assert {t.ability for t in pair_tests(profile)} == by_hand  # the conjunction form tests the same pairs
    shut = [a for a in ABILITIES if a not in by_hand]
    assert claim_lines(profile)[-2].startswith(f"Gate: the claims above test {OWNED[0]} and {OWNED[1]}, whose region")
    assert f"{shut[0]}: not tested on real benchmarks" in claim_lines(profile)[-2]
    assert f"Holm's correction over the {len(through)} (benchmark, ability) pairs" in "\n".join(
        claims_markdown(profile)
    )
    off = simulate(tmp_path / "off", np.random.default_rng(4), 0.3, 0.5, gated=False)
    assert gate(off, K) is None
    assert all(not math.isnan(r.claim_q) for r in off.rows if r.family == PRIMARY and r.region == ADJUSTED)
    assert not any(line.startswith("Gate:") for line in claim_lines(off))
    off.model = "off"  # compare.md says each model's gate and claims on p_correct as its ais.md does
    section = render_comparison(compare_models([profile, off], [{}, {}]))
    said = [
        line
        for line in claim_lines(profile)
        if line.startswith("Gate:") or "(p_correct)" in line or "p_correct:" in line
    ]
    assert said[-1].startswith("Gate:") and all(
        f"- {profile.model} (k = {format_k(K)}): {line}\n" in section for line in said
    )
    assert not any(line.startswith("- off (k") and "Gate:" in line for line in section.splitlines())


def test_spikes_measure_the_abilities_through_the_gate_and_say_which_are_outside(tmp_path, capsys):
    """`benchprof spikes` on a profile with the gate: an ability whose region is not claimed on its own split cannot
    be claimed on a spiked benchmark, so it is not spiked (a miss would read as the rule's blindness) and a line
    says why; the abilities through the gate are."""
    from benchprof.cli import main
    from benchprof.core.storage import read_csv

    simulate(tmp_path, np.random.default_rng(4), 0.3, 0.5)
    config = str(tmp_path / "config.yml")
    main(["aggregate", config, "--noplots"])
    main(["spikes", config, "--benchmark", TARGET, "--fractions", "0.2", "--resamples", "1", "--planted", ""])
    out = capsys.readouterr().out
    rows = read_csv(tmp_path / "out" / "t" / "spikes" / "spikes.csv")
    assert {r["ability"] for r in rows} == set(OWNED)
    shut = next(a for a in ABILITIES if a not in OWNED)
    assert f"t: not tried: {shut}: outside the gate (its region is not claimed on its own split)" in out


def test_with_no_ability_through_the_gate_no_benchmark_is_claimed_and_the_lines_say_why(tmp_path):
    """No region removes its own ability: the gate lets no ability in, so every pair keeps its claim_p, none is
    claimed even where its selections pass (a pair without claim_q is never claimed), and each real benchmark's
    line says that nothing was tested instead of quoting a minimum detectable AIS."""
    profile = simulate(tmp_path, np.random.default_rng(7), 0.5, 0.0)
    assert gate(profile, K) == set()
    pairs = [r for r in profile.rows if r.family == PRIMARY and r.region == ADJUSTED]
    assert pairs and all(math.isnan(r.claim_q) and not math.isnan(r.claim_p) for r in pairs)
    assert not {c for c in claimed_pairs(profile) if c[0] not in ABILITIES}
    lines = claim_lines(profile)
    assert f"{TARGET}: no claim tested, no ability through the gate (ais.md: Gate)." in lines
    assert any(line.startswith("Gate: no region is claimed on its own split") for line in lines)
    profile.claim_gate = False
    apply_claim_rule(profile)
    assert (TARGET, ABILITIES[0]) in claimed_pairs(profile)  # the effect of 0.5 is claimed without the gate
