"""benchprof.stages.extract: regions against brute-force references, ties, random seeds, layer ranges, CLI."""

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from benchprof import BenchprofError
from benchprof.core.layout import Layout
from benchprof.core.loader import load_config
from benchprof.core.regions import read_region, region_metadata
from benchprof.core.storage import save_tensors
from benchprof.stages.extract import extract
from benchprof.stages.weight_scores import open_scores, order_keys
from benchprof.stages.weight_selection import chunk_length, chunked_count, exact_regions

ROOT = Path(__file__).resolve().parents[1]
ABILITY = "Spatial_Reasoning"
TOTAL_PARAMS = 20_000
MLP = ("mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight")


def synthetic_importance(kind: str = "random", seed: int = 0) -> dict[str, torch.Tensor]:
    """4 layers x 3 MLP tensors of 16x40 (7,680 candidates) plus tensors that are never eligible."""
    g = torch.Generator().manual_seed(seed)
    tensors = {}
    for layer in range(4):
        for suffix in MLP:
            shape = (40, 16) if "down" in suffix else (16, 40)
            if kind == "random":
                values = torch.rand(shape, generator=g)
            elif kind == "constant":
                values = torch.full(shape, 0.25)
            else:  # few distinct values: ties everywhere
                values = torch.randint(0, 4, shape, generator=g).float() / 8
            tensors[f"model.layers.{layer}.{suffix}"] = values
        tensors[f"model.layers.{layer}.self_attn.q_proj.weight"] = torch.rand(16, 16, generator=g) + 10
    tensors["model.embed_tokens.weight"] = torch.rand(50, 16, generator=g) + 10
    return tensors


def setup(tmp_path: Path, tensors: dict, k_values=(0.001, 0.01), **sections) -> Path:
    settings = {"k_values": list(k_values), "output_dir": "outputs", **sections.pop("settings", {})}
    raw = {
        "settings": settings,
        "models": [{"name": "tiny-model", "tag": "tiny"}],
        "datasets": [{"name": ABILITY, "path": str(tmp_path / "data")}],
        "evals": {"benchmarks": [ABILITY]},
        **sections,
    }
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump(raw))
    path = Layout(tmp_path / "outputs", "tiny").importance_file(ABILITY)
    save_tensors(
        path, tensors, {"fingerprint": "abc123", "total_params": str(TOTAL_PARAMS), "n_layers": "4", "scope": "mlp"}
    )
    return config


def candidates(tensors: dict, layers=range(4)) -> list[str]:
    return sorted(n for n in tensors if n.endswith(MLP) and int(n.split(".")[2]) in layers)


def as_positions(region: dict, tensors: dict, layers=range(4)) -> set[int]:
    """{name: indices} -> global positions in the concatenation of candidates in sorted-name order."""
    names, offset, out = candidates(tensors, layers), 0, set()
    for name in names:
        out.update(offset + int(i) for i in region.get(name, []))
        offset += tensors[name].numel()
    assert set(region) <= set(names)
    return out


def flat(tensors: dict, layers=range(4)) -> torch.Tensor:
    return torch.cat([tensors[n].flatten() for n in candidates(tensors, layers)])


def masks(tmp_path: Path, k: float) -> dict:
    layout = Layout(tmp_path / "outputs", "tiny")
    return {r: read_region(layout.mask_file(ABILITY, k, r))[0] for r in ("top", "bottom", "random")}


def test_exact_regions_equal_brute_force_topk(tmp_path):
    tensors = synthetic_importance()
    extract(load_config(setup(tmp_path, tensors, k_values=[0.001, 0.01, 0.1])))
    scores = flat(tensors)
    for k in (0.001, 0.01, 0.1):
        n = math.floor(k * TOTAL_PARAMS)
        region = masks(tmp_path, k)
        top, bottom = as_positions(region["top"], tensors), as_positions(region["bottom"], tensors)
        assert top == set(torch.topk(scores, n).indices.tolist())
        assert bottom == set(torch.topk(scores, n, largest=False).indices.tolist())
        assert len(top) == len(bottom) == len(as_positions(region["random"], tensors)) == n
        assert not top & bottom
        for indices in region["top"].values():  # sorted int64, non-empty (empty tensors are omitted)
            assert indices.dtype == torch.int64 and indices.numel() and torch.equal(indices, indices.sort().values)


