"""Rates, not one dataset: many simulated profiles through the whole aggregate path (result files in, ais.csv rows
out), with the dependence a real profile has (every row of a benchmark shares its original run; every top-random
row of a k shares the pool of random draws; specificity rows reuse the top rows), to measure what a star means.

A star is a Holm-adjusted p < alpha within its family: the claim family (the real benchmarks' rows) and, apart,
the own family (the ability splits' rows and specificity). The false discovery proportion is measured in each, with
the dependence the rows share (docs/statistics.md, "The profile: multiplicity").
"""

import math

import numpy as np
import pytest
import yaml
from test_aggregate import write_eval

from benchprof.core.layout import Variant
from benchprof.core.loader import load_config
from benchprof.profile.rows import SPECIFICITY
from benchprof.stages.aggregate import load_scores

K = 0.01
ABILITIES = ["Quantitative_Reasoning", "Long_Term_Knowledge", "Commonsense_Causal", "Analogical_Reasoning"]
EXTRA = ["arc_like", "piqa_like"]  # benchmarks that are no ability's split
PROFILES = 120  # per scenario: the rate's standard error at 0.05 is 0.02
N = 200  # items per benchmark


def simulate(tmp_path, rng: np.random.Generator, own_effect: float, spread: float) -> list:
    """One profile: per benchmark an original run (acc 0.7) and per ability a top region and one random draw (the
    pool of 4 at k). Every region flips a share of items both ways at the same rate (no effect on average), the
    share drawn per region around 0.15 with `spread` (regions differ, as real ones do); with own_effect > 0 an
    ability's top region also turns that share of its own split's right items wrong (a true effect)."""
    raw = {
        "settings": {"k_values": [K], "output_dir": "out"},
        "models": [{"name": "x", "tag": "t"}],
        "datasets": [{"name": a} for a in ABILITIES],
        "evals": {"benchmarks": ABILITIES + EXTRA},
        "aggregate": {"bootstrap": 200, "seed": int(rng.integers(1 << 30)), "min_correct": 1},
    }
    (tmp_path / "config.yml").write_text(yaml.safe_dump(raw))
    cfg = load_config(tmp_path / "config.yml")
    for benchmark in ABILITIES + EXTRA:
        original = (rng.random(N) < 0.7).astype(float)
        write_eval(cfg, Variant(), benchmark, {"acc,none": float(original.mean())}, {"acc": list(original)})
        for ability in ABILITIES:
            for region in ("top", "random"):
                rate = float(np.clip(rng.normal(0.15, spread), 0.02, 0.5))
                flip = rng.random(N) < rate
                ablated = np.where(flip, rng.random(N) < 0.7, original)  # same marginal: no effect on average
                if region == "top" and benchmark == ability and own_effect:
                    ablated = np.where((original == 1) & (rng.random(N) < own_effect), 0.0, ablated)
                write_eval(
                    cfg,
                    Variant(ability, K, region),
                    benchmark,
                    {"acc,none": float(ablated.mean())},
                    {"acc": [float(x) for x in ablated]},
                )
    profile = load_scores(cfg, progress=False)
    tested = [r for r in profile.rows if not math.isnan(r.p_value)]
    return {name: [r for r in tested if r.family == name] for name in ("claim", "own")}


def is_true_effect(row, own_effect: float) -> bool:
    """Whether the simulation put a real effect in this row: an ability's top region (or its top-random and
    specificity rows) on its own split."""
    if not own_effect:
        return False
    if row.benchmark == SPECIFICITY:
        return True  # each ability's specificity and their mean: own damage with none elsewhere
    return row.region in ("top", "top-random") and row.benchmark == row.ability


@pytest.mark.parametrize(("own_effect", "spread"), [(0.0, 0.06), (0.25, 0.06)])
def test_the_share_of_false_stars_stays_at_alpha_over_many_profiles(tmp_path, own_effect, spread):
    """Over 120 simulated profiles per scenario, the false discovery proportion (false stars / stars, 0 without
    stars) averages at most alpha = 0.05, up to the Monte Carlo error: under the complete null (no region does
    anything; regions equal or differing in how many items they flip) that is the share of profiles with any star;
    with every ability's top region hurting its own split it also finds most of those rows."""
    rng = np.random.default_rng(2026 + int(own_effect * 100) + int(spread * 1000))
    proportions: dict[str, list[float]] = {"claim": [], "own": []}
    found, rows = [], {}
    for i in range(PROFILES):
        folder = tmp_path / str(i)
        folder.mkdir()
        families = simulate(folder, rng, own_effect, spread)
        for name, family in families.items():  # each a Holm family of its own: the real benchmarks, the splits
            rows[name] = len(family)
            starred = [r for r in family if r.significant]
            false = [r for r in starred if not is_true_effect(r, own_effect)]
            proportions[name].append(len(false) / len(starred) if starred else 0.0)
        true_rows = [r for r in families["own"] if is_true_effect(r, own_effect)]
        if true_rows:
            found.append(np.mean([bool(r.significant) for r in true_rows]))
    fdr = {name: float(np.mean(values)) for name, values in proportions.items()}
    error = math.sqrt(0.05 * 0.95 / PROFILES)
    print(f"own effect {own_effect}, spread {spread}: {rows} rows, FDR {fdr} (+-{error:.3f})", end="")
    print(f", power {np.mean(found):.3f}" if found else "")
    assert rows["claim"] == len(ABILITIES) * len(EXTRA)  # every top-random row on a real benchmark
    assert rows["own"] >= len(ABILITIES) * (len(ABILITIES) + 1)  # ... on the splits, and the specificity
    assert max(fdr.values()) <= 0.05 + 2 * error
    if own_effect:  # Holm over the own family against a pool of 4 draws: the price of no false claim star
        assert np.mean(found) >= 0.35
