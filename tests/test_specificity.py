"""benchprof.specificity: scores against brute force, overlap against set arithmetic, specificity and
diagonal dominance against hand computations, and a score switch on the tiny model end to end."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from benchprof import BenchprofError
from benchprof.aggregate import bootstrap_ais, cell_rng, load_scores, percentile_ci, render_markdown
from benchprof.config import load_config
from benchprof.extract import extract
from benchprof.layout import Layout, Variant
from benchprof.regions import read_region, region_metadata
from benchprof.specificity import (
    MEAN,
    RATIO_EPSILON,
    SPECIFICITY,
    diagonal_dominance,
    expected_jaccard,
    expected_shared,
    open_specific_scores,
    region_overlap,
)
from benchprof.storage import file_hash, read_manifest, save_tensors

ABILITIES = ["Quantitative_Reasoning", "Temporal_Reasoning", "Spatial_Reasoning"]
MLP = ("mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight")
TOTAL_PARAMS = 20_000


# ---- scores ----------------------------------------------------------------------------------


def importance_tensors(seed: int, ties: bool = False) -> dict[str, torch.Tensor]:
    """2 layers x 3 MLP tensors of 8x20 (960 candidates) plus a tensor that is never eligible."""
    g = torch.Generator().manual_seed(seed)
    tensors = {}
    for layer in range(2):
        for suffix in MLP:
            shape = (20, 8) if "down" in suffix else (8, 20)
            if ties:
                values = torch.randint(0, 5, shape, generator=g).float() / 4
            else:
                values = torch.rand(shape, generator=g) ** 3
            tensors[f"model.layers.{layer}.{suffix}"] = values
    tensors["model.embed_tokens.weight"] = torch.rand(10, 8, generator=g) + 10
    tensors["model.layers.0.mlp.up_proj.weight"][0, :4] = 0.0  # zero importance for every ability
    return tensors


def write_project(tmp_path: Path, tensors: dict, k_values=(0.01,), score="importance") -> Path:
    """A config over ABILITIES and their importance files (no model needed by extract)."""
    raw = {
        "settings": {"k_values": list(k_values), "output_dir": "outputs"},
        "models": [{"name": "tiny-model", "tag": "tiny"}],
        "datasets": [{"name": a} for a in ABILITIES],
        "evals": {"benchmarks": list(ABILITIES)},
        "extract": {"score": score},
    }
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump(raw))
    for ability, values in tensors.items():
        save_tensors(
            Layout(tmp_path / "outputs", "tiny").importance_file(ability),
            values,
            {
                "fingerprint": "abc123",
                "total_params": str(TOTAL_PARAMS),
                "n_layers": "2",
                "scope": "mlp",
                "model": "tiny-model",
                "loss_on": "all",
            },
        )
    return config


def flat(tensors: dict) -> torch.Tensor:
    """The candidates in the ranking's order: names sorted, each tensor row-major."""
    return torch.cat([tensors[n].flatten() for n in sorted(n for n in tensors if n.endswith(MLP))]).double()


def streamed(score: str, layout: Layout, ability: str) -> torch.Tensor:
    others = {b: layout.importance_file(b) for b in ABILITIES if b != ability}
    scores = open_specific_scores(score, layout.importance_file(ability), others)
    return torch.cat([values for _, values in scores]).double()


def mid_rank_percentile(values: torch.Tensor) -> torch.Tensor:
    """Brute force: bfloat16-truncated values (top 16 bits), #below + #equal / 2, over N; O(N^2)."""
    truncated = (values.float().view(torch.int32) & ~0xFFFF).view(torch.float32).double()
    below = (truncated[None, :] < truncated[:, None]).sum(1).double()
    equal = (truncated[None, :] == truncated[:, None]).sum(1).double()
    return (below + equal / 2) / values.numel()


@pytest.fixture
def project(tmp_path):
    tensors = {a: importance_tensors(i, ties=(a == "Spatial_Reasoning")) for i, a in enumerate(ABILITIES)}
    config = write_project(tmp_path, tensors)
    return config, tensors, Layout(tmp_path / "outputs", "tiny")


