"""The region file format: one safetensors file per (ability, k, region) written by extract.

Keyed by the model's parameter names; each value holds the sorted int64 flat indices selected in
that tensor (tensors with none are absent). Metadata (strings): fingerprint, total_params, n, k,
region, ability, model, selection, selected (the actual count), eligible, scope, n_layers,
front_removal, back_removal, order; random regions add seed and random_seed, top and bottom add
score (when not importance), chunked selection adds chunk_size. The readers here are the only ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .storage import read_tensors, save_tensors, tensors_metadata

if TYPE_CHECKING:
    import torch

# parameter name -> sorted int64 flat indices of the selected weights
Region = dict[str, "torch.Tensor"]
HINT = "run `benchprof extract` first"


def write_region(path: Path, indices: Region, metadata: dict[str, str]) -> None:
    """A region file, atomically, with a canonical header (same region, same bytes)."""
    save_tensors(path, indices, metadata)


def read_region(path: Path) -> tuple[Region, dict[str, str]]:
    """A region file's indices and metadata; one error line naming the file if it is missing or corrupt."""
    return read_tensors(path, "mask", HINT)


def region_metadata(path: Path) -> dict[str, str]:
    """A region (or importance) file's metadata, without reading the indices."""
    return tensors_metadata(path, "mask", HINT)
