import csv
import json
import math
import re
import warnings

import numpy as np
import pytest
import yaml
from scipy import stats as scipy_stats

from benchprof import BenchprofError
from benchprof.core.layout import Layout, Variant
from benchprof.core.loader import load_config
from benchprof.core.results import primary_metric
from benchprof.profile.report import CSV_COLUMNS
from benchprof.profile.rows import cell_key
from benchprof.stages.aggregate import aggregate, load_scores
from benchprof.stats.impact import impact_score
from benchprof.stats.multitest import bh_qvalues, holm
from benchprof.stats.paired import paired_difference_interval
from benchprof.stats.resampling import bootstrap_ais, cell_rng, percentile_ci

K = 0.01
ABILITIES = ["Quantitative_Reasoning", "Temporal_Reasoning"]
B = 200  # bootstrap resamples in the config


def write_config(tmp_path, **aggregate_settings):
    raw = {
        "settings": {"k_values": [K], "output_dir": "out"},
        "models": [{"name": "x", "tag": "t"}],
        "datasets": [{"name": a} for a in ABILITIES],
        "evals": {"benchmarks": ["arc_easy", "gsm8k"]},
        # min_correct 1: these files hold a handful of items, and those without options read as generation tasks
        "aggregate": {"bootstrap": B, "seed": 7, "min_correct": 1, **aggregate_settings},
    }
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump(raw))
    return path


def write_eval(cfg, variant, benchmark, results, samples, filter_name="none", extra_samples=()):
    """An eval JSON (primary task = benchmark) and its samples JSONL; `samples` maps metric -> per-doc list."""
    layout = Layout(cfg.output_root, "t")
    path = layout.eval_file(variant, benchmark)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = len(next(iter(samples.values())))
    path.write_text(
        json.dumps(
            {
                "benchmark": benchmark,
                "primary_task": benchmark,
                "results": {benchmark: {"alias": benchmark, **results}},
                "n_samples": n,
                "num_fewshot": 0,
                "limit": None,
                "variant": {"ability": variant.ability, "k": variant.k, "region": variant.region},
            }
        )
    )
    lines = [
        {"task": benchmark, "doc_id": i, "filter": filter_name, **{m: v[i] for m, v in samples.items()}}
        for i in range(n)
    ]
    lines += list(extra_samples)
    layout.samples_file(variant, benchmark).write_text("".join(json.dumps(x) + "\n" for x in lines))


# arc_easy per document (acc_norm): original 0.8; top 0.6 -> AIS 0.25; random 1.0 -> AIS -0.25;
# bottom identical to the original -> AIS 0 with interval [0, 0]. acc (0.5) must not be chosen.
ARC = {
    None: [1, 1, 1, 1, 0],
    "top": [1, 1, 1, 0, 0],
    "random": [1, 1, 1, 1, 1],
    "bottom": [1, 1, 1, 1, 0],
}


def arc(cfg, variant, correct):
    write_eval(
        cfg,
        variant,
        "arc_easy",
        {
            "acc,none": 0.5,
            "acc_stderr,none": 0.1,
            "acc_norm,none": float(np.mean(correct)),
            "acc_norm_stderr,none": 0.1,
        },
        {"acc": [0.0] * len(correct), "acc_norm": [float(c) for c in correct]},
    )


def gsm8k(cfg, variant, strict):
    # strict-match is the primary filter; flexible-extract lines must be ignored
    flexible = [{"task": "gsm8k", "doc_id": i, "filter": "flexible-extract", "exact_match": 1.0} for i in range(4)]
    write_eval(
        cfg,
        variant,
        "gsm8k",
        {
            "exact_match,flexible-extract": 1.0,
            "exact_match_stderr,flexible-extract": 0.0,
            "exact_match,strict-match": float(np.mean(strict)),
            "exact_match_stderr,strict-match": 0.0,
        },
        {"exact_match": [float(s) for s in strict]},
        filter_name="strict-match",
        extra_samples=flexible,
    )


@pytest.fixture
def results(tmp_path):
    """Every evaluation of the tiny config except Temporal_Reasoning's top region on arc_easy."""
    path = write_config(tmp_path)
    cfg = load_config(path)
    arc(cfg, Variant(), ARC[None])
    gsm8k(cfg, Variant(), [0, 0, 0, 0])  # original score 0: AIS undefined
    for ability in ABILITIES:
        for region in ("top", "bottom", "random"):
            if (ability, region) != ("Temporal_Reasoning", "top"):
                arc(cfg, Variant(ability, K, region), ARC[region])
            gsm8k(cfg, Variant(ability, K, region), [0, 1, 0, 0])
    return path


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def loop_bootstrap(original, ablated_by_region, rng, resamples):
    """Straightforward reference: one resample at a time, plain Python means."""
    n = len(original)
    out = {region: [] for region in ablated_by_region}
    for _ in range(resamples):
        idx = rng.integers(0, n, size=n)
        s_orig = sum(original[i] for i in idx) / n
        for region, values in ablated_by_region.items():
            s_abl = sum(values[i] for i in idx) / n
            out[region].append((s_orig - s_abl) / s_orig if s_orig != 0 else math.nan)
    return out


def finite_percentiles(values):
    """The 95% percentile interval over resamples whose AIS is defined (original mean not 0)."""
    return np.percentile([v for v in values if not math.isnan(v)], [2.5, 97.5])


@pytest.mark.filterwarnings("error")
def test_impact_score_by_hand():
    assert impact_score(0.8, 0.6) == pytest.approx(0.25)
    assert impact_score(0.8, 1.0) == pytest.approx(-0.25)  # removing the region helped
    assert math.isnan(impact_score(0.0, 0.3))  # no division-by-zero warning (warnings are errors here)
    arr = impact_score(np.array([0.5, 0.0]), np.array([[0.25, 0.1], [0.5, 0.0]]))
    assert arr[0, 0] == pytest.approx(0.5) and arr[1, 0] == 0 and np.isnan(arr[:, 1]).all()