def test_each_score_equals_its_brute_force_formula(project):
    _, tensors, layout = project
    values = {a: flat(t) for a, t in tensors.items()}
    a, others = ABILITIES[0], ABILITIES[1:]
    own, rest = values[a], torch.stack([values[b] for b in others])

    assert torch.equal(streamed("importance", layout, a), own.float().double())
    torch.testing.assert_close(streamed("contrast_mean", layout, a), (own - rest.mean(0)).float().double())

    epsilon = RATIO_EPSILON * rest.mean(0).mean()
    torch.testing.assert_close(streamed("ratio", layout, a), (own / (rest.mean(0) + epsilon)).float().double())

    percentiles = {b: mid_rank_percentile(values[b]) for b in ABILITIES}
    expected_rank = percentiles[a] - torch.stack([percentiles[b] for b in others]).mean(0)
    torch.testing.assert_close(streamed("rank", layout, a), expected_rank.float().double())
    assert percentiles["Spatial_Reasoning"].unique().numel() == 5  # ties: five distinct values

    q = torch.stack([values[b] / values[b].mean() for b in ABILITIES])  # M x N, ability a first
    expected_entropy = torch.empty(own.numel(), dtype=torch.float64)
    for i in range(own.numel()):  # one weight at a time, as written in the docs
        mass = float(q[:, i].sum())
        p = [float(x) / mass for x in q[:, i]] if mass > 0 else [1 / 3] * 3
        entropy = -sum(x * math.log(x) for x in p if x > 0)
        expected_entropy[i] = float(q[0, i]) * (1 - entropy / math.log(3))
    torch.testing.assert_close(streamed("entropy", layout, a), expected_entropy.float().double())
    zero = 2 * 160  # model.layers.0.mlp.up_proj.weight[0, :4] follows down_proj and gate_proj in name order
    assert streamed("entropy", layout, a)[zero : zero + 4].tolist() == [0.0] * 4  # zero for every ability: S = 0
    assert (own[zero : zero + 4] == 0).all() and (rest[:, zero : zero + 4] == 0).all()


def test_extract_contrast_mean_top_and_bottom_are_topk_of_the_difference(project):
    config, tensors, layout = project
    extract(load_config(config), score="contrast_mean")
    names = sorted(n for n in tensors[ABILITIES[0]] if n.endswith(MLP))
    offsets = np.cumsum([0] + [tensors[ABILITIES[0]][n].numel() for n in names])
    n = math.floor(0.01 * TOTAL_PARAMS)
    for i, a in enumerate(ABILITIES):
        specific = flat(tensors[a]) - torch.stack([flat(tensors[b]) for b in ABILITIES if b != a]).mean(0)
        specific = specific.float()
        for region, largest in (("top", True), ("bottom", False)):
            path = layout.mask_file(a, 0.01, region)
            got = {int(offsets[names.index(name)]) + int(j) for name, idx in read_region(path)[0].items() for j in idx}
            assert got == set(torch.topk(specific, n, largest=largest).indices.tolist()), (a, region)
            assert region_metadata(path)["score"] == "contrast_mean"
        assert "score" not in region_metadata(layout.mask_file(a, 0.01, "random"))


def test_switching_the_score_changes_the_manifest_and_recomputes(project, capsys):
    config, tensors, layout = project
    a = ABILITIES[0]
    extract(load_config(config))
    before = {r: layout.mask_file(a, 0.01, r).read_bytes() for r in ("top", "bottom", "random")}
    manifest = read_manifest(layout.masks_dir(a, 0.01))
    assert manifest["inputs"]["score"] == "importance" and "score_inputs" not in manifest["inputs"]
    assert "score" not in region_metadata(layout.mask_file(a, 0.01, "top"))  # default masks keep their bytes

    extract(load_config(config), score="rank")
    assert "wrote 3 (ability, k) region set(s), 0 up to date" in capsys.readouterr().out
    inputs = read_manifest(layout.masks_dir(a, 0.01))["inputs"]
    assert inputs["score"] == "rank" and inputs["score_inputs"]["formula"].startswith("S_a = P_a")
    assert set(inputs["score_inputs"]["other_importance"]) == set(ABILITIES[1:])
    assert layout.mask_file(a, 0.01, "top").read_bytes() != before["top"]
    assert layout.mask_file(a, 0.01, "random").read_bytes() == before["random"]  # random: same file, same evals

    extract(load_config(config), score="rank")
    assert "wrote 0 (ability, k) region set(s), 3 up to date" in capsys.readouterr().out

    # a new importance file of another ability makes the specific masks stale (not the default ones)
    save_tensors(
        layout.importance_file(ABILITIES[2]),
        importance_tensors(7),
        {
            "fingerprint": "abc123",
            "total_params": str(TOTAL_PARAMS),
            "n_layers": "2",
            "scope": "mlp",
            "model": "tiny-model",
            "loss_on": "all",
        },
    )
    extract(load_config(config), score="rank", ability=a)
    assert "wrote 1 (ability, k) region set(s), 0 up to date" in capsys.readouterr().out

    extract(load_config(config))  # back to the default: recomputed, and byte-identical to the first run's
    assert {r: layout.mask_file(a, 0.01, r).read_bytes() for r in ("top", "bottom", "random")} == before