def test_files_carry_the_contract_metadata_and_stats(tmp_path):
    tensors = synthetic_importance()
    extract(load_config(setup(tmp_path, tensors)), k=0.01)
    layout = Layout(tmp_path / "outputs", "tiny")
    top = region_metadata(layout.mask_file(ABILITY, 0.01, "top"))
    assert {k: top[k] for k in ("fingerprint", "total_params", "n", "region", "ability", "selection", "selected")} == {
        "fingerprint": "abc123",
        "total_params": "20000",
        "n": "200",
        "region": "top",
        "ability": ABILITY,
        "selection": "exact",
        "selected": "200",
    }
    assert float(top["k"]) == 0.01 and top["eligible"] == "7680"
    assert "seed" in region_metadata(layout.mask_file(ABILITY, 0.01, "random"))
    rows = list(csv.DictReader(layout.mask_stats(ABILITY, 0.01).open()))
    assert len(rows) == 12 * 3 and {r["region"] for r in rows} == {"top", "bottom", "random"}
    for region in ("top", "bottom", "random"):
        assert sum(int(r["selected"]) for r in rows if r["region"] == region) == 200
    assert {r["layer"] for r in rows} == {"0", "1", "2", "3"}
    manifest = json.loads((layout.masks_dir(ABILITY, 0.01) / "manifest.json").read_text())
    assert manifest["inputs"]["n"] == 200 and manifest["selected"] == {"top": 200, "bottom": 200, "random": 200}
    assert not layout.masks_dir(ABILITY, 0.001).exists()  # --k narrowed the run


@pytest.mark.parametrize("kind", ["constant", "ties"])
def test_ties_give_exactly_n_in_the_documented_order(tmp_path, kind):
    """Order: score desc, then position asc. Top = first n of it, bottom = last n."""
    tensors = synthetic_importance(kind)
    extract(load_config(setup(tmp_path, tensors, k_values=[0.001, 0.01, 0.1])))
    scores = flat(tensors)
    order = torch.sort(-scores, stable=True).indices.tolist()  # stable: equal scores keep position order
    for k in (0.001, 0.01, 0.1):
        n = math.floor(k * TOTAL_PARAMS)
        region = masks(tmp_path, k)
        assert as_positions(region["top"], tensors) == set(order[:n])
        assert as_positions(region["bottom"], tensors) == set(order[-n:])
    if kind == "constant":  # the first and last n positions
        assert as_positions(masks(tmp_path, 0.01)["top"], tensors) == set(range(200))


def test_order_keys_sort_like_floats_including_negative_and_signed_zero():
    values = torch.tensor([3.5, -0.0, 0.0, -1e-30, 1e-30, -2.0, float("inf"), -float("inf"), 7e-45, -7e-45])
    keys = order_keys(values)
    for i in range(len(values)):
        for j in range(len(values)):
            assert (values[i] < values[j]) == bool(keys[i] < keys[j])
            assert (values[i] == values[j]) == bool(keys[i] == keys[j])


def test_exact_regions_on_signed_scores_match_stable_sort(tmp_path):
    g = torch.Generator().manual_seed(3)
    tensors = {
        f"model.layers.{l}.{s}": torch.randint(-3, 3, (16, 40), generator=g).float() * 1e3
        for l in range(4)
        for s in MLP
    }
    path = tmp_path / "scores.safetensors"
    save_tensors(path, tensors, {"total_params": "9999", "n_layers": "4", "scope": "mlp"})
    scores = open_scores(path)
    order = torch.sort(-flat(tensors), stable=True).indices.tolist()
    for n in (1, 77, 1280, 7679, 7680):
        got = exact_regions(scores, {"top": (n, True), "bottom": (n, False)})
        assert as_positions(got["top"], tensors) == set(order[:n])
        assert as_positions(got["bottom"], tensors) == set(order[-n:])


def test_random_is_seeded_per_ability_and_k(tmp_path):
    tensors = synthetic_importance()
    config = setup(tmp_path / "a", tensors, k_values=[0.001, 0.01])
    extract(load_config(config))
    first = as_positions(masks(tmp_path / "a", 0.01)["random"], tensors)
    layout_a = Layout(tmp_path / "a" / "outputs", "tiny")
    seeds = {k: region_metadata(layout_a.mask_file(ABILITY, k, "random"))["seed"] for k in (0.001, 0.01)}
    assert seeds[0.001] != seeds[0.01]  # derived from (random_seed, ability, k)
    # the same seed, k alone (other iteration order): the same draw
    config_b = setup(tmp_path / "b", tensors, k_values=[0.001, 0.01])
    extract(load_config(config_b), k=0.01)
    assert as_positions(masks(tmp_path / "b", 0.01)["random"], tensors) == first
    # another seed: another draw, still n distinct positions
    config_c = setup(tmp_path / "c", tensors, k_values=[0.001, 0.01], extract={"random_seed": 7})
    extract(load_config(config_c), k=0.01)
    other = as_positions(masks(tmp_path / "c", 0.01)["random"], tensors)
    assert len(other) == 200 and other != first
    assert (
        region_metadata(Layout(tmp_path / "c" / "outputs", "tiny").mask_file(ABILITY, 0.01, "random"))["random_seed"]
        == "7"
    )


