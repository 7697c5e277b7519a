"""Region specificity (aggregate's specificity rows, stats/impact.py's specificity math): specificity and diagonal
dominance against hand computations, and a score switch on the tiny model end to end."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from scipy import stats as scipy_stats

from benchprof.core.layout import Layout, Variant
from benchprof.core.loader import load_config
from benchprof.core.storage import file_hash, save_tensors
from benchprof.profile.report import render_markdown
from benchprof.profile.rows import MEAN, SPECIFICITY, cell_key
from benchprof.stages.aggregate import load_scores
from benchprof.stages.extract import extract
from benchprof.stats.resampling import bootstrap_ais, cell_rng

ABILITIES = ["Quantitative_Reasoning", "Temporal_Reasoning", "Spatial_Reasoning"]


SPLITS = ABILITIES  # each ability's benchmark is its own test split


def result_config(tmp_path: Path, bootstrap: int = 200) -> Path:
    raw = {
        "settings": {"k_values": [0.01], "output_dir": "out"},
        "models": [{"name": "x", "tag": "t"}],
        "datasets": [{"name": a} for a in ABILITIES],
        "evals": {"benchmarks": SPLITS + ["arc_easy"]},
        "extract": {"regions": ["top", "random"]},
        "aggregate": {"bootstrap": bootstrap, "seed": 3, "min_correct": 1},  # 10-item files without options
    }
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump(raw))
    return path


def write_result(cfg, variant: Variant, benchmark: str, per_doc: list[float], mask: str = None) -> None:
    """An eval JSON and samples JSONL, as evaluate writes them (acc per document)."""
    layout = Layout(cfg.output_root, "t")
    path = layout.eval_file(variant, benchmark)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": benchmark,
        "primary_task": benchmark,
        "results": {benchmark: {"acc,none": float(np.mean(per_doc))}},
        "n_samples": len(per_doc),
        "limit": None,
    }
    if mask is not None:
        payload["inputs"] = {"mask": mask}
    path.write_text(json.dumps(payload))
    layout.samples_file(variant, benchmark).write_text(
        "".join(
            json.dumps({"task": benchmark, "doc_id": i, "filter": "none", "acc": v}) + "\n"
            for i, v in enumerate(per_doc)
        )
    )


# Original accuracy 0.8 on every split (10 documents). AIS of ability a's top region on split b,
# as (correct documents left of 10): own split hurt most for Quantitative and Temporal, not Spatial.
ORIGINAL = [1, 1, 1, 1, 1, 1, 1, 1, 0, 0]
TOP_CORRECT = {
    "Quantitative_Reasoning": {"Quantitative_Reasoning": 4, "Temporal_Reasoning": 7, "Spatial_Reasoning": 8},
    "Temporal_Reasoning": {"Quantitative_Reasoning": 8, "Temporal_Reasoning": 6, "Spatial_Reasoning": 7},
    "Spatial_Reasoning": {"Quantitative_Reasoning": 2, "Temporal_Reasoning": 8, "Spatial_Reasoning": 6},
}
RANDOM_CORRECT = 8  # random regions do nothing


def docs(correct: int) -> list[float]:
    return [1.0] * correct + [0.0] * (10 - correct)


@pytest.fixture
def result_files(tmp_path):
    path = result_config(tmp_path)
    cfg = load_config(path)
    for split in SPLITS:
        write_result(cfg, Variant(), split, ORIGINAL)
        for ability in ABILITIES:
            write_result(cfg, Variant(ability, 0.01, "top"), split, docs(TOP_CORRECT[ability][split]))
            write_result(cfg, Variant(ability, 0.01, "random"), split, docs(RANDOM_CORRECT))
    write_result(cfg, Variant(), "arc_easy", ORIGINAL)  # not an ability split: never in specificity
    for ability in ABILITIES:
        write_result(cfg, Variant(ability, 0.01, "top"), "arc_easy", docs(0))
    return path


def hand_ais(correct: int) -> float:
    return (8 - correct) / 8


def test_specificity_and_diagonal_dominance_by_hand(result_files):
    profile = load_scores(load_config(result_files), progress=False)
    spec = {}
    for a in ABILITIES:
        own = hand_ais(TOP_CORRECT[a][a])
        others = [hand_ais(TOP_CORRECT[a][b]) for b in SPLITS if b != a]
        spec[a] = own - sum(others) / 2
        row = profile.row(a, SPECIFICITY, 0.01, "top")
        assert row.ais == pytest.approx(spec[a])
        assert profile.row(a, SPECIFICITY, 0.01, "random").ais == pytest.approx(0.0)
        assert profile.row(a, SPECIFICITY, 0.01, "top-random").ais == pytest.approx(spec[a])
    # Quantitative: 0.5 - (0.125 + 0) / 2 = 0.4375; Temporal: 0.25 - (0 + 0.125) / 2; Spatial: 0.25 - (0.75 + 0) / 2
    assert spec == pytest.approx(
        {"Quantitative_Reasoning": 0.4375, "Temporal_Reasoning": 0.1875, "Spatial_Reasoning": -0.125}
    )
    assert profile.row(MEAN, SPECIFICITY, 0.01, "top").ais == pytest.approx(sum(spec.values()) / 3)
    assert profile.diagonal_dominance(0.01) == {
        "Quantitative_Reasoning": True,
        "Temporal_Reasoning": True,
        "Spatial_Reasoning": False,
    }
    assert "specificity" not in profile.matrix()["Quantitative_Reasoning"]  # the matrix keeps to benchmarks

    # the interval: the cells' own bootstrap samples, combined resample by resample
    a = "Temporal_Reasoning"
    draws = {
        b: bootstrap_ais(
            np.array(ORIGINAL, float),
            np.array([docs(TOP_CORRECT[a][b]), docs(RANDOM_CORRECT)]),
            200,
            cell_rng(3, cell_key(a, 0.01, b)),
        )[0]
        for b in SPLITS
    }
    combined = draws[a] - (draws["Quantitative_Reasoning"] + draws["Spatial_Reasoning"]) / 2
    se = np.std(combined[np.isfinite(combined)], ddof=1)  # a Wald test on the bootstrap standard error: no p floor
    row = profile.row(a, SPECIFICITY, 0.01, "top")
    assert (row.ci_low, row.ci_high) == pytest.approx((row.ais - 1.959964 * se, row.ais + 1.959964 * se))
    assert row.p_value == pytest.approx(2 * scipy_stats.norm.sf(abs(row.ais) / se))

    markdown = render_markdown(profile)
    assert "## Region specificity (extract.score = `importance`" in markdown
    assert "- k = 0.01: 2 of 3 (Quantitative_Reasoning, Temporal_Reasoning)" in markdown


def test_mean_specificity_interval_is_exact_when_documents_agree(tmp_path):
    """Documents all alike: every resample gives the point estimate, so the interval is a point."""
    path = result_config(tmp_path, bootstrap=50)
    cfg = load_config(path)
    ablated = {
        "Quantitative_Reasoning": (0.4, 0.7, 0.8),
        "Temporal_Reasoning": (0.8, 0.6, 0.7),
        "Spatial_Reasoning": (0.2, 0.8, 0.6),
    }  # accuracy on each split, every document the same
    for i, split in enumerate(SPLITS):
        write_result(cfg, Variant(), split, [0.8] * 6)
        for ability in ABILITIES:
            write_result(cfg, Variant(ability, 0.01, "top"), split, [ablated[ability][i]] * 6)
    profile = load_scores(load_config(path), progress=False)
    row = profile.row(MEAN, SPECIFICITY, 0.01, "top")
    ais = {(a, b): (0.8 - ablated[a][i]) / 0.8 for a in ABILITIES for i, b in enumerate(SPLITS)}
    spec = [ais[(a, a)] - sum(ais[(a, b)] for b in SPLITS if b != a) / 2 for a in ABILITIES]
    assert row.ais == pytest.approx(np.mean(spec))
    assert row.ci_low == pytest.approx(row.ais) and row.ci_high == pytest.approx(row.ais)


def test_evaluations_of_replaced_masks_are_not_used(result_files):
    cfg = load_config(result_files)
    layout = Layout(cfg.output_root, "t")
    a, split = "Quantitative_Reasoning", "Quantitative_Reasoning"
    mask = layout.mask_file(a, 0.01, "top")
    save_tensors(mask, {"x.weight": torch.tensor([1, 2])}, {"fingerprint": "f"})
    write_result(cfg, Variant(a, 0.01, "top"), split, docs(4), mask="0" * 16)  # made from an older mask
    profile = load_scores(load_config(result_files), progress=False, bootstrap=0)
    assert profile.row(a, split, 0.01, "top") is None
    reasons = {(m.benchmark, m.variant): m.reason for m in profile.missing}
    assert "since replaced" in reasons[(split, f"{a}/k0.01/top")]
    write_result(cfg, Variant(a, 0.01, "top"), split, docs(4), mask=file_hash(mask))  # made from this one
    assert load_scores(load_config(result_files), progress=False, bootstrap=0).row(a, split, 0.01, "top") is not None


# ---- end to end on the tiny model ------------------------------------------------------------


def test_score_switch_on_the_tiny_model(tiny_model_dir, tmp_path, capsys):
    """extract --score on real importance: status sees the switch, evaluate reruns the top regions only,
    aggregate writes the overlap and specificity outputs and says which score made the regions."""
    from benchprof.cli import main
    from benchprof.stages.aggregate import aggregate
    from benchprof.stages.data import data
    from benchprof.stages.evaluate import evaluate
    from benchprof.stages.finetune import finetune
    from benchprof.stages.status import plan_status

    abilities = ["Spatial_Reasoning", "Temporal_Reasoning"]
    raw = {
        "settings": {"k_values": [0.05], "output_dir": "outputs", "eval_batch_size": 8, "train_batch_size": 8},
        "models": [{"name": str(tiny_model_dir), "tag": "tiny", "dtype": "float32"}],
        "datasets": [{"name": a} for a in abilities],
        "data": {"dir": "data", "train_size": 16, "test_size": 12, "seed": 1},
        "evals": {"benchmarks": abilities, "limit": 12, "device": "cpu"},
        "extract": {"regions": ["top", "random"]},
        "aggregate": {"bootstrap": 50, "min_correct": 1},
    }
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump(raw))
    data(load_config(config))
    finetune(load_config(config))
    extract(load_config(config))
    evaluate(load_config(config))
    layout = Layout(tmp_path / "outputs", "tiny")
    top_eval = layout.eval_file(Variant(abilities[0], 0.05, "top"), abilities[0])
    random_eval = layout.eval_file(Variant(abilities[0], 0.05, "random"), abilities[0])
    stamps = (top_eval.stat().st_mtime_ns, random_eval.stat().st_mtime_ns)

    raw["extract"]["score"] = "contrast_mean"
    config.write_text(yaml.safe_dump(raw))
    states = {(i.stage, i.what): i.state for i in plan_status(load_config(config))}
    assert states[("masks", f"{abilities[0]} k0.05")] == "stale"
    main(["extract", str(config)])
    states = {(i.stage, i.what): i.state for i in plan_status(load_config(config))}
    assert states[("masks", f"{abilities[0]} k0.05")] == "done"
    assert states[("eval", f"{abilities[0]}/k0.05/top {abilities[0]}")] == "stale"
    assert states[("eval", f"{abilities[0]}/k0.05/random {abilities[0]}")] == "done"
    assert load_scores(load_config(config), progress=False).row(abilities[0], abilities[0], 0.05, "top") is None

    evaluate(load_config(config))
    assert top_eval.stat().st_mtime_ns != stamps[0] and random_eval.stat().st_mtime_ns == stamps[1]
    capsys.readouterr()
    aggregate(load_config(config))
    out = capsys.readouterr().out
    assert "k=0.05 top (score contrast_mean): mean Jaccard" in out
    profile_dir = layout.profile_dir
    for name in ("overlap.csv", "layers.csv", "overlap_k0.05.png", "layers_k0.05.png", "ais.md", "ais.csv"):
        assert (profile_dir / name).is_file(), name
    markdown = (profile_dir / "ais.md").read_text()
    assert "extract.score = `contrast_mean`, finetune.loss_on = `all`" in markdown
    assert "| mean |" in markdown and "Diagonal dominance" in markdown
    rows = (profile_dir / "ais.csv").read_text().splitlines()
    assert sum(f",{SPECIFICITY}," in r for r in rows) == 3 * 3  # 2 abilities + mean, x top, random, top-random


def test_specificity_is_over_every_other_split_or_has_no_value(result_files):
    """One other split without an AIS: no specificity value (it used to average over the rest)."""
    cfg = load_config(result_files)
    layout = Layout(cfg.output_root, "t")
    layout.eval_file(Variant("Quantitative_Reasoning", 0.01, "top"), "Spatial_Reasoning").unlink()
    profile = load_scores(cfg, progress=False)
    assert profile.row("Quantitative_Reasoning", SPECIFICITY, 0.01, "top") is None
    assert any("specificity of Quantitative_Reasoning" in n and "Spatial_Reasoning" in n for n in profile.notes)
    assert profile.row("Temporal_Reasoning", SPECIFICITY, 0.01, "top") is not None  # the others keep theirs


def test_samples_rows_lacking_the_metric_give_no_interval_and_say_so(result_files):
    cfg = load_config(result_files)
    path = Layout(cfg.output_root, "t").samples_file(Variant("Spatial_Reasoning", 0.01, "top"), "Spatial_Reasoning")
    lines = path.read_text().splitlines()
    lines[3] = json.dumps({"task": "Spatial_Reasoning", "doc_id": 3, "filter": "none"})  # no acc
    path.write_text("\n".join(lines) + "\n")
    profile = load_scores(cfg, progress=False)
    row = profile.row("Spatial_Reasoning", "Spatial_Reasoning", 0.01, "top")
    assert row is None  # no per-document values against the original's: refused, never two scales (issue 28)
    assert any("1 of 10 rows lack 'acc,none'" in n for n in profile.notes)


def test_known_answer_rows_are_one_sided_with_holm_over_their_own_small_family(result_files):
    """The known-answer table said "hurts its own split: yes" for a region that helps (two-sided p, no sign):
    its p is now one-sided, the exact binomial tail of the lost items where the region hurts."""
    from scipy import stats

    from benchprof.stats.multitest import holm

    cfg = load_config(result_files)
    helps = "Spatial_Reasoning"
    write_result(cfg, Variant(helps, 0.01, "top"), helps, docs(10))  # 8 -> 10 correct: AIS -0.25
    profile = load_scores(cfg, progress=False)
    one_sided = {
        a: stats.binomtest(8 - TOP_CORRECT[a][a], 8 - TOP_CORRECT[a][a], 0.5, alternative="greater").pvalue
        for a in ABILITIES
        if a != helps
    }
    assert profile.row(helps, helps, 0.01, "top").ais == pytest.approx(-0.25)
    one_sided[helps] = 1 - profile.row(helps, helps, 0.01, "top").p_value / 2
    adjusted = holm([one_sided[a] for a in ABILITIES])
    section = render_markdown(profile).split("Known answer")[1]
    for a, q in zip(ABILITIES, adjusted):
        verdict = "yes" if q < profile.alpha else "no"
        line = f"| {a} | 0.01 | {profile.row(a, a, 0.01, 'top').ais:+.3f} | {one_sided[a]:.3g} | {q:.3g} | {verdict} |"
        assert line in section
    assert f"| {helps} | 0.01 | -0.250 | 0.75 |" in section and one_sided[helps] >= 0.5


def test_known_answer_leaves_out_a_split_at_chance(result_files):
    raw = yaml.safe_load(Path(result_files).read_text())
    raw["aggregate"]["chance"] = {"Spatial_Reasoning": 0.8}  # the original's 8 of 10 is not above it
    Path(result_files).write_text(yaml.safe_dump(raw))
    section = render_markdown(load_scores(load_config(result_files), progress=False)).split("Known answer")[1]
    heading, table = section.split("\n\n")[:2]  # the heading line, then the table up to the next blank line
    assert "left out, at chance: Spatial_Reasoning" in heading
    assert "| Spatial_Reasoning | 0.01 |" not in table and "| Quantitative_Reasoning | 0.01 |" in table


def test_specificity_rows_over_a_split_at_chance_are_marked_and_get_no_star(result_files):
    """A specificity row compares every ability split; with one split at chance (chance 0.8 for Spatial, where the
    original scores 8 of 10) it measures noise too: marked at_chance, outside the Benjamini-Hochberg family."""
    raw = yaml.safe_load(Path(result_files).read_text())
    raw["aggregate"]["chance"] = {"Spatial_Reasoning": 0.8}
    Path(result_files).write_text(yaml.safe_dump(raw))
    profile = load_scores(load_config(result_files), progress=False)
    assert profile.at_chance == ["Spatial_Reasoning"]
    rows = [r for r in profile.rows if r.benchmark == SPECIFICITY]
    assert rows and all(r.at_chance and not r.significant and math.isnan(r.q_value) for r in rows)
    assert not profile.row("Quantitative_Reasoning", "Temporal_Reasoning", 0.01, "top").at_chance
    tested = [r for r in profile.rows if r.family in ("claim", "damage")]
    assert profile.family_size + profile.family_size_damage == len(tested) > 0
    assert not any(r.at_chance for r in tested)


def test_each_tested_row_has_its_declared_family_and_random_regions_are_never_starred(result_files):
    """Random-region rows were in the Benjamini-Hochberg family and could be starred (a random region belongs to
    no ability), and the mean top-random specificity, equal to the mean top specificity, was tested twice. The top
    region's specificity against 0 is a control: shown with its p-value, never starred."""
    profile = load_scores(load_config(result_files), progress=False)
    tested = [r for r in profile.rows if not math.isnan(r.p_value)]
    splits = set(profile.abilities) | {SPECIFICITY}  # a claim row on an ability split: the own family
    want = {}
    for r in tested:
        if r.region == "random" or (r.benchmark == SPECIFICITY and r.region == "top"):
            want[id(r)] = "control"
        elif r.ability == MEAN and r.region == "top-random":
            want[id(r)] = ""
        elif r.metric == "p_correct" or r.region not in ("top", "top-random"):
            want[id(r)] = "secondary"
        else:
            claim = "own" if r.benchmark in splits else "claim"
            want[id(r)] = claim if r.region == "top-random" else "damage"
    assert [r.family for r in tested] == [want[id(r)] for r in tested]
    mean_top = profile.row(MEAN, SPECIFICITY, 0.01, "top")
    mean_adjusted = profile.row(MEAN, SPECIFICITY, 0.01, "top-random")
    assert mean_top is not None and mean_adjusted is not None and mean_top.family == "control"
    assert mean_adjusted.ais == pytest.approx(mean_top.ais) and math.isnan(mean_adjusted.q_value)
    assert {"own", "damage", "control"} <= {r.family for r in tested}
    for r in tested:
        if r.family in ("control", ""):
            assert r.significant is False and math.isnan(r.q_value)
        else:
            assert not math.isnan(r.q_value)
    assert profile.family_size == sum(r.family == "claim" for r in tested)
    assert profile.family_size_own == sum(r.family == "own" for r in tested)
    assert profile.family_size_damage == sum(r.family == "damage" for r in tested)