def test_specific_score_needs_every_ability_importance(tmp_path):
    config = write_project(tmp_path, {ABILITIES[0]: importance_tensors(0), ABILITIES[1]: importance_tensors(1)})
    with pytest.raises(BenchprofError, match="none for Spatial_Reasoning"):
        extract(load_config(config), score="contrast_mean")
    with pytest.raises(BenchprofError, match="--score: 'bogus' is not one of importance, contrast_mean"):
        extract(load_config(config), score="bogus")
    raw = yaml.safe_load(config.read_text())
    raw["extract"]["score"] = "bogus"
    config.write_text(yaml.safe_dump(raw))
    with pytest.raises(BenchprofError, match="extract.score: 'bogus' is not one of"):
        load_config(config)
    raw["extract"]["score"], raw["datasets"] = "rank", raw["datasets"][:1]
    config.write_text(yaml.safe_dump(raw))
    with pytest.raises(BenchprofError, match="extract.score: 'rank' compares abilities; it needs at least two"):
        load_config(config)


# ---- overlap ---------------------------------------------------------------------------------


def write_masks(folder: Path, regions: dict[str, set[tuple[str, int]]], eligible: int = 1000) -> dict[str, Path]:
    files = {}
    for ability, region in regions.items():
        by_tensor: dict[str, list[int]] = {}
        for name, index in region:
            by_tensor.setdefault(name, []).append(index)
        path = folder / f"{ability}.safetensors"
        save_tensors(
            path,
            {name: torch.tensor(sorted(idx), dtype=torch.int64) for name, idx in by_tensor.items()},
            {"fingerprint": "f", "eligible": str(eligible), "n": str(len(region)), "region": "top"},
        )
        files[ability] = path
    return files


def test_overlap_against_set_arithmetic(tmp_path):
    rng = np.random.default_rng(0)
    names = ["model.layers.0.mlp.up_proj.weight", "model.layers.1.mlp.up_proj.weight"]
    universe = [(name, i) for name in names for i in range(500)]
    regions = {
        a: {universe[i] for i in rng.choice(1000, size, replace=False)} for a, size in zip(ABILITIES, (120, 120, 80))
    }
    regions["Commonsense_Causal"] = set(regions[ABILITIES[0]])  # identical to the first
    regions["Inductive_Reasoning"] = set(universe) - regions[ABILITIES[0]] - regions[ABILITIES[1]]  # disjoint
    result = region_overlap(write_masks(tmp_path, regions), 0.01)
    for a in regions:
        for b in regions:
            shared = len(regions[a] & regions[b])
            row = result.row(a, b)
            assert row["shared"] == shared
            assert row["jaccard"] == pytest.approx(shared / len(regions[a] | regions[b]))
            assert row["shared_fraction"] == pytest.approx(shared / len(regions[a]))
    assert result.row(ABILITIES[0], "Commonsense_Causal")["jaccard"] == 1.0
    assert result.row(ABILITIES[0], "Inductive_Reasoning")["jaccard"] == 0.0
    assert result.row(ABILITIES[0], ABILITIES[0])["jaccard"] == 1.0
    assert result.per_tensor[ABILITIES[2]] == {n: sum(1 for m, _ in regions[ABILITIES[2]] if m == n) for n in names}


