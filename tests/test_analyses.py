"""profile/analyses.py: breadth, similarity and the comparison across models, against hand computations on small
AIS tables and on synthetic evaluations whose answer is known (their statistics: tests/test_stats_profiles.py)."""

import csv
import json
import math

import numpy as np
import pytest
import yaml

from benchprof import BenchprofError
from benchprof.core.layout import CompareLayout, Layout, Variant
from benchprof.core.loader import load_config
from benchprof.profile.analyses import verdict
from benchprof.stages.aggregate import aggregate, load_scores
from benchprof.stats.profiles import breadth_bootstrap, profile_similarity
from benchprof.stats.resampling import percentile_ci

K = 0.01
ABILITIES = ["Quantitative_Reasoning", "Temporal_Reasoning", "Spatial_Reasoning"]
N = 100  # items per synthetic benchmark


def test_identical_profiles_have_similarity_one_with_a_degenerate_interval():
    rng = np.random.default_rng(0)
    original = rng.integers(0, 2, size=80).astype(float)
    ablated = np.array([np.where(rng.random(80) < 0.3, 0.0, original) for _ in range(4)])
    draws, _, _ = breadth_bootstrap(original, ablated, 300, np.random.default_rng(1))
    cosine, rho = profile_similarity(draws.T, draws.T)
    assert percentile_ci(cosine) == pytest.approx((1.0, 1.0), abs=1e-12)
    assert percentile_ci(rho) == pytest.approx((1.0, 1.0), abs=1e-12)
    assert verdict(*percentile_ci(cosine)) == "same mixture"


def write_config(tmp_path, models=("t",), **aggregate_settings):
    raw = {
        "settings": {"k_values": [K], "output_dir": "out"},
        "models": [{"name": m, "tag": m} for m in models],
        "datasets": [{"name": a} for a in ABILITIES],
        "evals": {"benchmarks": ["one_ability", "mixed", "coin", "flat"]},
        "extract": {"regions": ["top"]},
        "aggregate": {"bootstrap": 300, "seed": 3, "chance": {"coin": 0.5}, **aggregate_settings},
    }
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump(raw))
    return path


def write_eval(cfg, tag, variant, benchmark, correct):
    """A result JSON (acc) and its per-sample file for one model variant."""
    layout = Layout(cfg.output_root, tag)
    path = layout.eval_file(variant, benchmark)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": benchmark,
        "primary_task": benchmark,
        "results": {benchmark: {"acc,none": float(np.mean(correct))}},
        "n_samples": len(correct),
        "limit": None,
    }
    path.write_text(json.dumps(payload))
    lines = [{"task": benchmark, "doc_id": i, "filter": "none", "acc": float(c)} for i, c in enumerate(correct)]
    layout.samples_file(variant, benchmark).write_text("".join(json.dumps(x) + "\n" for x in lines))


def lose(correct, first, count):
    """`correct` with items first .. first+count-1 answered wrong."""
    out = list(correct)
    for i in range(first, first + count):
        out[i] = 0
    return out


def gain(correct, first, count):
    out = list(correct)
    for i in range(first, first + count):
        out[i] = 1
    return out