def test_primary_metric_choice():
    both = {"alias": "arc", "acc,none": 0.5, "acc_stderr,none": 0.1, "acc_norm,none": 0.6}
    assert primary_metric(both) == "acc_norm,none"
    assert primary_metric(both, override="acc") == "acc,none"
    assert primary_metric(both, override="acc_norm,none") == "acc_norm,none"
    assert primary_metric(both, override="f1") is None
    gsm = {
        "exact_match,flexible-extract": 0.5,
        "exact_match_stderr,flexible-extract": 0.1,
        "exact_match,strict-match": 0.4,
    }
    assert primary_metric(gsm) == "exact_match,strict-match"
    assert primary_metric(gsm, override="exact_match,flexible-extract") == "exact_match,flexible-extract"
    assert primary_metric({"exact_match,custom": 0.3, "exact_match,none": 0.2}) == "exact_match,none"
    assert primary_metric({"pass@1,create_test": 0.3}) == "pass@1,create_test"
    assert primary_metric({"bleu_stderr,none": 0.1, "bleu,none": 20.0, "rouge,none": 0.3}) == "bleu,none"
    assert primary_metric({"alias": "x"}) is None


def test_bootstrap_matches_a_loop():
    rng = np.random.default_rng(11)
    original = rng.integers(0, 2, size=9).astype(float)
    original[0] = 1.0
    ablated = rng.integers(0, 2, size=(2, 9)).astype(float)
    resamples = 60
    # a small max_elements forces several chunks; the draws are still one stream
    fast = bootstrap_ais(original, ablated, resamples, np.random.default_rng(5), max_elements=50)
    slow = loop_bootstrap(
        list(original), {0: list(ablated[0]), 1: list(ablated[1])}, np.random.default_rng(5), resamples
    )
    np.testing.assert_allclose(fast[0], slow[0])
    np.testing.assert_allclose(fast[1], slow[1])
    assert percentile_ci(fast[0]) == pytest.approx(tuple(finite_percentiles(slow[0])))


@pytest.mark.filterwarnings("error")
def test_identical_scores_give_a_zero_interval_and_all_zero_no_warning():
    same = np.array([1.0, 0.0, 1.0, 1.0])
    samples = bootstrap_ais(same, same[None, :], 100, np.random.default_rng(0))
    assert percentile_ci(samples[0]) == (0.0, 0.0)
    zero = bootstrap_ais(np.zeros(4), np.ones((1, 4)), 50, np.random.default_rng(0))
    assert np.isnan(zero).all()
    assert all(math.isnan(v) for v in percentile_ci(zero[0]))


