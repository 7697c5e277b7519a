"""The region file format: one safetensors file per (ability, k, region) written by extract.

Keyed by the model's parameter names; each value holds the sorted flat indices selected in that
tensor (tensors with none are absent). Metadata (strings): fingerprint, total_params, n, k,
region, ability, model, selection, selected (the actual count), eligible, scope, n_layers,
front_removal, back_removal, order, format_version; random regions add seed and random_seed, top
and bottom add score (when not importance), chunked selection adds chunk_size. The readers here are
the only ones.

Format versions: 1 (no format_version key) stored every index as int64. 2 stores a tensor's
indices as int32 when they are all below 2**31 (every tensor of fewer than 2**31 weights, which is
every tensor of today's 8-70 B models) and as int64 otherwise: half the bytes on disk and in the
page cache. Readers return int64 for both, so callers never see the stored type.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from benchprof import BenchprofError
from benchprof.core.storage import open_tensors, read_tensors, save_tensors, tensors_metadata

if TYPE_CHECKING:
    import torch

# parameter name -> sorted int64 flat indices of the selected weights
Region = dict[str, "torch.Tensor"]
HINT = "run `benchprof extract` first"
FORMAT_VERSION = 2
INT32_LIMIT = 2**31  # indices below this fit int32


def storage_dtype(indices: torch.Tensor) -> torch.dtype:
    """The smallest stored type of version 2 that holds every index of a tensor: int32 or int64."""
    import torch

    if indices.numel() == 0 or int(indices.max()) < INT32_LIMIT:
        return torch.int32
    return torch.int64


def write_region(path: Path, indices: Region, metadata: dict[str, str]) -> None:
    """A region file, atomically, with a canonical header (same region, same bytes), format version 2."""
    stored = {name: idx.to(storage_dtype(idx)) for name, idx in indices.items()}
    save_tensors(path, stored, {**metadata, "format_version": str(FORMAT_VERSION)})


def check_format(path: Path, metadata: dict[str, str]) -> None:
    """One error line if a region file comes from a newer benchprof than this one."""
    version = metadata.get("format_version", "1")
    if not version.isdigit() or int(version) > FORMAT_VERSION:
        raise BenchprofError(
            f"{path}: region format_version {version!r} is newer than this benchprof reads "
            f"(up to {FORMAT_VERSION}); upgrade benchprof or re-run `benchprof extract`"
        )


def as_int64(path: Path, name: str, stored: torch.Tensor) -> torch.Tensor:
    import torch

    if stored.dtype not in (torch.int32, torch.int64):
        raise BenchprofError(f"{path}: {name}: indices must be int32 or int64, got {stored.dtype}")
    return stored.to(torch.int64)


def read_region(path: Path) -> tuple[Region, dict[str, str]]:
    """A region file's indices (int64, whatever the stored type) and metadata; one error line naming
    the file if it is missing, corrupt or of a newer format."""
    stored, metadata = read_tensors(path, "mask", HINT)
    check_format(path, metadata)
    return {name: as_int64(path, name, idx) for name, idx in stored.items()}, metadata


def region_names(path: Path) -> list[str]:
    """The parameter names a region file holds indices for, without reading them."""
    with open_tensors(path, "mask", HINT) as handle:
        check_format(path, dict(handle.metadata() or {}))
        return list(handle.keys())


def read_region_tensor(path: Path, name: str) -> torch.Tensor | None:
    """One tensor's int64 indices from a region file (None if it has none): resident memory stays
    one tensor's worth when regions are compared tensor by tensor."""
    with open_tensors(path, "mask", HINT) as handle:
        check_format(path, dict(handle.metadata() or {}))
        return as_int64(path, name, handle.get_tensor(name)) if name in handle.keys() else None


def region_metadata(path: Path) -> dict[str, str]:
    """A region (or importance) file's metadata, without reading the indices."""
    return tensors_metadata(path, "mask", HINT)