def write_model(cfg, tag, hurts_one_ability=ABILITIES[0], k=K):
    """Three benchmarks on one model:
    one_ability: every item answered; only `hurts_one_ability`'s region hurts it (40 items lost), the others
      change nothing: breadth 1, entropy exactly 0 in every resample.
    mixed: 60 of 100 right; Quantitative loses 30 items, Temporal 15, Spatial's removal gains 30 (negative AIS).
    coin: 50 of 100 right against aggregate.chance 0.5: at chance, no breadth.
    flat: 80 of 100 right; each region loses 3 items and gains 2 (no ability significant): no profile."""
    full = [1] * N
    write_eval(cfg, tag, Variant(), "one_ability", full)
    for a in ABILITIES:
        write_eval(cfg, tag, Variant(a, k, "top"), "one_ability", lose(full, 0, 40) if a == hurts_one_ability else full)
    mixed = [1] * 60 + [0] * 40
    write_eval(cfg, tag, Variant(), "mixed", mixed)
    write_eval(cfg, tag, Variant(ABILITIES[0], k, "top"), "mixed", lose(mixed, 0, 30))
    write_eval(cfg, tag, Variant(ABILITIES[1], k, "top"), "mixed", lose(mixed, 30, 15))
    write_eval(cfg, tag, Variant(ABILITIES[2], k, "top"), "mixed", gain(mixed, 60, 30))
    coin = [1, 0] * (N // 2)
    write_eval(cfg, tag, Variant(), "coin", coin)
    for a in ABILITIES:
        write_eval(cfg, tag, Variant(a, k, "top"), "coin", lose(coin, 0, 10))
    flat = [1] * 80 + [0] * 20
    write_eval(cfg, tag, Variant(), "flat", flat)
    for i, a in enumerate(ABILITIES):
        write_eval(cfg, tag, Variant(a, k, "top"), "flat", gain(lose(flat, 3 * i, 3), 80 + 2 * i, 2))


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_breadth_and_similarity_on_synthetic_evaluations(tmp_path):
    cfg = load_config(write_config(tmp_path))
    write_model(cfg, "t")
    profile = load_scores(cfg, progress=False)
    lines = {b.benchmark: b for b in profile.breadth}

    one = lines["one_ability"]  # a benchmark of one ability's items where only its region hurts
    assert (one.n_positive, one.positive, one.n_negative) == (1, [ABILITIES[0]], 0)
    assert (one.normalised_entropy, one.effective_abilities) == (0.0, 1.0)
    assert (one.entropy_ci_low, one.entropy_ci_high, one.effective_ci_low, one.effective_ci_high) == (0, 0, 1, 1)
    assert (one.abilities, one.n_docs, one.dropped) == (3, N, 0)
    assert (one.n_above, one.above_ci_low, one.above_ci_high) == (1, 1, 1)  # AIS 0.4 against 0, 0 (threshold 0.05)

    mixed = lines["mixed"]  # AIS: 30/60, 15/60, -30/60
    assert profile.row(ABILITIES[2], "mixed", K).ais == pytest.approx(-0.5)
    assert (mixed.positive, mixed.negative) == (ABILITIES[:2], [ABILITIES[2]])
    h = -(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3))  # positive mass 0.5 and 0.25
    assert mixed.normalised_entropy == pytest.approx(h / math.log(3))
    assert mixed.effective_abilities == pytest.approx(math.exp(h))
    assert mixed.entropy_ci_low <= mixed.normalised_entropy <= mixed.entropy_ci_high
    assert mixed.entropy_ci_low < mixed.entropy_ci_high
    assert mixed.n_above == 2 and mixed.above_ci_low <= 2 <= mixed.above_ci_high  # 0.5 and 0.25 above 0.05
    assert lines["flat"].n_above == 0  # every AIS (3 - 2) / 80 = 0.0125

    coin = lines["coin"]  # the original is at chance: listed, nothing computed
    assert not coin.headline and coin.n_positive == 0 and math.isnan(coin.normalised_entropy)
    assert "coin" in profile.at_chance

    assert lines["flat"].headline and lines["flat"].n_positive == 0
    pairs = {(s.benchmark_a, s.benchmark_b): s for s in profile.similarity}  # headline benchmarks only
    assert set(pairs) == {("one_ability", "mixed"), ("one_ability", "flat"), ("mixed", "flat")}
    assert pairs[("one_ability", "flat")].verdict == pairs[("mixed", "flat")].verdict == "no profile"
    pair = pairs[("one_ability", "mixed")]
    assert pair.abilities == 3
    x, y = np.array([0.4, 0.0, 0.0]), np.array([0.5, 0.25, -0.5])
    assert pair.cosine == pytest.approx(x @ y / np.linalg.norm(x) / np.linalg.norm(y))
    # centred ranks x: 1, -0.5, -0.5; y: 1, 0, -1 -> (1 + 0 + 0.5) / sqrt(1.5 * 2)
    assert pair.spearman == pytest.approx(1.5 / math.sqrt(3))
    assert pair.cosine_ci_low <= pair.cosine <= pair.cosine_ci_high
    assert pair.verdict == "differ" and pair.cosine_ci_high < 0.9