def test_aggregate_end_to_end(results, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no numpy division or all-NaN warnings
        aggregate(load_config(results))
    cfg = load_config(results)
    folder = Layout(cfg.output_root, "t").profile_dir
    rows = read_csv(folder / "ais.csv")
    assert tuple(rows[0]) == CSV_COLUMNS

    def get(ability, benchmark, region):
        [row] = [r for r in rows if (r["ability"], r["benchmark"], r["region"]) == (ability, benchmark, region)]
        return row

    top = get("Quantitative_Reasoning", "arc_easy", "top")
    assert top["metric"] == "acc_norm,none" and top["k"] == "0.01"
    assert float(top["score_original"]) == pytest.approx(0.8) and float(top["score_ablated"]) == pytest.approx(0.6)
    assert float(top["ais"]) == pytest.approx(0.25)
    assert float(get("Quantitative_Reasoning", "arc_easy", "random")["ais"]) == pytest.approx(-0.25)
    adjusted = get("Quantitative_Reasoning", "arc_easy", "top-random")
    assert float(adjusted["ais"]) == pytest.approx(0.5) and adjusted["score_ablated"] == ""
    bottom = get("Quantitative_Reasoning", "arc_easy", "bottom")
    # nothing flipped in 5 items: the bootstrap interval is [0, 0], the score interval is not (issue 28: a 0/1 row's
    # interval is the hull of the two, so 5 unflipped items do not claim an AIS of exactly 0)
    newcombe = [v / 0.8 for v in paired_difference_interval(ARC[None], ARC["bottom"])]
    assert float(bottom["ais"]) == 0.0 and newcombe[0] < 0 < newcombe[1]
    assert (float(bottom["ci_low"]), float(bottom["ci_high"])) == pytest.approx(tuple(newcombe))
    assert bottom["significant"] == "false" and bottom["n_docs"] == "5"

    # intervals: the same resamples as a plain loop over this cell's generator, top and random paired
    slow = loop_bootstrap(
        ARC[None],
        {"top": ARC["top"], "random": ARC["random"]},
        cell_rng(7, cell_key("Quantitative_Reasoning", K, "arc_easy")),
        B,
    )
    low, high = finite_percentiles(slow["top"])
    score_low, score_high = (v / 0.8 for v in paired_difference_interval(ARC[None], ARC["top"]))
    assert float(top["ci_low"]) == pytest.approx(min(low, score_low))
    assert float(top["ci_high"]) == pytest.approx(max(high, score_high))
    # top-random (issue 28): the top region against the distribution of every ability's random draws at k; a pool
    # of two (Quantitative's and Temporal's) cannot say how much random regions differ: no interval, no test
    assert adjusted["ci_low"] == adjusted["ci_high"] == adjusted["p_value"] == "" and adjusted["significant"] == ""
    assert adjusted["control_draws"] == "2"
    # ... said once for the whole table (every top-random row at this k), not once per row or metric
    notes = (folder / "ais.md").read_text().split("## Notes", 1)[1]
    assert notes.count("top-random rows at k=") == 1 and "no interval and no test in any of them" in notes

    # tests (issue 18): exact McNemar for top (one document flipped right -> wrong: p = 1), a bootstrap
    # p for top-random; q: Benjamini-Hochberg within each family (issue 28); the star is q < 0.05; random regions
    # are a control: tested, no q-value, never starred
    assert (top["flips_lost"], top["flips_gained"], float(top["p_value"])) == ("1", "0", 1.0)
    tested = [r for r in rows if r["p_value"]]
    for family in ("claim", "damage", "secondary"):
        members = [r for r in tested if r["family"] == family]
        adjust = holm if family == "claim" else bh_qvalues  # the claim: Holm over its family
        expected_q = adjust(np.array([float(r["p_value"]) for r in members]))
        assert [float(r["q_value"]) for r in members] == pytest.approx(list(expected_q))
    assert {r["family"] for r in tested if r["region"] == "random"} == {"control"}
    starred = [r for r in tested if r["family"] in ("claim", "damage", "secondary")]
    assert all(r["significant"] == ("true" if float(r["q_value"]) < 0.05 else "false") for r in starred)
    assert all(not r["q_value"] and r["significant"] == "false" for r in tested if r["family"] == "control")
    assert all(r["significant"] == "" for r in rows if not r["p_value"])
    # no option log-likelihoods in these samples: chance 0 (as for a generation task), AIS above chance = AIS
    assert float(top["chance"]) == 0.0 and float(top["ais_above_chance"]) == pytest.approx(0.25)

    # zero original score: undefined AIS and interval, written as empty cells
    zero = get("Temporal_Reasoning", "gsm8k", "top")
    assert zero["metric"] == "exact_match,strict-match" and float(zero["score_original"]) == 0.0
    assert zero["ais"] == zero["ci_low"] == zero["ci_high"] == zero["significant"] == ""

    # the missing evaluation is listed, and its cells render as gaps
    data = json.loads((folder / "ais.json").read_text())
    assert [(m["benchmark"], m["variant"], m["reason"]) for m in data["missing"]] == [
        ("arc_easy", "Temporal_Reasoning/k0.01/top", "missing")
    ]
    assert not any(
        r["ability"] == "Temporal_Reasoning" and r["benchmark"] == "arc_easy" and r["region"] in ("top", "top-random")
        for r in rows
    )
    markdown = (folder / "ais.md").read_text()
    assert "Evaluations scored in the checkpoint's own dtype (`auto`)." in markdown  # evals.dtype and the model's: auto
    for r in rows:  # below chance: the ablated score under the benchmark's chance level, and its AIS stops there
        if r["chance"] and r["score_ablated"] and r["region"] in ("top", "random"):
            assert (r["below_chance"] == "true") == (float(r["score_ablated"]) < float(r["chance"]))
            if r["below_chance"] == "true" and r["ais_to_chance"]:
                s, c = float(r["score_original"]), float(r["chance"])
                assert float(r["ais_to_chance"]) == pytest.approx((s - c) / s)
    missing_section = markdown.split("## Missing evaluations")[1]
    assert "Temporal_Reasoning" in missing_section and "k0.01/top" in missing_section
    assert "| Temporal_Reasoning | – |" in markdown  # gsm8k (original 0: not above chance) left out
    assert "Their rows stay in ais.csv" in markdown and "gsm8k" in markdown.split("Left out of the headline")[1]
    assert "| Quantitative_Reasoning | +0.250" in markdown
    assert "| Quantitative_Reasoning | +0.500" in markdown.split("Control-adjusted")[1]

    for name in ("heatmap", "ribbons", "profile_arc_easy", "ksweep_arc_easy", "profile_gsm8k", "ksweep_gsm8k"):
        png = folder / f"{name}.png"
        assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    printed = capsys.readouterr().out
    assert max(len(line) for line in printed.splitlines() if not line.startswith("aggregate:")) <= 120  # path: any
    out = re.sub(r"\n  (?=\S)", " ", printed)  # the lines' wrapping at 120 undone
    assert "rows" in out and "1 missing" in out and str(folder) in out.splitlines()[-1]
    # the terminal's table is the claim's (top - random, Holm's stars), not the top region's damage table
    assert "top region minus random regions of its size" in out and "Holm p < 0.05 over its family, claim or own" in out
    assert "| Quantitative_Reasoning | +0.500" in out and "| Quantitative_Reasoning | +0.250" not in out
    # last before the summary line: the claims in words, the very lines ais.md opens with
    claims = markdown.split("## Claims\n\n")[1].split("\n\n## ")[0].split("\n\n")[1].splitlines()
    assert claims and out.split("claims at k = 0.01")[1].splitlines()[1 : 1 + len(claims)] == claims
    assert markdown.startswith("# Benchmark profile") and markdown.splitlines()[2] == "## Claims"


def test_load_scores_matrix(results):
    profile = load_scores(load_config(results), progress=False, bootstrap=0)
    matrix = profile.matrix()
    assert matrix["Quantitative_Reasoning"]["arc_easy"] == pytest.approx(0.25)
    assert "arc_easy" not in matrix["Temporal_Reasoning"]
    assert math.isnan(matrix["Temporal_Reasoning"]["gsm8k"])
    assert profile.matrix(region="top-random")["Quantitative_Reasoning"]["arc_easy"] == pytest.approx(0.5)
    row = profile.row("Quantitative_Reasoning", "arc_easy")
    assert math.isnan(row.ci_low)  # bootstrap 0: no interval
    # ... but the paired documents and their test are there (n_docs was reported as 0)
    assert row.n_docs == 5 and row.flips_lost == 1 and row.flips_gained == 0 and row.p_value == pytest.approx(1.0)
    assert profile.metrics == {"arc_easy": "acc_norm,none", "gsm8k": "exact_match,strict-match"}


def test_metric_override_and_missing_original(tmp_path):
    path = write_config(tmp_path, metrics={"arc_easy": "acc"})
    cfg = load_config(path)
    arc(cfg, Variant(), ARC[None])
    arc(cfg, Variant("Quantitative_Reasoning", K, "top"), ARC["top"])
    gsm8k(cfg, Variant("Quantitative_Reasoning", K, "top"), [0, 1, 0, 0])  # no original gsm8k
    corrupt = Layout(cfg.output_root, "t").eval_file(Variant("Temporal_Reasoning", K, "top"), "arc_easy")
    corrupt.parent.mkdir(parents=True)
    corrupt.write_text("{oops")
    profile = load_scores(load_config(path), progress=False, bootstrap=20)
    assert profile.metrics == {"arc_easy": "acc,none"}
    reasons = {(m.benchmark, m.variant): m.reason for m in profile.missing}
    assert reasons[("gsm8k", "original")] == "missing"
    assert reasons[("gsm8k", "Quantitative_Reasoning/k0.01/top")] == "no usable original score"
    assert reasons[("arc_easy", "Temporal_Reasoning/k0.01/top")].startswith("unreadable")
    assert len(profile.missing) == 1 + 6 + 4 + 1  # original, all gsm8k variants, arc bottom/random, corrupt


def test_an_unknown_metric_names_its_key(tmp_path):
    path = write_config(tmp_path, metrics={"arc_easy": "f1"})
    cfg = load_config(path)
    arc(cfg, Variant(), ARC[None])
    reasons = {(m.benchmark, m.variant): m.reason for m in load_scores(cfg, progress=False, bootstrap=0).missing}
    assert reasons[("arc_easy", "original")].startswith("aggregate.metrics.arc_easy 'f1' not in results (has: ")


def test_nothing_to_aggregate(tmp_path):
    with pytest.raises(BenchprofError, match="no current evaluation results"):
        aggregate(load_config(write_config(tmp_path)))


def test_report_k_must_be_a_configured_k(results):
    with pytest.raises(BenchprofError, match="report_k"):
        aggregate(load_config(results), report_k=0.5, plots=False)


def test_chance_level_is_the_mean_of_one_over_the_options(tmp_path):
    """Read from the original's samples (a document per line and filter, its options' log-likelihoods)."""
    from benchprof.core.results import option_counts
    from benchprof.stats.impact import chance_level

    path = tmp_path / "b.samples.jsonl"
    rows = [
        {"task": "b", "doc_id": 0, "filter": "none", "acc": 1, "loglikelihoods": [-1, -2, -3, -4]},
        {"task": "b", "doc_id": 0, "filter": "strict", "acc": 1, "loglikelihoods": [-1, -2, -3, -4]},
        {"task": "b", "doc_id": 1, "filter": "none", "acc": 0, "loglikelihoods": [-1, -2]},
        {"task": "b", "doc_id": 2, "filter": "none", "exact_match": 0, "response": "x"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert sorted(option_counts(path)) == [2, 4]
    assert chance_level(option_counts(path)) == pytest.approx((1 / 4 + 1 / 2) / 2)


def test_null_profile_flags_at_most_alpha_after_correction(tmp_path):
    """Simulated null through the whole aggregate path: every ablation flips documents both ways at
    the same rate (it changes nothing on average); after Benjamini-Hochberg at most alpha of the rows
    are starred, while the raw per-row tests flag some at that rate (so the correction does work)."""
    rng = np.random.default_rng(11)
    benchmarks = [f"bench{i}" for i in range(12)]
    raw = yaml.safe_load(write_config(tmp_path).read_text())
    raw["evals"]["benchmarks"] = benchmarks
    raw["aggregate"]["bootstrap"] = 100
    (tmp_path / "config.yml").write_text(yaml.safe_dump(raw))
    cfg = load_config(tmp_path / "config.yml")
    n = 150
    for benchmark in benchmarks:
        original = (rng.random(n) < 0.7).astype(float)
        write_eval(cfg, Variant(), benchmark, {"acc,none": float(original.mean())}, {"acc": list(original)})
        for ability in ABILITIES:
            for region in ("top", "bottom", "random"):
                flip = rng.random(n) < 0.4  # about 25 discordant documents: McNemar near its nominal level
                ablated = np.where(flip, rng.random(n) < 0.7, original).astype(float)  # same marginal
                write_eval(
                    cfg,
                    Variant(ability, K, region),
                    benchmark,
                    {"acc,none": float(ablated.mean())},
                    {"acc": list(ablated)},
                )
    profile = load_scores(cfg, progress=False)
    tested = [r for r in profile.rows if not math.isnan(r.p_value)]
    claim = [r for r in tested if r.region == "top-random" and r.metric != "p_correct"]
    damage = [r for r in tested if r.region == "top" and r.metric != "p_correct"]
    # two abilities, one random draw each: a pool of 2 cannot say how much random regions differ, so no claim row
    assert len(claim) == profile.family_size == 0
    assert len(damage) == profile.family_size_damage >= 12 and all(r.family == "damage" for r in damage)
    assert not any(r.significant for r in tested if r.region == "random")  # the control is never starred
    tested = [r for r in tested if r.family in ("claim", "damage", "secondary")]
    flagged = sum(bool(r.significant) for r in tested)
    raw_flags = sum(r.p_value < 0.05 for r in tested)
    assert flagged <= 0.05 * len(tested), (flagged, len(tested))
    assert raw_flags >= 1  # uncorrected, the same rows would have produced stars


def test_lower_is_better_flips_the_sign_and_other_documents_are_refused(tmp_path):
    """AIS > 0 means the ablation hurt, also for a loss (higher_is_better false); an ablated run that
    scored other documents than the original (another --limit) is listed, never mixed into a cell."""
    path = write_config(tmp_path, metrics={"arc_easy": "loss"})
    cfg = load_config(path)
    original, hurt = [1.0, 1.0, 2.0, 0.0], [1.5, 1.5, 2.5, 0.5]

    def loss(variant, values, docs=None):
        write_eval(cfg, variant, "arc_easy", {"loss,none": float(np.mean(values))}, {"loss": values})
        result = Layout(cfg.output_root, "t").eval_file(variant, "arc_easy")
        payload = json.loads(result.read_text())
        payload["higher_is_better"] = {"arc_easy": {"loss": False}}
        if docs is not None:
            payload["limit"] = docs
        result.write_text(json.dumps(payload))

    loss(Variant(), original)
    loss(Variant("Quantitative_Reasoning", K, "top"), hurt)
    loss(Variant("Quantitative_Reasoning", K, "random"), hurt[:3], docs=3)  # a run with --limit 3
    profile = load_scores(cfg, progress=False)
    top = profile.row("Quantitative_Reasoning", "arc_easy", K, "top")
    assert top.ais == pytest.approx((1.5 - 1.0) / 1.0)  # the loss rose by half: the region mattered
    assert top.ci_low > 0 and math.isnan(top.ais_above_chance)
    assert profile.row("Quantitative_Reasoning", "arc_easy", K, "random") is None
    [refused] = [
        m for m in profile.missing if (m.benchmark, m.variant) == ("arc_easy", f"Quantitative_Reasoning/k{K}/random")
    ]
    original_file = Layout(cfg.output_root, "t").eval_file(Variant(), "arc_easy")
    assert f"scored other documents than {original_file}" in refused.reason


def test_resamples_without_an_ais_are_counted_and_reported(tmp_path):
    """Original right on 1 of 5 documents: resamples that draw none of it have no AIS; the row counts
    them (`dropped`, the same resamples as a plain loop over the cell's generator) and a note says so."""
    cfg = load_config(write_config(tmp_path))
    arc(cfg, Variant(), [1, 0, 0, 0, 0])
    arc(cfg, Variant("Quantitative_Reasoning", K, "top"), [0, 0, 0, 0, 0])
    profile = load_scores(cfg, progress=False)
    row = profile.row("Quantitative_Reasoning", "arc_easy", K, "top")
    rng = cell_rng(7, cell_key("Quantitative_Reasoning", K, "arc_easy"))
    expected = sum(int(0 not in rng.integers(0, 5, size=5)) for _ in range(B))
    assert row.dropped == expected and 0.2 * B < expected < 0.5 * B  # about (4/5)^5 of them
    assert any("resamples had no AIS" in note and "arc_easy Quantitative_Reasoning" in note for note in profile.notes)


def mc(cfg, variant, ll, target, lengths, clusters):
    """arc_easy as a multiple-choice evaluation whose primary metric is acc_norm: per document its options'
    log-likelihoods, the gold index, the options' lengths and its cluster; acc_norm from them as lm-eval does."""
    norm = [int(np.argmax(np.array(x) / np.array(n))) == t for x, n, t in zip(ll, lengths, target)]
    write_eval(
        cfg,
        variant,
        "arc_easy",
        {"acc_norm,none": float(np.mean(norm)), "acc_norm_stderr,none": 0.1},
        {
            "acc_norm": [float(c) for c in norm],
            "loglikelihoods": ll,
            "target": target,
            "option_lengths": lengths,
            "cluster": clusters,
        },
    )


def test_p_correct_rows_are_a_hand_softmax_and_their_own_family(tmp_path):
    """Beside each acc_norm row a p_correct row: AIS on the mean probability of the gold option, the
    softmax of the per-character log-likelihoods on the scale of the mean option length, computed here
    by hand; no mean test on four changed facts (too few for any skewness, paired.mean_test_units), said in a
    note; a Benjamini-Hochberg family of its own. The bootstrap resamples the documents' clusters."""
    # random log-likelihoods leave the model at chance on arc_easy; chance 0 keeps it in the families
    cfg = load_config(write_config(tmp_path, chance={"arc_easy": 0.0}))
    rng = np.random.default_rng(3)
    n = 12
    lengths = rng.integers(1, 9, size=(n, 4)).tolist()
    target = rng.integers(0, 4, size=n).tolist()
    clusters = [f"fact{i // 3}" for i in range(n)]  # four facts, three questions each
    ll_original = (-rng.uniform(0, 8, size=(n, 4))).tolist()
    ll_top = (np.array(ll_original) - 6.0 * np.eye(4)[target]).tolist()  # the gold option got less likely
    mc(cfg, Variant(), ll_original, target, lengths, clusters)
    mc(cfg, Variant("Quantitative_Reasoning", K, "top"), ll_top, target, lengths, clusters)

    def hand(ll):
        out = []
        for x, lens, t in zip(ll, lengths, target):
            z = [math.exp(v / m * sum(lens) / len(lens)) for v, m in zip(x, lens)]
            out.append(z[t] / sum(z))
        return np.array(out)

    profile = load_scores(cfg, progress=False)
    p_row = profile.row("Quantitative_Reasoning", "arc_easy", K, "top", p_correct=True)
    acc_row = profile.row("Quantitative_Reasoning", "arc_easy", K, "top")
    assert p_row is not None and acc_row is not None and acc_row.metric == "acc_norm,none"
    assert p_row.metric == "p_correct" and p_row.n_docs == n
    assert p_row.score_original == pytest.approx(hand(ll_original).mean(), rel=1e-12)
    assert p_row.score_ablated == pytest.approx(hand(ll_top).mean(), rel=1e-12)
    assert p_row.ais == pytest.approx(1 - hand(ll_top).mean() / hand(ll_original).mean(), rel=1e-12)
    # every document lost probability, but the test would run on the four facts' summed differences: the
    # sign-flip test there asks whether they are symmetric, not whether their mean is 0, so no test and no star
    assert p_row.flips_lost is None and math.isnan(p_row.p_value) and not p_row.significant
    assert any(note.startswith("arc_easy (p_correct): rows with too few changed") for note in profile.notes)
    # the interval resamples the four facts, not the twelve documents
    docs = bootstrap_ais(
        hand(ll_original),
        hand(ll_top)[None, :],
        B,
        cell_rng(7, cell_key("Quantitative_Reasoning", K, "arc_easy")),
        clusters=[f"arc_easy\x00{c}" for c in clusters],
    )[0]
    assert (p_row.ci_low, p_row.ci_high) == pytest.approx(percentile_ci(docs))
    p_rows = [r for r in profile.rows if r.metric == "p_correct" and not math.isnan(r.p_value)]
    assert profile.family_size_secondary == len(p_rows) == 0
    assert profile.family_size_damage == len(
        [r for r in profile.rows if r.metric != "p_correct" and not math.isnan(r.p_value) and r.region == "top"]
    )


def test_no_p_correct_without_option_lengths_for_acc_norm(tmp_path):
    """acc_norm normalises by the options' lengths: a file without them gets no p_correct row rather than
    an unnormalised one; generation tasks get none either."""
    from benchprof.core.results import read_p_correct

    path = tmp_path / "b.samples.jsonl"
    rows = [{"task": "b", "doc_id": 0, "filter": "none", "acc_norm": 1, "loglikelihoods": [-1, -2], "target": 0}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert read_p_correct(path, "acc_norm,none")[0] is None
    values, why = read_p_correct(path, "acc,none")
    assert why is None and values == {("b", 0, "none"): pytest.approx(1 / (1 + math.exp(-1)))}
    rows = [{"task": "b", "doc_id": 0, "filter": "none", "exact_match": 1, "response": "x", "target": "x"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert read_p_correct(path, "exact_match,none")[0] is None


def test_p_correct_where_the_target_is_text_takes_the_option_its_recorded_scores_leave(tmp_path):
    """COPA's target is the right sentence, CommonsenseQA's a letter: no option index. Two options and the recorded
    0/1 accuracy leave one gold option; a letter's index is learned from the rows that got it right, and letters
    all in alphabetical place give the others theirs. p_correct then equals the softmax at the true index (by
    hand); where nothing says which option is right, there is no p_correct and the reason says so."""
    from benchprof.core.results import read_p_correct

    def softmax_at(ll, i):
        return math.exp(ll[i]) / sum(math.exp(v) for v in ll)

    path = tmp_path / "b.samples.jsonl"

    def check(rows, gold):
        path.write_text("".join(json.dumps({"task": "b", "doc_id": d, "filter": "none", **r}) + "\n"
                                for d, r in enumerate(rows)))  # fmt: skip
        values, why = read_p_correct(path, "acc,none")
        assert why is None, why
        assert [values[("b", d, "none")] for d in range(len(rows))] == pytest.approx(
            [softmax_at(r["loglikelihoods"], g) for r, g in zip(rows, gold)]
        )

    copa = [  # right: the first of the largest; wrong: the other of two
        {"acc": 1.0, "loglikelihoods": [-3.0, -5.0], "target": " water flowed"},
        {"acc": 0.0, "loglikelihoods": [-3.0, -5.0], "target": " she left"},
        {"acc": 1.0, "loglikelihoods": [-4.0, -4.0], "target": " a tie"},
    ]
    check(copa, [0, 1, 0])
    ll = [-1.0, -2.0, -3.0, -4.0]
    letters = [
        {"acc": 1.0, "loglikelihoods": ll, "target": "A"},
        {"acc": 1.0, "loglikelihoods": [-2.0, -1.0, -3.0, -4.0], "target": "B"},
        {"acc": 0.0, "loglikelihoods": ll, "target": "B"},  # learned: B is option 1
        {"acc": 0.0, "loglikelihoods": [-2.0, -1.0, -3.0, -4.0], "target": "D"},  # no D right: alphabetical, 3
    ]
    check(letters, [0, 1, 1, 3])
    letters[1]["loglikelihoods"] = [-2.0, -3.0, -1.0, -4.0]  # B right at option 2: not alphabetical, D not inferred
    path.write_text("".join(json.dumps({"task": "b", "doc_id": d, "filter": "none", **r}) + "\n"
                            for d, r in enumerate(letters)))  # fmt: skip
    assert read_p_correct(path, "acc,none") == (None, "target 'D' of document 3 names no one option")
    three = [{"acc": 0.0, "loglikelihoods": [-1.0, -2.0, -3.0], "target": "some text"}]  # wrong of three: open
    path.write_text(json.dumps({"task": "b", "doc_id": 0, "filter": "none", **three[0]}) + "\n")
    assert read_p_correct(path, "acc,none") == (None, "target 'some text' of document 0 names no one option")


def test_random_draws_pool_across_abilities_and_null_calibration(tmp_path):
    """extract.random_draws = 3 and two abilities: top-random subtracts the mean AIS of all six random
    draws at k (by hand), ais.md prints the null calibration of the six (each against the other five),
    and the extra draws stay out of the k-sweep tables (they are in ais.csv)."""
    raw = yaml.safe_load(write_config(tmp_path).read_text())
    raw["evals"]["benchmarks"] = ["arc_easy"]
    raw["extract"] = {"regions": ["top", "random"], "random_draws": 3}
    (tmp_path / "config.yml").write_text(yaml.safe_dump(raw))
    cfg = load_config(tmp_path / "config.yml")
    rng = np.random.default_rng(5)
    n = 60
    original = (rng.random(n) < 0.8).astype(float)
    arc(cfg, Variant(), original)
    random_scores = []
    for ability in ABILITIES:
        arc(cfg, Variant(ability, K, "top"), np.where(rng.random(n) < 0.3, 0.0, original))
        for region in ("random", "random2", "random3"):
            scores = np.where(rng.random(n) < 0.1, 1.0 - original, original)
            random_scores.append(scores)
            arc(cfg, Variant(ability, K, region), scores)
    profile = load_scores(cfg, progress=False)
    draws = [impact_score(original.mean(), s.mean()) for s in random_scores]
    pool, sd = np.mean(draws), np.std(draws, ddof=1)
    for ability in ABILITIES:
        adjusted = profile.row(ability, "arc_easy", K, "top-random")
        top = profile.row(ability, "arc_easy", K, "top")
        assert adjusted.control_draws == 6 and adjusted.ais == pytest.approx(top.ais - pool)
        # the predictive t test against the six draws, by hand (scipy for Student's t); the row's scale also carries
        # the top region's own item noise where it is the larger (stats.control), so it is never narrower
        t = (top.ais - pool) / (sd * math.sqrt(1 + 1 / 6))
        assert adjusted.p_value >= 2 * scipy_stats.t.sf(abs(t), 5) - 1e-12
        half = scipy_stats.t.ppf(0.975, 5) * sd * math.sqrt(1 + 1 / 6)
        assert adjusted.ci_low <= adjusted.ais - half + 1e-12 and adjusted.ci_high >= adjusted.ais + half - 1e-12
        assert adjusted.ci_high - adjusted.ais == pytest.approx(adjusted.ais - adjusted.ci_low)
        assert profile.row(ability, "arc_easy", K, "random3") is not None
    [calibration] = profile.null_calibration
    assert (calibration.benchmark, calibration.draws, len(calibration.p_values)) == ("arc_easy", 6, 6)
    assert calibration.share == pytest.approx(np.mean(np.array(calibration.p_values) < 0.05))
    for d in range(6):  # each draw against the other five
        others = draws[:d] + draws[d + 1 :]
        t = (draws[d] - np.mean(others)) / (np.std(others, ddof=1) * math.sqrt(1 + 1 / 5))
        assert calibration.p_values[d] == pytest.approx(2 * scipy_stats.t.sf(abs(t), 4), rel=1e-9)
    aggregate(cfg, plots=False)
    markdown = Layout(cfg.output_root, "t").ais_md.read_text()
    assert "Null calibration of the top-random test" in markdown and "| arc_easy | 0.01 | 6 |" in markdown
    assert "random2" not in markdown.split("## k sweep per benchmark")[1]


def test_rows_of_a_benchmark_at_chance_are_marked_and_left_out_of_the_family(tmp_path):
    """A benchmark the original solves at chance (1 of 8 four-option items right): its rows keep their AIS and
    paired test, are marked at_chance, and get no q-value and no star, and the family (the m of the
    Benjamini-Hochberg correction) counts only the rows of the benchmark above chance."""
    cfg = load_config(write_config(tmp_path))
    ll = [[-1.0, -2.0, -3.0, -4.0]] * 8  # option 0 always wins
    at_chance = [0, 1, 2, 3, 1, 2, 3, 1]  # gold 0 once: accuracy 1/8 against chance 1/4
    mc(cfg, Variant(), ll, at_chance, [[1] * 4] * 8, [f"d{i}" for i in range(8)])
    mc(cfg, Variant("Quantitative_Reasoning", K, "top"), ll, at_chance, [[1] * 4] * 8, [f"d{i}" for i in range(8)])
    n = 40
    write_eval(cfg, Variant(), "gsm8k", {"exact_match,strict-match": 1.0}, {"exact_match": [1.0] * n}, "strict-match")
    write_eval(
        cfg,
        Variant("Quantitative_Reasoning", K, "top"),
        "gsm8k",
        {"exact_match,strict-match": 0.5},
        {"exact_match": [1.0] * 20 + [0.0] * 20},
        "strict-match",
    )
    profile = load_scores(cfg, progress=False)
    assert profile.at_chance == ["arc_easy"]
    arc = profile.row("Quantitative_Reasoning", "arc_easy", K, "top")
    gsm = profile.row("Quantitative_Reasoning", "gsm8k", K, "top")
    assert arc is not None and gsm is not None
    assert arc.at_chance and arc.significant is False and math.isnan(arc.q_value)
    assert arc.p_value == 1.0  # nothing flipped: the paired test is still there
    assert not gsm.at_chance and gsm.flips_lost == 20 and gsm.significant
    tested = [r for r in profile.rows if not math.isnan(r.p_value) and r.metric != "p_correct" and r.region == "top"]
    assert profile.family_size_damage == len([r for r in tested if r.benchmark != "arc_easy"]) < len(tested)
    # the only row in the family is gsm8k's: its q-value is its own p (McNemar, 20 lost, 0 gained)
    assert gsm.q_value == pytest.approx(2 * 0.5**20)
    aggregate(cfg, plots=False)  # ais.csv marks the rows, ais.md's k sweep says it in the heading
    layout = Layout(cfg.output_root, "t")
    with open(layout.profile_dir / "ais.csv") as f:
        marks = {(r["benchmark"], r["metric"]): r["at_chance"] for r in csv.DictReader(f)}
    assert marks[("arc_easy", "acc_norm,none")] == "true" and marks[("gsm8k", "exact_match,strict-match")] == "false"
    assert "### arc_easy (acc_norm,none; at chance: its AIS is noise)" in layout.ais_md.read_text()


def test_point_estimate_and_interval_share_one_population(tmp_path):
    """Where the result JSON's aggregate is not the mean of its per-document values (here 0.9 reported against
    0.5 over the documents), the AIS is computed on the document means the interval resamples, and a note says so."""
    cfg = load_config(write_config(tmp_path))
    n = 40
    original = [1.0] * 20 + [0.0] * 20
    write_eval(cfg, Variant(), "gsm8k", {"exact_match,strict-match": 0.9}, {"exact_match": original}, "strict-match")
    ablated = [1.0] * 10 + [0.0] * 30
    variant = Variant("Quantitative_Reasoning", K, "top")
    write_eval(cfg, variant, "gsm8k", {"exact_match,strict-match": 0.25}, {"exact_match": ablated}, "strict-match")
    profile = load_scores(cfg, progress=False)
    row = profile.row("Quantitative_Reasoning", "gsm8k", K, "top")
    assert row is not None and row.n_docs == n
    assert (row.score_original, row.score_ablated) == (0.5, 0.25)
    assert row.ais == pytest.approx(0.5)  # (0.5 - 0.25) / 0.5, not (0.9 - 0.25) / 0.9
    assert row.ci_low <= row.ais <= row.ci_high
    assert any("reported exact_match,strict-match (0.9000)" in note for note in profile.notes)


def test_an_unusable_samples_file_refuses_the_row_instead_of_mixing_scales(results):
    """An ablated evaluation without per-document values had its lm-eval aggregate divided by the original's
    mean over documents (two populations, two scales): the row is now refused and said so."""
    cfg = load_config(results)
    variant = Variant("Quantitative_Reasoning", K, "top")
    write_eval(  # the aggregate says 0.4, the lines hold no acc_norm: nothing to pair with the original's
        cfg,
        variant,
        "arc_easy",
        {"acc_norm,none": 0.4, "acc_norm_stderr,none": 0.1},
        {"acc": [0.0] * 5},
    )
    profile = load_scores(cfg, progress=False)
    assert profile.row("Quantitative_Reasoning", "arc_easy", K, "top") is None
    reasons = [m.reason for m in profile.missing if m.variant == variant.label() and m.benchmark == "arc_easy"]
    assert len(reasons) == 1 and "one population per cell" in reasons[0]
    assert profile.row("Quantitative_Reasoning", "arc_easy", K, "random").ais == pytest.approx(-0.25)


def three_right_then_one(cfg) -> None:
    """gsm8k: the original right on 3 of 30 items, every region on 1 (AIS 2/3); arc_easy as ARC."""
    gsm8k(cfg, Variant(), [1.0] * 3 + [0.0] * 27)
    for ability in ABILITIES:
        for region in ("top", "bottom", "random"):
            gsm8k(cfg, Variant(ability, K, region), [1.0] + [0.0] * 29)
            arc(cfg, Variant(ability, K, region), ARC[region])
    arc(cfg, Variant(), ARC[None])


def test_a_generation_task_with_few_right_items_is_at_chance_and_a_loss_is_never(tmp_path):
    """Chance is 0 for a generation task, so 3 right of 30 passed the chance test and 2 lost items made an
    AIS of +0.667; and the one-sided chance test asked a lower-is-better metric to be *above* chance."""
    cfg = load_config(write_config(tmp_path, min_correct=10))  # the default
    three_right_then_one(cfg)
    profile = load_scores(cfg, progress=False)
    assert profile.chance["gsm8k"] == 0 and "gsm8k" in profile.at_chance
    row = profile.row("Quantitative_Reasoning", "gsm8k", K, "top")
    assert row.ais == pytest.approx(2 / 3) and row.at_chance and not row.significant
    assert any("gsm8k: the original gets 3 of 30 items right" in n for n in profile.notes)

    (tmp_path / "more").mkdir()
    cfg = load_config(write_config(tmp_path / "more", min_correct=3))  # the threshold is the config's
    three_right_then_one(cfg)
    assert "gsm8k" not in load_scores(cfg, progress=False).at_chance

    # a loss: lower is better, no chance level to be above, so never at chance
    for variant in [Variant()] + [Variant(a, K, r) for a in ABILITIES for r in ("top", "bottom", "random")]:
        path = Layout(cfg.output_root, "t").eval_file(variant, "gsm8k")
        payload = json.loads(path.read_text())
        payload["higher_is_better"] = {"gsm8k": {"exact_match": False}}
        path.write_text(json.dumps(payload))
    profile = load_scores(cfg, progress=False)
    assert "gsm8k" not in profile.at_chance and "gsm8k" not in profile.chance_p


def test_a_profile_of_an_earlier_statistics_version_is_recomputed(results, capsys):
    """profile_inputs did not name the statistics' definition: after an upgrade that changed tests, intervals and
    families, an existing profile read as done and kept its old stars. It now reads as stale and is recomputed."""
    from benchprof.core.storage import read_json, write_json
    from benchprof.stages.status import plan_status

    cfg = load_config(results)
    aggregate(cfg, plots=False)
    manifest = Layout(cfg.output_root, "t").profile_dir / "manifest.json"
    record = read_json(manifest)
    assert record["inputs"]["statistics"] >= 2
    del record["inputs"]["statistics"]  # as written by benchprof before issue 28
    write_json(manifest, record)
    [profile] = [i for i in plan_status(load_config(results)) if i.stage == "profile"]
    assert (profile.state, profile.why) == ("stale", "changed: statistics")
    capsys.readouterr()
    aggregate(load_config(results), plots=False)
    assert "statistics" in read_json(manifest)["inputs"]
    [profile] = [i for i in plan_status(load_config(results)) if i.stage == "profile"]
    # its inputs are current again (this fixture's hand-written evaluations carry no manifests of their own, so
    # status may still call the profile stale for them, never for its inputs)
    assert profile.state == "done" or not profile.why.startswith("changed"), profile.why


def test_the_change_between_neighbouring_k_is_a_paired_test_of_the_two_ablated_runs(tmp_path):
    """ais.md's k steps: a top region that loses 5 of 80 right items at k = 0.01 and those 5 plus 20 more at
    k = 0.03 changes by 20 documents (McNemar: 20 lost, 0 gained between the two runs); one that loses the same 10
    at both k changes by nothing (p = 1)."""
    raw = yaml.safe_load(write_config(tmp_path).read_text())
    raw["settings"]["k_values"] = [0.01, 0.03]
    raw["evals"]["benchmarks"] = ["arc_easy"]
    (tmp_path / "config.yml").write_text(yaml.safe_dump(raw))
    cfg = load_config(tmp_path / "config.yml")
    original = np.array([1.0] * 80 + [0.0] * 20)

    def lost(count):
        out = original.copy()
        out[:count] = 0.0
        return out

    runs = {
        (Variant(), "arc_easy"): original,
        (Variant(ABILITIES[0], 0.01, "top"), "arc_easy"): lost(5),
        (Variant(ABILITIES[0], 0.03, "top"), "arc_easy"): lost(25),
        (Variant(ABILITIES[1], 0.01, "top"), "arc_easy"): lost(10),
        (Variant(ABILITIES[1], 0.03, "top"), "arc_easy"): lost(10),
    }
    for (variant, benchmark), values in runs.items():
        write_eval(cfg, variant, benchmark, {"acc,none": float(values.mean())}, {"acc": list(values)})
    profile = load_scores(cfg, progress=False)
    steps = {s.ability: s for s in profile.k_steps}
    grows, flat = steps[ABILITIES[0]], steps[ABILITIES[1]]
    assert (grows.k_from, grows.k_to, grows.lost, grows.gained) == (0.01, 0.03, 20, 0)
    assert grows.difference == pytest.approx(25 / 80 - 5 / 80)
    assert grows.p_value == pytest.approx(2 * 0.5**20) and grows.significant
    assert (flat.difference, flat.lost, flat.gained, flat.p_value, flat.significant) == (0.0, 0, 0, 1.0, False)


def test_a_continuous_change_between_k_with_too_few_changed_documents_gets_no_test_and_a_note(tmp_path):
    """A k step on a continuous score where only 6 documents moved: too few for a mean test at any skewness
    (paired.mean_test_units), so no p-value, no star, and ais.md's notes say why."""
    raw = yaml.safe_load(write_config(tmp_path).read_text())
    raw["settings"]["k_values"] = [0.01, 0.03]
    raw["evals"]["benchmarks"] = ["arc_easy"]
    (tmp_path / "config.yml").write_text(yaml.safe_dump(raw))
    cfg = load_config(tmp_path / "config.yml")
    original = np.linspace(0.2, 0.9, 100)
    first = original - 0.05
    second = first.copy()
    second[:6] -= np.array([0.1, 0.2, 0.05, 0.3, 0.15, 0.12])  # six documents move between the two k
    runs = {Variant(): original, Variant(ABILITIES[0], 0.01, "top"): first, Variant(ABILITIES[0], 0.03, "top"): second}
    for variant, values in runs.items():
        write_eval(cfg, variant, "arc_easy", {"acc,none": float(values.mean())}, {"acc": list(values)})
    profile = load_scores(cfg, progress=False)
    [step] = [s for s in profile.k_steps if s.ability == ABILITIES[0]]
    assert step.difference == pytest.approx((first.mean() - second.mean()) / original.mean())
    assert math.isnan(step.p_value) and not step.significant
    assert any(n.startswith("arc_easy (changes between k values): rows with too few") for n in profile.notes)