def test_front_and_back_removal_are_respected(tmp_path):
    tensors = synthetic_importance()
    extract(load_config(setup(tmp_path, tensors, k_values=[0.01], settings={"front_removal": 1, "back_removal": 1})))
    region = masks(tmp_path, 0.01)
    for name in region["top"] | region["bottom"] | region["random"]:
        assert name.split(".")[2] in ("1", "2")
    scores = flat(tensors, layers=(1, 2))
    assert as_positions(region["top"], tensors, (1, 2)) == set(torch.topk(scores, 200).indices.tolist())
    assert len(as_positions(region["random"], tensors, (1, 2))) == 200


def test_n_above_the_candidate_count_fails_naming_k(tmp_path):
    config = setup(tmp_path, synthetic_importance(), k_values=[0.01, 0.5])  # 0.5 * 20000 > 7680
    with pytest.raises(BenchprofError, match=r"k=0\.5: n = .*10000 exceeds the 7680"):
        extract(load_config(config))


def test_chunked_mode_matches_the_authors_per_chunk_rule_and_differs_from_exact(tmp_path):
    tensors = synthetic_importance()
    tensors["model.layers.2.mlp.up_proj.weight"] += 1.0  # one tensor holds every large score
    config = setup(tmp_path, tensors, k_values=[0.01], extract={"selection": "chunked", "chunk_size": 100})
    extract(load_config(config))
    region = masks(tmp_path, 0.01)
    scores, n = flat(tensors), 200
    length = chunk_length(scores.numel(), n, 100)
    assert length == int(math.sqrt(7680 / (n / 7680 + 1e-9)))  # 543: chunks straddle tensors
    expected_top, expected_bottom = set(), set()
    for start in range(0, scores.numel(), length):
        chunk = scores[start : start + length]
        count = math.ceil(n * chunk.numel() / scores.numel())
        expected_top.update((torch.topk(chunk, count).indices + start).tolist())
        expected_bottom.update((torch.topk(chunk, count, largest=False).indices + start).tolist())
    top = as_positions(region["top"], tensors)
    assert top == expected_top and as_positions(region["bottom"], tensors) == expected_bottom
    assert len(top) == sum(math.ceil(n * min(length, 7680 - s) / 7680) for s in range(0, 7680, length)) >= n
    exact = set(torch.topk(scores, n).indices.tolist())
    assert top != exact and len(region["top"]) > 1 and len(exact & top) < n
    meta = region_metadata(Layout(tmp_path / "outputs", "tiny").mask_file(ABILITY, 0.01, "top"))
    assert meta["selection"] == "chunked" and meta["chunk_size"] == str(length)
    # the controls are as large as top (they used to hold n while top held more)
    random = as_positions(region["random"], tensors)
    assert len(random) == len(as_positions(region["bottom"], tensors)) == len(top) == chunked_count(7680, n, 100)


def test_bad_or_missing_importance_is_a_one_line_error(tmp_path):
    config = setup(tmp_path, synthetic_importance())
    path = Layout(tmp_path / "outputs", "tiny").importance_file(ABILITY)
    path.write_bytes(b"\x00garbage")
    with pytest.raises(BenchprofError, match="importance.safetensors: not a readable safetensors file"):
        extract(load_config(config))
    tensors = synthetic_importance()
    tensors["model.layers.3.mlp.up_proj.weight"][2, 5] = float("nan")
    setup(tmp_path, tensors)
    with pytest.raises(BenchprofError, match="tensor 'model.layers.3.mlp.up_proj.weight' holds NaN scores"):
        extract(load_config(config))
    path.unlink()
    with pytest.raises(BenchprofError, match="importance.safetensors: file not found"):
        extract(load_config(config))