def test_aggregate_writes_the_analyses_and_ais_md_summarises_them(tmp_path):
    cfg = load_config(write_config(tmp_path))
    write_model(cfg, "t")
    aggregate(cfg, plots=True)
    layout = Layout(cfg.output_root, "t")
    rows = {r["benchmark"]: r for r in read_csv(layout.benchmarks_csv) if r["k"] == "0.01"}
    assert rows["mixed"]["positive"] == ";".join(ABILITIES[:2]) and rows["mixed"]["n_negative"] == "1"
    assert rows["coin"]["headline"] == "false" and rows["coin"]["normalised_entropy"] == ""
    verdicts = {(r["benchmark_a"], r["benchmark_b"]): r["verdict"] for r in read_csv(layout.similarity_csv)}
    assert verdicts == {
        ("one_ability", "mixed"): "differ",
        ("one_ability", "flat"): "no profile",
        ("mixed", "flat"): "no profile",
    }
    assert layout.similarity_png.stat().st_size > 0
    markdown = layout.ais_md.read_text()
    assert "## Breadth and similarity of the benchmarks" in markdown
    assert f"| mixed | 0.01 | 2: {ABILITIES[0]}, {ABILITIES[1]} | 1: {ABILITIES[2]} |" in markdown
    assert "At chance (no breadth, left out of the similarity): coin." in markdown
    assert "- one_ability ~ mixed: cosine" in markdown.split("Differ (1 of 3 pairs)")[1]
    assert (
        "Not judged (a benchmark with no significantly positive ability, whose profile is noise): 2 pairs." in markdown
    )
    assert json.loads(layout.ais_json.read_text())["breadth"][0]["benchmark"] == "one_ability"
    assert not CompareLayout(cfg.output_root).compare_dir.exists()  # one model: no comparison


def test_comparison_across_two_models(tmp_path, capsys):
    """Model u is model t with Temporal's region, not Quantitative's, hurting one_ability; model v is t again."""
    cfg = load_config(write_config(tmp_path, models=("t", "u", "v")))
    write_model(cfg, "t")
    write_model(cfg, "u", hurts_one_ability=ABILITIES[1])
    write_model(cfg, "v")
    aggregate(cfg, plots=True)
    assert "compare: 3 models ->" in capsys.readouterr().out
    compare = CompareLayout(cfg.output_root)
    correlation = {(r["benchmark"], r["model_a"], r["model_b"]): r for r in read_csv(compare.correlation_csv)}
    assert len(correlation) == 3 * 3  # headline benchmarks x model pairs; coin is at chance
    assert correlation[("flat", "t", "v")]["verdict"] == "no profile"
    same = correlation[("one_ability", "t", "v")]  # identical evaluations: one generator, the same draws
    assert (float(same["cosine"]), float(same["cosine_ci_low"]), float(same["cosine_ci_high"])) == pytest.approx(
        (1, 1, 1)
    )
    assert (float(same["spearman_ci_low"]), float(same["spearman_ci_high"])) == pytest.approx((1, 1))
    assert same["paired"] == "true" and same["verdict"] == "same mixture"
    moved = correlation[("one_ability", "t", "u")]  # [a, 0, 0] against [0, b, 0] in every resample
    assert (float(moved["cosine"]), float(moved["cosine_ci_low"]), float(moved["cosine_ci_high"])) == (0, 0, 0)
    assert float(moved["spearman"]) == pytest.approx(-0.5) and moved["verdict"] == "differ"
    assert correlation[("mixed", "t", "u")]["cosine"] == "1.0"  # mixed is the same in both

    differences = {
        (r["benchmark"], r["ability"], r["model_a"], r["model_b"]): r for r in read_csv(compare.differences_csv)
    }
    assert len(differences) == 3 * 3 * 3  # headline benchmarks x abilities x model pairs
    for (benchmark, ability, a, b), r in differences.items():
        if (a, b) == ("t", "v"):  # the same evaluations: no difference, p = 1, never a star
            assert (float(r["difference"]), float(r["p_value"]), r["significant"]) == (0.0, 1.0, "false")
    moved_away = differences[("one_ability", ABILITIES[0], "t", "u")]  # 40 of 100 lost in t, none in u
    assert float(moved_away["difference"]) == pytest.approx(0.4) and moved_away["significant"] == "true"
    assert float(moved_away["ci_low"]) > 0.25 and moved_away["paired"] == "true"
    moved_in = differences[("one_ability", ABILITIES[1], "t", "u")]
    assert float(moved_in["difference"]) == pytest.approx(-0.4) and moved_in["significant"] == "true"
    assert differences[("mixed", ABILITIES[0], "t", "u")]["significant"] == "false"  # mixed is the same in both
    assert "## Did an ability's AIS change between models?" in compare.compare_md.read_text()

    profiles = read_csv(compare.profiles_csv)
    assert len(profiles) == 3 * 3 * 3  # benchmarks x models x abilities at one k
    assert {r["model"] for r in profiles} == {"t", "u", "v"}
    assert compare.profiles_png.stat().st_size > 0
    markdown = compare.compare_md.read_text()
    findings = markdown.split("## Findings in every model")[1]
    assert "- one_ability, significantly positive in every model: none (t: Quantitative_Reasoning; " in findings
    assert (
        f"- mixed, significantly positive in every model: {ABILITIES[0]}, {ABILITIES[1]} (the same set in every model)"
        in findings
    )
    assert f"- mixed, significantly negative in every model: {ABILITIES[2]} (the same set in every model)" in findings
    assert "- benchmark pairs judged differ in every model: one_ability ~ mixed" in findings
    assert "Benchmarks at chance in any model are left out here and below: coin." in markdown


