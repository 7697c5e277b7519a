"""benchprof.stages.overlap: the overlap of regions against set arithmetic, and its chance levels."""

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from benchprof import BenchprofError
from benchprof.core.storage import save_tensors
from benchprof.stages.overlap import expected_jaccard, expected_shared, region_overlap

ABILITIES = ["Quantitative_Reasoning", "Temporal_Reasoning", "Spatial_Reasoning"]


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


def test_the_overlap_command_refuses_a_missing_or_unreadable_mask_and_keeps_its_files(tmp_path):
    """`benchprof overlap` over two abilities' masks writes overlap.csv; with one configured mask missing, or one
    truncated, it fails in one line naming the file, and overlap.csv keeps every pair it had (it was rewritten over
    the masks left, silently)."""
    import yaml
    from test_extract import ABILITY, setup, synthetic_importance

    from benchprof.core.layout import Layout
    from benchprof.core.loader import load_config
    from benchprof.stages.extract import extract
    from benchprof.stages.overlap import overlap

    config = setup(tmp_path, synthetic_importance(), k_values=(0.01,))
    raw = yaml.safe_load(config.read_text())
    raw["datasets"].append({"name": "Temporal_Reasoning", "path": str(tmp_path / "data")})
    config.write_text(yaml.safe_dump(raw))
    layout = Layout(tmp_path / "outputs", "tiny")
    importance = layout.importance_file(ABILITY)
    other = layout.importance_file("Temporal_Reasoning")
    other.parent.mkdir(parents=True)
    other.write_bytes(importance.read_bytes())
    extract(load_config(config))
    overlap(load_config(config), plots=False)
    before = layout.overlap_csv.read_bytes()
    mask = layout.mask_file("Temporal_Reasoning", 0.01, "top")
    kept = mask.read_bytes()
    mask.unlink()
    with pytest.raises(BenchprofError) as err:
        overlap(load_config(config), plots=False)
    assert str(err.value) == f"overlap: {mask}: missing (run `benchprof extract {config}` first)"
    mask.write_bytes(kept[:2000])
    with pytest.raises(BenchprofError, match=rf"^overlap: {mask}: not a readable safetensors"):
        overlap(load_config(config), plots=False)
    assert layout.overlap_csv.read_bytes() == before
