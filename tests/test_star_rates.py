"""What a claim star means where the paper's method is used: on a real LLM every region of the paper's size hurts a
little, so "top vs original" rows are nearly always true. Many simulated profiles go through the whole aggregate
path (result files in, profile rows out) with general damage for every region, region-to-region and
region-by-split variation of that damage, top regions that are only more draws of random regions (the null) or
that also hurt their own split (true effects). Measured per scenario: the share of profiles with any false
top - random star, with any false specificity star, the false discovery proportion and the power on true
effects (docs/statistics.md, "Stars that carry the claim"). A specificity star counts wherever it is shown: the
top region's specificity against 0 sat in the damage family and was starred in 20% of profiles with no ability,
until it was made a row that carries no star.

CI runs a fast slice (n = 100, 60 profiles per scenario). The full grid (n = 100, 300, 1,000; 200 profiles per
scenario) is this file run as a script: `.venv/bin/python tests/test_star_rates.py` prints the table
docs/research/statistics-simulations.md#rates-where-every-region-hurts quotes (about 20 minutes on 2 cores).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_aggregate import write_eval  # run as a script, its folder is on sys.path too

from benchprof.core.layout import Variant
from benchprof.core.loader import load_config
from benchprof.profile.rows import SPECIFICITY
from benchprof.stages.aggregate import load_scores

K = 0.01
ABILITIES = [
    "Quantitative_Reasoning",
    "Long_Term_Knowledge",
    "Commonsense_Causal",
    "Analogical_Reasoning",
    "Inductive_Reasoning",
]
EXTRA = ["arc_like", "piqa_like"]  # benchmarks that are no ability's split
DRAWS = 3  # random regions per ability (extract.random_draws): a pool of 15 at k


def simulate(folder: Path, rng: np.random.Generator, n: int, damage: float, split_sd: float, own: float) -> list:
    """One profile: per benchmark an original run (acc 0.7); per ability a top region and one random draw (a pool
    of 5 at k). Each region has a damage level around `damage` (sd 0.04 between regions) that turns right items
    wrong, varied per benchmark by `split_sd`, and a few wrong items right (0.02); top regions are drawn exactly as
    random ones, and with own > 0 an ability's top region also turns that share of its own split's right items
    wrong."""
    raw = {
        "settings": {"k_values": [K], "output_dir": "out"},
        "models": [{"name": "x", "tag": "t"}],
        "datasets": [{"name": a} for a in ABILITIES],
        "evals": {"benchmarks": ABILITIES + EXTRA},
        "aggregate": {"bootstrap": 200, "seed": int(rng.integers(1 << 30)), "min_correct": 1, "clusters": False},
        "extract": {"random_draws": DRAWS},
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yml").write_text(yaml.safe_dump(raw))
    cfg = load_config(folder / "config.yml")
    regions = ("top", "random", *(f"random{d}" for d in range(2, DRAWS + 1)))
    level = {(a, r): float(rng.normal(damage, 0.04)) for a in ABILITIES for r in regions}
    for benchmark in ABILITIES + EXTRA:
        original = (rng.random(n) < 0.7).astype(float)
        write_eval(cfg, Variant(), benchmark, {"acc,none": float(original.mean())}, {"acc": list(original)})
        for (ability, region), base in level.items():
            rate = float(np.clip(base + rng.normal(0, split_sd), 0.0, 0.9))
            ablated = np.where((original == 1) & (rng.random(n) < rate), 0.0, original)
            ablated = np.where((original == 0) & (rng.random(n) < 0.02), 1.0, ablated)
            if region == "top" and benchmark == ability and own:
                ablated = np.where((original == 1) & (rng.random(n) < own), 0.0, ablated)
            scores = {"acc": [float(x) for x in ablated]}
            write_eval(cfg, Variant(ability, K, region), benchmark, {"acc,none": float(ablated.mean())}, scores)
    profile = load_scores(cfg, progress=False)
    # every row a star could be read from: the claim family, and every specificity row whatever its family (a
    # starred top specificity against 0 read as "this region is specific" in 20% of profiles with no ability)
    return [
        r
        for r in profile.rows
        if not math.isnan(r.p_value) and (r.family in ("claim", "own") or r.benchmark == SPECIFICITY)
    ]


def is_true(row, own: float) -> bool:
    """A row where the simulation put a real effect: an ability's top-random row on its own split, and its top and
    top-random specificity (own damage beyond the random draws', none elsewhere)."""
    return bool(own) and row.region != "random" and (row.benchmark == SPECIFICITY or row.benchmark == row.ability)


def rates(n: int, damage: float, split_sd: float, own: float, profiles: int, seed: int, folder: Path) -> dict:
    """Per-profile rates of false stars (top - random rows, specificity rows), the mean false discovery proportion
    and the power on true effects, over `profiles` simulated profiles."""
    rng = np.random.default_rng(seed)
    false_claim, false_own, false_spec, fdp, power = [], [], [], [], []
    for i in range(profiles):
        rows = simulate(folder / str(i), rng, n, damage, split_sd, own)
        starred = [r for r in rows if r.significant]
        false = [r for r in starred if not is_true(r, own)]
        # each Holm family on its own: the real benchmarks' rows, and the splits' (own) rows
        false_claim.append(any(r.family == "claim" for r in false))
        false_own.append(any(r.family == "own" and r.benchmark != SPECIFICITY for r in false))
        false_spec.append(any(r.benchmark == SPECIFICITY for r in false))
        fdp.append(len(false) / len(starred) if starred else 0.0)
        true_rows = [r for r in rows if is_true(r, own) and r.family == "own"]
        if true_rows:
            power.append(np.mean([bool(r.significant) for r in true_rows]))
    return {
        "false_top_random": float(max(np.mean(false_claim), np.mean(false_own))),  # the larger family rate
        "false_specificity": float(np.mean(false_spec)),
        "fdp": float(np.mean(fdp)),
        "power": float(np.mean(power)) if power else math.nan,
    }


SCENARIOS = [(0.12, 0.0, 0.0), (0.12, 0.04, 0.0), (0.12, 0.04, 0.4), (0.25, 0.04, 0.0)]  # damage, split sd, own


@pytest.mark.slow
@pytest.mark.parametrize(("damage", "split_sd", "own"), SCENARIOS)
def test_claim_stars_stay_rare_when_every_region_hurts(tmp_path, damage, split_sd, own):
    """Fast slice at n = 100: the share of profiles with a false top - random or specificity star stays at or
    below 5% (plus twice its Monte Carlo error) when every region hurts, whether or not regions' damage varies
    by split and whether or not true effects are there; own effects of 0.4 are found more often than not."""
    profiles = 60
    got = rates(100, damage, split_sd, own, profiles, seed=int(1000 * (damage + split_sd + own)), folder=tmp_path)
    print(f"damage {damage}, split sd {split_sd}, own {own}: {got}")
    limit = 0.05 + 2 * math.sqrt(0.05 * 0.95 / profiles)
    assert got["false_top_random"] <= limit and got["false_specificity"] <= limit
    if own:
        assert got["power"] >= 0.5


if __name__ == "__main__":
    import tempfile

    print(
        "| n | general damage | split sd | own effect | false top-random star | false specificity star | FDP | power |"
    )
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for n in (100, 300, 1000):
            for damage, split_sd, own in SCENARIOS:
                got = rates(
                    n,
                    damage,
                    split_sd,
                    own,
                    200,
                    seed=n + int(1000 * (damage + split_sd + own)),
                    folder=Path(scratch) / f"{n}-{damage}-{split_sd}-{own}",
                )
                power = "–" if math.isnan(got["power"]) else f"{got['power']:.2f}"
                print(
                    f"| {n} | {damage} | {split_sd} | {own} | {got['false_top_random']:.3f} | "
                    f"{got['false_specificity']:.3f} | {got['fdp']:.3f} | {power} |",
                    flush=True,
                )