def test_the_mean_specificity_difference_between_models_is_tested(tmp_path):
    """Three models on the three abilities' own splits (80 of 100 right): in t and v each ability's region loses 30
    items of its own split only (specificity 0.375 each), in u every region loses 30 items of every split
    (specificity 0). compare/differences.csv's specificity line: the profiles' own mean specificity in each model,
    their difference significant for t against u, exactly 0 with p = 1 for t against v (the same files)."""
    path = write_config(tmp_path, models=("t", "u", "v"))
    raw = yaml.safe_load(path.read_text())
    raw["evals"]["benchmarks"] = ABILITIES
    raw["aggregate"].pop("chance")  # its benchmark is gone
    path.write_text(yaml.safe_dump(raw))
    cfg = load_config(path)
    base = [1] * 80 + [0] * 20
    for tag in ("t", "u", "v"):
        for split in ABILITIES:
            write_eval(cfg, tag, Variant(), split, base)
            for ability in ABILITIES:
                hurt = tag == "u" or ability == split
                write_eval(cfg, tag, Variant(ability, K, "top"), split, lose(base, 0, 30) if hurt else base)
    aggregate(cfg, plots=False)
    lines = {
        (r["model_a"], r["model_b"]): r
        for r in read_csv(CompareLayout(cfg.output_root).differences_csv)
        if (r["benchmark"], r["ability"]) == ("specificity", "mean")
    }
    own = {tag: load_scores(cfg, model=tag, progress=False).row("mean", "specificity", K, "top").ais for tag in "tuv"}
    assert own == pytest.approx({"t": 0.375, "u": 0.0, "v": 0.375})
    t_u = lines[("t", "u")]
    assert (float(t_u["ais_a"]), float(t_u["ais_b"]), float(t_u["difference"])) == pytest.approx((0.375, 0.0, 0.375))
    assert t_u["significant"] == "true" and float(t_u["ci_low"]) > 0.2 and t_u["paired"] == "true"
    t_v = lines[("t", "v")]
    assert (float(t_v["difference"]), float(t_v["p_value"]), t_v["significant"]) == (0.0, 1.0, "false")


def test_a_model_tagged_compare_is_refused_with_several_models(tmp_path):
    """outputs/compare/ is the comparison's folder: a model tagged so is refused when the config loads."""
    with pytest.raises(BenchprofError, match=r"models\[1\].tag: 'compare' is the outputs folder's own compare/"):
        load_config(write_config(tmp_path, models=("t", "compare")))


