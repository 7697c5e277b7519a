"""stages/weight_scores.py: every ability-specific score against its brute-force formula, and extract ranking by
them."""

import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from benchprof import BenchprofError
from benchprof.core.layout import Layout
from benchprof.core.loader import load_config
from benchprof.core.regions import read_region, region_metadata
from benchprof.core.storage import read_manifest, save_tensors
from benchprof.stages.extract import extract
from benchprof.stages.weight_scores import RATIO_EPSILON, open_specific_scores

ABILITIES = ["Quantitative_Reasoning", "Temporal_Reasoning", "Spatial_Reasoning"]
MLP = ("mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight")
TOTAL_PARAMS = 20_000


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


def test_held_scores_are_computed_once_and_select_what_streamed_scores_select(project, tmp_path, monkeypatch):
    """scores.held: the rank score held in memory yields the streamed values on every pass without reading the
    files again (they are gone before the second pass); extract computes each ability's score once when held
    (on every pass otherwise) and writes the same masks, exact and chunked over two k values."""
    import shutil

    from benchprof.stages import extract as extract_module
    from benchprof.stages.weight_scores import HeldScores, SpecificScores, held

    _, tensors, layout = project
    a = ABILITIES[0]
    others = {b: layout.importance_file(b) for b in ABILITIES if b != a}
    expected = streamed("rank", layout, a)
    kept = held(open_specific_scores("rank", layout.importance_file(a), others), 1 << 20)
    assert isinstance(kept, HeldScores)
    assert torch.equal(torch.cat([v for _, v in kept]).double(), expected)
    saved = layout.model_dir.parent / "saved"
    shutil.move(layout.model_dir, saved)
    assert torch.equal(torch.cat([v for _, v in kept]).double(), expected)  # no file read on this pass
    shutil.move(saved, layout.model_dir)
    assert held(kept, 4 * kept.total - 1) is kept  # past the budget: streamed as before

    passes = 0
    compute = SpecificScores.__iter__

    def counted(self):
        nonlocal passes
        passes += 1
        yield from compute(self)

    monkeypatch.setattr(SpecificScores, "__iter__", counted)
    config = write_project(tmp_path / "two-k", tensors, k_values=(0.01, 0.02))
    layout = Layout(tmp_path / "two-k" / "outputs", "tiny")
    for selection, streamed_passes in (("exact", 3), ("chunked", 2)):
        masks = {}
        for budget in (0, 1 << 20):
            monkeypatch.setattr(extract_module, "HELD_SCORES_BYTES", budget)
            passes = 0
            extract(load_config(config), score="rank", selection=selection, force=True)
            assert passes == len(ABILITIES) * (streamed_passes if budget == 0 else 1), (selection, budget)
            masks[budget] = {
                (b, k, r): read_region(layout.mask_file(b, k, r))[0]
                for b in ABILITIES
                for k in (0.01, 0.02)
                for r in ("top", "bottom")
                if layout.mask_file(b, k, r).is_file()
            }
        assert len(masks[0]) == len(ABILITIES) * 2 * 2 and masks[0].keys() == masks[1 << 20].keys()
        for key, region in masks[0].items():
            other = masks[1 << 20][key]
            assert region.keys() == other.keys() and all(torch.equal(region[n], other[n]) for n in region), key