def test_cli_extract_single_stage_on_existing_importance(tmp_path):
    tensors = synthetic_importance()
    config = setup(tmp_path, tensors)
    cmd = [sys.executable, "-m", "benchprof", "extract", "--k", "0.01", str(config)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "wrote 1 (ability, k) region set(s)" in done.stdout
    layout = Layout(tmp_path / "outputs", "tiny")
    assert all(layout.mask_file(ABILITY, 0.01, r).is_file() for r in ("top", "bottom", "random"))
    assert (layout.masks_dir(ABILITY, 0.01) / "manifest.json").is_file()
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "1 up to date" in again.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "benchprof", "extract", "--k", "1.5", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        bad.returncode == 2
        and bad.stderr.strip() == "benchprof: error: --k: 1.5 must lie in (0, 1), a fraction of all parameters"
    )


def test_extract_at_a_k_the_config_does_not_list_works_there_and_stays_current(tmp_path):
    """`benchprof extract --k 0.02` with settings.k_values [0.001, 0.01]: the regions at 0.02 are written, the line
    says how to aggregate them, and once the config lists 0.02 they are current (nothing redone, same bytes)."""
    tensors = synthetic_importance()
    config = setup(tmp_path, tensors)
    cmd = [sys.executable, "-m", "benchprof", "extract", str(config), "--k", "0.02"]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert "wrote 1 (ability, k) region set(s), 0 up to date, under outputs/tiny/<ability>/masks" in lines[-2]
    assert lines[-1] == "extract: k 0.02 is not in settings.k_values of config.yml: add it there to aggregate it"
    top = masks(tmp_path, 0.02)["top"]
    reference = flat(tensors).topk(math.floor(0.02 * TOTAL_PARAMS)).indices  # no ties among torch.rand values
    assert as_positions(top, tensors) == {int(i) for i in reference}
    layout = Layout(tmp_path / "outputs", "tiny")
    before = layout.mask_file(ABILITY, 0.02, "top").read_bytes()
    raw = yaml.safe_load(config.read_text())
    raw["settings"]["k_values"].append(0.02)
    config.write_text(yaml.safe_dump(raw))
    extract(load_config(config))  # the config now lists it: nothing to redo
    assert layout.mask_file(ABILITY, 0.02, "top").read_bytes() == before
    again = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "wrote 0 (ability, k) region set(s), 1 up to date" in again.stdout and "not in settings" not in again.stdout


def test_random_draws_are_independent_regions_and_draw_one_keeps_its_bytes(tmp_path):
    """extract.random_draws = 3: random, random2, random3, each n distinct positions from its own seed
    (the documented hash of random_seed, ability, k and draw); random keeps the bytes of a one-draw run,
    so a config that adds draws re-evaluates only the new ones; the manifest lists them."""
    import hashlib

    from benchprof.core.config import ConfigError

    tensors = synthetic_importance()
    one = setup(tmp_path / "one", tensors, k_values=[0.01])
    extract(load_config(one))
    three = setup(tmp_path / "three", tensors, k_values=[0.01], extract={"random_draws": 3})
    extract(load_config(three))
    layout_one = Layout(tmp_path / "one" / "outputs", "tiny")
    layout = Layout(tmp_path / "three" / "outputs", "tiny")
    names = ("random", "random2", "random3")
    drawn = {r: as_positions(read_region(layout.mask_file(ABILITY, 0.01, r))[0], tensors) for r in names}
    assert all(len(positions) == 200 for positions in drawn.values())
    assert len({frozenset(p) for p in drawn.values()}) == 3  # three different draws
    assert (
        layout.mask_file(ABILITY, 0.01, "random").read_bytes()
        == layout_one.mask_file(ABILITY, 0.01, "random").read_bytes()
    )
    for d, region in enumerate(names, start=1):
        metadata = region_metadata(layout.mask_file(ABILITY, 0.01, region))
        suffix = "" if d == 1 else f":{d}"
        digest = hashlib.sha256(f"0:{ABILITY}:0.01{suffix}".encode()).digest()
        assert metadata["seed"] == str(int.from_bytes(digest[:8], "little") & (2**63 - 1))
        assert metadata.get("draw") == (None if d == 1 else str(d))
    manifest = json.loads((layout.masks_dir(ABILITY, 0.01) / "manifest.json").read_text())
    assert manifest["inputs"]["regions"] == ["top", "bottom", "random", "random2", "random3"]
    with pytest.raises(ConfigError, match="extract.random_draws"):
        load_config(setup(tmp_path / "bad", tensors, extract={"random_draws": 0}))
