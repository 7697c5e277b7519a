"""benchprof.core.regions: format version 2 stores int32 indices, version 1 (int64) files still load."""

import pytest
import torch
from safetensors import safe_open
from test_damage import magnitude_region

from benchprof import BenchprofError
from benchprof.core.modeling import fingerprint, load_model, total_params
from benchprof.core.regions import FORMAT_VERSION, read_region, read_region_tensor, region_names, write_region
from benchprof.core.storage import save_tensors
from benchprof.stages.damage import apply_region, load_region, region_stats, restore_region
from benchprof.stages.overlap import region_overlap


def stored_dtypes(path) -> dict[str, str]:
    with safe_open(str(path), "pt") as f:
        return {name: f.get_slice(name).get_dtype() for name in f.keys()}


def write_version_1(path, indices: dict, metadata: dict) -> None:
    """A region file as benchprof wrote them before format_version: int64, no version key."""
    save_tensors(path, {name: idx.to(torch.int64) for name, idx in indices.items()}, metadata)


def test_version_2_stores_int32_below_2_31_and_int64_above(tmp_path):
    indices = {
        "a.weight": torch.tensor([0, 7, 2**31 - 1], dtype=torch.int64),  # the largest int32
        "b.weight": torch.tensor([3, 2**31], dtype=torch.int64),  # one index past it: a > 2**31-weight tensor
        "c.weight": torch.arange(0, 10_000, 3, dtype=torch.int64),
    }
    path = tmp_path / "top.safetensors"
    write_region(path, indices, {"region": "top", "fingerprint": "f"})
    assert stored_dtypes(path) == {"a.weight": "I32", "b.weight": "I64", "c.weight": "I32"}
    read, metadata = read_region(path)
    assert metadata == {"region": "top", "fingerprint": "f", "format_version": str(FORMAT_VERSION)}
    assert read.keys() == indices.keys()
    for name, idx in indices.items():
        assert read[name].dtype == torch.int64 and torch.equal(read[name], idx)
    assert sorted(region_names(path)) == sorted(indices)
    assert torch.equal(read_region_tensor(path, "b.weight"), indices["b.weight"])
    assert read_region_tensor(path, "absent.weight") is None

    old = tmp_path / "old.safetensors"
    write_version_1(old, {"c.weight": indices["c.weight"]}, {"region": "top"})
    new = tmp_path / "new.safetensors"
    write_region(new, {"c.weight": indices["c.weight"]}, {"region": "top"})
    data_bytes = 8 * indices["c.weight"].numel()
    assert old.stat().st_size - new.stat().st_size == pytest.approx(data_bytes / 2, abs=64)  # 4 B saved per index


def test_an_old_int64_file_damages_exactly_as_a_new_one(tiny_model_dir, tmp_path):
    model, _ = load_model(str(tiny_model_dir), dtype="float32")
    metadata = {"fingerprint": fingerprint(model), "total_params": str(total_params(model)), "region": "top"}
    indices = magnitude_region(model, 0.05, "top")
    old, new = tmp_path / "old.safetensors", tmp_path / "new.safetensors"
    write_version_1(old, indices, metadata)
    write_region(new, indices, metadata)
    assert set(stored_dtypes(old).values()) == {"I64"} and set(stored_dtypes(new).values()) == {"I32"}
    assert "format_version" not in read_region(old)[1]

    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    damaged = []
    for path in (old, new):
        region = load_region(model, path)  # checks fingerprint, dtype (int64 after reading) and range
        stats = region_stats(model, region)
        saved = apply_region(model, region)
        damaged.append(({name: p.detach().clone() for name, p in model.named_parameters()}, stats))
        restore_region(model, saved)
    (old_state, old_stats), (new_state, new_stats) = damaged
    assert old_stats == new_stats and old_stats["zeroed"] == sum(i.numel() for i in indices.values())
    changed = sum(int((old_state[n] != before[n]).sum()) for n in before)
    assert changed == old_stats["zeroed"] - old_stats["already_zero"] > 0
    assert all(torch.equal(old_state[n], new_state[n]) for n in before)


def test_overlap_of_an_old_and_a_new_file_is_set_arithmetic(tmp_path):
    a = {"x.weight": torch.tensor([1, 4, 9, 16]), "y.weight": torch.tensor([2, 3])}
    b = {"x.weight": torch.tensor([4, 9, 10]), "z.weight": torch.tensor([0])}
    metadata = {"fingerprint": "f", "eligible": "100", "region": "top"}
    write_version_1(tmp_path / "a.safetensors", a, {**metadata, "n": "6"})
    write_region(tmp_path / "b.safetensors", b, {**metadata, "n": "4"})
    result = region_overlap({"A": tmp_path / "a.safetensors", "B": tmp_path / "b.safetensors"}, 0.06)
    assert result.shared[("A", "B")] == result.shared[("B", "A")] == 2
    assert result.per_tensor == {"A": {"x.weight": 4, "y.weight": 2}, "B": {"x.weight": 3, "z.weight": 1}}


def test_newer_format_or_non_integer_indices_are_one_line_errors(tmp_path):
    path = tmp_path / "future.safetensors"
    save_tensors(path, {"x.weight": torch.tensor([1], dtype=torch.int32)}, {"format_version": "3"})
    for read in (read_region, region_names, lambda p: read_region_tensor(p, "x.weight")):
        with pytest.raises(BenchprofError, match=r"future.safetensors: region format_version '3' is newer"):
            read(path)
    floats = tmp_path / "floats.safetensors"
    save_tensors(floats, {"x.weight": torch.tensor([1.0])}, {"format_version": "2"})
    with pytest.raises(BenchprofError, match="x.weight: indices must be int32 or int64, got torch.float32"):
        read_region(floats)