@pytest.mark.slow
def test_comparison_runs_on_two_real_tiny_models(tmp_path):
    """The whole pipeline through the CLI on two real models: the demo model in float32 and in bfloat16 (the same
    weights rounded: another model to the pipeline, every stage rerun on it). outputs/compare/ holds both profiles
    side by side and, for every benchmark above chance in both, a correlation row of the pair with its interval."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    demo = yaml.safe_load((root / "configs" / "demo.yml").read_text())
    abilities = ["Quantitative_Reasoning", "Commonsense_Causal"]
    model = str(root / "benchprof" / "assets" / "demo-model")
    demo["settings"].update(output_dir=str(tmp_path / "outputs"), k_values=[0.03])
    demo["models"] = [
        {"name": model, "tag": "demo", "dtype": "float32"},
        {"name": model, "tag": "demo-bf16", "dtype": "bfloat16"},
    ]
    demo["data"].update(dir=str(tmp_path / "data"), test_size=40, train_size=64)
    demo["datasets"] = [{"name": a} for a in abilities]
    demo["finetune"].update(max_samples=16, dtype="auto")
    demo["extract"]["regions"] = ["top", "random"]
    demo["evals"].update(benchmarks=abilities, num_fewshot=[0, 0], composites={})
    demo["aggregate"]["bootstrap"] = 100
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump(demo))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_EVALUATE_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "benchprof", "run", str(config)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "compare: 2 models ->" in done.stdout
    compare = CompareLayout(tmp_path / "outputs")
    profiles = read_csv(compare.profiles_csv)
    headline = {r["benchmark"] for r in profiles}
    assert headline and headline <= set(abilities)  # Commonsense_Causal at least: the demo model knows it
    assert {(r["model"], r["benchmark"], r["ability"]) for r in profiles} == {
        (m, b, a) for m in ("demo", "demo-bf16") for b in headline for a in abilities
    }
    correlation = read_csv(compare.correlation_csv)
    assert {(r["benchmark"], r["model_a"], r["model_b"]) for r in correlation} == {
        (b, "demo", "demo-bf16") for b in headline
    }
    for row in correlation:
        if row["cosine"]:
            assert float(row["cosine_ci_low"]) <= float(row["cosine"]) <= float(row["cosine_ci_high"])
    assert "## Findings in every model" in compare.compare_md.read_text()


def test_similarity_intervals_cover_and_say_same_mixture_for_the_same_profile():
    """A percentile interval of a cosine never covered a true cosine of 1 (noise pulls every resample below the
    estimate), so identical profiles came out "undecided". Over 300 simulated pairs of noisy profiles (ten
    abilities, the bootstrap drawn around each estimate with the same noise): the basic interval covers the
    true cosine, says "same mixture" for identical profiles most of the time, and almost never for profiles
    whose true cosine is 0.85."""
    from benchprof.stats.resampling import basic_ci

    rng = np.random.default_rng(9)
    x_true = rng.uniform(0.1, 0.5, 10)
    y_other = x_true + 0.45 * rng.uniform(-1, 1, 10)
    for y_true in (x_true, y_other):
        truth = float(profile_similarity(x_true, y_true)[0])
        covered, same, old_covered = [], [], []
        for _ in range(300):
            x, y = x_true + rng.normal(0, 0.05, 10), y_true + rng.normal(0, 0.05, 10)
            xs, ys = x + rng.normal(0, 0.05, (400, 10)), y + rng.normal(0, 0.05, (400, 10))
            cosine, draws = float(profile_similarity(x, y)[0]), profile_similarity(xs, ys)[0]
            low, high = basic_ci(cosine, draws, bounds=(-1.0, 1.0))
            covered.append(low <= truth <= high)
            same.append(verdict(low, high) == "same mixture")
            old_low, old_high = percentile_ci(draws)
            old_covered.append(old_low <= truth <= old_high)
        print(
            f"true cosine {truth:.3f}: basic covers {np.mean(covered):.3f} (percentile {np.mean(old_covered):.3f}), "
            f"same mixture {np.mean(same):.3f}"
        )
        assert np.mean(covered) >= 0.9
        if truth == pytest.approx(1.0):
            assert np.mean(old_covered) == 0.0 and np.mean(same) >= 0.9
        else:
            assert 0.8 < truth < 0.9 and np.mean(same) <= 0.05


def test_compare_of_two_configs_equals_the_comparison_of_one(tmp_path, capsys):
    """`benchprof compare` on models profiled in two configs (t and u in one, v in the other) writes the same
    tables, byte for byte, as aggregate over one config that lists all three."""
    from benchprof.stages.compare import compare

    folders = {name: tmp_path / name for name in ("one", "first", "second")}
    for folder in folders.values():
        folder.mkdir()
    one = load_config(write_config(folders["one"], models=("t", "u", "v")))
    first = load_config(write_config(folders["first"], models=("t", "u")))
    second = write_config(folders["second"], models=("v",))
    for cfg in (one, first, load_config(second)):
        for tag in [m.tag for m in cfg.models]:
            write_model(cfg, tag, hurts_one_ability=ABILITIES[1] if tag == "u" else ABILITIES[0])
    aggregate(one, plots=False)
    out = tmp_path / "t-u-v"
    compare(first, against=str(second), out=str(out), plots=False)
    assert "compare: 3 models, 3 benchmarks above chance in all," in capsys.readouterr().out
    expected = CompareLayout(one.output_root)
    got = CompareLayout(tmp_path, "t-u-v")
    for name in ("profiles_csv", "differences_csv", "correlation_csv", "compare_md"):
        assert getattr(got, name).read_bytes() == getattr(expected, name).read_bytes(), name
    differences = {(r["benchmark"], r["ability"], r["model_a"], r["model_b"]): r for r in read_csv(got.differences_csv)}
    assert differences[("one_ability", ABILITIES[0], "t", "u")]["significant"] == "true"  # t's region hurts, u's not
    compare(first, against=str(second), plots=False)  # by default beside, not in, aggregate's outputs/compare/
    assert CompareLayout(first.output_root, "compare-t-u-v").compare_md.read_bytes() == got.compare_md.read_bytes()
    assert not CompareLayout(first.output_root).compare_dir.exists()


@pytest.mark.parametrize(
    ("second_models", "second_settings", "message"),
    [
        (("v",), {"seed": 4}, r"compare: aggregate.seed is 3 in .*first.* but 4 in .*second.*; compared profiles"),
        (("v",), {"bootstrap": 200}, r"compare: aggregate.bootstrap is 300 in .* but 200 in "),
        (("v",), {"metrics": {"mixed": "acc"}}, r"compare: aggregate.metrics is \{\} in .* but \{'mixed': 'acc'\}"),
        (("v",), {"min_correct": 3}, r"compare: aggregate.min_correct is 10 in .* but 3 in "),
        (("t",), {}, r"compare: the model tag 't' is in .*first.* and in .*second.*; give one of them another tag"),
        (("w",), {}, r"compare: no AIS for w under .*second.* \(run `benchprof evaluate .*second.*` first\)"),
    ],
)
def test_compare_refuses_configs_it_cannot_compare(tmp_path, second_models, second_settings, message):
    """Profiles resampled, scored or judged above chance otherwise, a headline k one config lacks, one tag in two
    configs, or a model without evaluations: refused in one line, nothing written."""
    from benchprof.stages.compare import compare

    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first = load_config(write_config(tmp_path / "first", models=("t", "u")))
    second_settings = dict(second_settings)
    k_values = second_settings.pop("k_values", None)
    second = write_config(tmp_path / "second", models=second_models, **second_settings)
    if k_values is not None:  # a config whose k values do not hold the first's headline k
        raw = yaml.safe_load(second.read_text())
        second.write_text(yaml.safe_dump({**raw, "settings": {**raw["settings"], "k_values": k_values}}))
    for tag in ("t", "u"):
        write_model(first, tag)
    with pytest.raises(BenchprofError, match=message):
        compare(first, against=str(second), out=str(tmp_path / "out"))
    with pytest.raises(BenchprofError, match="--against needs the config of at least one other model"):
        compare(first, against=" , ", out=str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_a_size_rule_compares_each_model_at_its_own_k(tmp_path, capsys):
    """Three configs whose headline k differ (a size rule gives each model its own k): t at 0.01, v and w (the same
    evaluations) at 0.02, all on the same items. Each model is compared at its own k; every difference is the two
    models' AIS as each one's own profile has it; every pair is paired (resampled by one generator): where two
    models' evaluations are the same (v ~ w everywhere, t ~ v on `mixed`) the difference is exactly 0 with the
    interval [0, 0]; compare.md and the terminal say which k; a --report_k that one config lacks is refused."""
    from benchprof.stages.compare import compare

    paths = {}
    for tag, k in (("t", K), ("v", 0.02), ("w", 0.02)):
        (tmp_path / tag).mkdir()
        paths[tag] = write_config(tmp_path / tag, models=(tag,))
        raw = yaml.safe_load(paths[tag].read_text())
        paths[tag].write_text(yaml.safe_dump({**raw, "settings": {**raw["settings"], "k_values": [k]}}))
        write_model(load_config(paths[tag]), tag, hurts_one_ability=ABILITIES[tag != "t"], k=k)
    first, against = load_config(paths["t"]), f"{paths['v']},{paths['w']}"
    with pytest.raises(BenchprofError, match=r"compare: .*v.*: --report_k: .* is not one of settings.k_values"):
        compare(first, against=against, out=str(tmp_path / "out"), report_k=K)
    assert not (tmp_path / "out").exists()
    compare(first, against=against, out=str(tmp_path / "out"), plots=False)
    assert "compare: 3 models each at its own k (0.01, 0.02, 0.02), 3 benchmarks above" in capsys.readouterr().out
    own = {
        tag: {
            (r.benchmark, r.ability): r.ais for r in load_scores(load_config(paths[tag]), tag).rows if r.region == "top"
        }
        for tag in ("t", "v", "w")
    }
    ks = {"t": K, "v": 0.02, "w": 0.02}
    got = CompareLayout(tmp_path, "out")
    differences = read_csv(got.differences_csv)
    assert len([r for r in differences if r["ability"] in ABILITIES]) == 3 * 3 * 3  # benchmarks x abilities x pairs
    for r in differences:
        a, b = r["model_a"], r["model_b"]
        assert (float(r["k"]), float(r["k_b"])) == (ks[a], ks[b])
        assert r["paired"] == "true"
        if r["ability"] in ABILITIES:
            assert float(r["difference"]) == pytest.approx(
                own[a][(r["benchmark"], r["ability"])] - own[b][(r["benchmark"], r["ability"])]
            )
        if (a, b) == ("v", "w") or r["benchmark"] == "mixed":  # the same evaluations: paired draws cancel exactly
            assert (float(r["difference"]), float(r["ci_low"]), float(r["ci_high"])) == (0.0, 0.0, 0.0)
    moved = {(r["benchmark"], r["ability"], r["model_b"]): r for r in differences if r["model_a"] == "t"}
    assert float(moved[("one_ability", ABILITIES[0], "v")]["difference"]) == pytest.approx(0.4)
    assert moved[("one_ability", ABILITIES[1], "v")]["significant"] == "true"
    correlation = read_csv(got.correlation_csv)
    assert {(r["model_a"], r["model_b"], float(r["k"]), float(r["k_b"]), r["paired"]) for r in correlation} == {
        ("t", "v", K, 0.02, "true"),
        ("t", "w", K, 0.02, "true"),
        ("v", "w", 0.02, 0.02, "true"),
    }
    markdown = got.compare_md.read_text()
    assert (
        "each model at its own report k (the same size rule is a different k in each model): "
        "k = 0.01 (t), 0.02 (v), 0.02 (w)" in markdown
    )
    table = markdown.split("### one_ability")[1].split("###")[0]
    assert (
        f"| {ABILITIES[0]} | +0.400* | +0.000 | +0.000 |" in table
        and f"| {ABILITIES[1]} | +0.000 | +0.400* | +0.400* |" in table
    )
    findings = markdown.split("## Findings in every model")[1]
    assert f"- mixed, significantly negative in every model: {ABILITIES[2]} (the same set in every model)" in findings


def test_compare_refuses_a_partial_or_hand_edited_profile_and_a_file_as_out(tmp_path):
    """compare over a profile one evaluation short, or whose samples file was edited after its result recorded it,
    is refused in one line naming the evaluation, never compared without it; an --out that is a file (or under one)
    is one line before any work."""
    from benchprof.core.storage import content_record, matches_record
    from benchprof.stages.compare import compare

    for name in ("first", "second"):
        (tmp_path / name).mkdir()
    first = load_config(write_config(tmp_path / "first", models=("t",)))
    second = write_config(tmp_path / "second", models=("u",))
    write_model(first, "t")
    write_model(load_config(second), "u")
    layout = Layout(load_config(second).output_root, "u")
    partial = layout.eval_file(Variant(ABILITIES[1], K, "top"), "mixed")
    partial.unlink()
    with pytest.raises(BenchprofError) as refused:
        compare(first, against=str(second), out=str(tmp_path / "out"), plots=False)
    assert str(refused.value).startswith(
        f"compare: u's profile lacks 1 evaluation(s) (first: mixed {ABILITIES[1]}/k{K}/top: "
    ) and str(refused.value).endswith(
        f"run `benchprof evaluate {second}` to finish it (`benchprof status {second}` lists each)"
    )
    write_model(load_config(second), "u")  # whole again; then one samples file edited after its result was written
    edited = layout.eval_file(Variant(ABILITIES[0], K, "top"), "one_ability")
    samples = layout.samples_file(Variant(ABILITIES[0], K, "top"), "one_ability")
    edited.write_text(json.dumps({**json.loads(edited.read_text()), "files": {samples.name: content_record(samples)}}))
    samples.write_text(samples.read_text().replace('"acc": 0.0', '"acc": 1.0', 5))
    with pytest.raises(BenchprofError, match=r"compare: u's profile lacks 1 evaluation\(s\) \(first: one_ability "):
        compare(first, against=str(second), out=str(tmp_path / "out"), plots=False)
    assert not (tmp_path / "out").exists()
    write_model(load_config(second), "u")
    (tmp_path / "a-file").write_text("mine\n")
    for out in (tmp_path / "a-file", tmp_path / "a-file" / "under"):
        with pytest.raises(BenchprofError, match=rf"{tmp_path / 'a-file'} is a file, not a folder"):
            compare(first, against=str(second), out=str(out), plots=False)
    assert (tmp_path / "a-file").read_text() == "mine\n"
    compare(first, against=str(second), out=str(tmp_path / "out"), plots=False)  # whole: compared
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    md = tmp_path / "out" / "compare.md"
    assert set(manifest["files"]) == {"profiles.csv", "differences.csv", "correlation.csv", "claims.csv", "compare.md"}
    assert matches_record(md, manifest["files"]["compare.md"]) and set(manifest["evaluations"]) == {"t", "u"}
    md.write_text(md.read_text()[:100])  # cut short: the manifest no longer vouches for it
    assert not matches_record(md, manifest["files"]["compare.md"])


def test_compare_writes_only_into_its_own_folder_and_drops_what_it_no_longer_writes(tmp_path):
    """A second compare with --plots=false removes its own earlier profiles.png (it stayed, listed with its old hash);
    its manifest lists only what it wrote; --out at a profile folder (aggregate's) is refused in one line and the
    profile is left byte for byte."""
    from benchprof.core.storage import read_manifest
    from benchprof.stages.compare import compare

    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first = load_config(write_config(tmp_path / "first", models=("t",)))
    second = write_config(tmp_path / "second", models=("v",))
    write_model(first, "t")
    write_model(load_config(second), "v")
    out = tmp_path / "cmp"
    compare(first, against=str(second), out=str(out), plots=True)
    assert (out / "profiles.png").is_file()
    (out / "notes.txt").write_text("mine")  # a file of the user's, never listed: left alone
    compare(first, against=str(second), out=str(out), plots=False)
    assert not (out / "profiles.png").exists() and (out / "notes.txt").read_text() == "mine"
    manifest = read_manifest(out)
    assert manifest is not None and manifest["command"] == "compare"
    assert set(manifest["files"]) == {p.name for p in out.iterdir()} - {"manifest.json", "notes.txt"}
    aggregate(first, plots=False)
    profile = tmp_path / "first" / "out" / "t" / "profile"
    before = {p.name: p.read_bytes() for p in profile.iterdir()}
    with pytest.raises(BenchprofError, match=rf"^compare: --out {profile} holds aggregate's outputs; name an empty"):
        compare(first, against=str(second), out=str(profile), plots=False)
    assert {p.name: p.read_bytes() for p in profile.iterdir()} == before