def test_chance_levels_are_the_hypergeometric_mean():
    eligible, n_a, n_b = 40, 12, 7
    # E|A∩B| = Σ_x x P(x), P(x) = C(n_a, x) C(E - n_a, n_b - x) / C(E, n_b): B drawn against a fixed A
    mean = sum(x * math.comb(n_a, x) * math.comb(eligible - n_a, n_b - x) for x in range(n_b + 1)) / math.comb(
        eligible, n_b
    )
    assert expected_shared(n_a, n_b, eligible) == pytest.approx(mean)
    # Jaccard of random regions concentrates near the ratio of expectations at realistic sizes
    rng = np.random.default_rng(1)
    eligible, n = 20_000, 2_000
    draws = [
        len(set(rng.choice(eligible, n, replace=False)) & set(rng.choice(eligible, n, replace=False)))
        for _ in range(40)
    ]
    simulated = np.mean([x / (2 * n - x) for x in draws])
    assert expected_jaccard(n, n, eligible) == pytest.approx(simulated, rel=0.03)


def test_overlap_refuses_masks_of_different_models(tmp_path):
    files = write_masks(tmp_path, {"a": {("x.weight", 1)}, "b": {("x.weight", 2)}})
    save_tensors(files["b"], {"x.weight": torch.tensor([2])}, {"fingerprint": "other", "eligible": "1000", "n": "1"})
    with pytest.raises(BenchprofError, match="different models or candidate sets"):
        region_overlap(files, 0.01)


# ---- specificity of the damage ---------------------------------------------------------------

SPLITS = ABILITIES  # each ability's benchmark is its own test split


def result_config(tmp_path: Path, bootstrap: int = 200) -> Path:
    raw = {
        "settings": {"k_values": [0.01], "output_dir": "out"},
        "models": [{"name": "x", "tag": "t"}],
        "datasets": [{"name": a} for a in ABILITIES],
        "evals": {"benchmarks": SPLITS + ["arc_easy"]},
        "extract": {"regions": ["top", "random"]},
        "aggregate": {"bootstrap": bootstrap, "seed": 3},
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
    profile = load_scores(result_files, progress=False)
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
    assert diagonal_dominance(profile, 0.01) == {
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
            cell_rng(3, a, 0.01, b),
        )[0]
        for b in SPLITS
    }
    expected = percentile_ci(draws[a] - (draws["Quantitative_Reasoning"] + draws["Spatial_Reasoning"]) / 2)
    row = profile.row(a, SPECIFICITY, 0.01, "top")
    assert (row.ci_low, row.ci_high) == pytest.approx(expected)
    assert row.ci_low < row.ais < row.ci_high

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
    profile = load_scores(path, progress=False)
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
    profile = load_scores(result_files, progress=False, bootstrap=0)
    assert profile.row(a, split, 0.01, "top") is None
    reasons = {(m.benchmark, m.variant): m.reason for m in profile.missing}
    assert "since replaced" in reasons[(split, f"{a}/k0.01/top")]
    write_result(cfg, Variant(a, 0.01, "top"), split, docs(4), mask=file_hash(mask))  # made from this one
    assert load_scores(result_files, progress=False, bootstrap=0).row(a, split, 0.01, "top") is not None


# ---- end to end on the tiny model ------------------------------------------------------------


def test_score_switch_on_the_tiny_model(tiny_model_dir, tmp_path, capsys):
    """extract --score on real importance: status sees the switch, evaluate reruns the top regions only,
    aggregate writes the overlap and specificity outputs and says which score made the regions."""
    from benchprof.aggregate import aggregate
    from benchprof.cli import main
    from benchprof.data import data
    from benchprof.evaluate import evaluate
    from benchprof.finetune import finetune
    from benchprof.status import plan_status

    abilities = ["Spatial_Reasoning", "Temporal_Reasoning"]
    raw = {
        "settings": {"k_values": [0.05], "output_dir": "outputs", "eval_batch_size": 8, "train_batch_size": 8},
        "models": [{"name": str(tiny_model_dir), "tag": "tiny", "dtype": "float32"}],
        "datasets": [{"name": a} for a in abilities],
        "data": {"dir": "data", "train_size": 16, "test_size": 12, "seed": 1},
        "evals": {"benchmarks": abilities, "limit": 12, "device": "cpu"},
        "extract": {"regions": ["top", "random"]},
        "aggregate": {"bootstrap": 50},
    }
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump(raw))
    data(load_config(config))
    finetune(str(config))
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
    aggregate(str(config))
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
