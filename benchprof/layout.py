"""The outputs/ tree (DESIGN.md section 3). Every path a stage reads or writes comes from here.

outputs/<model-tag>/
  original/eval/<benchmark>.json                         evaluate: unablated scores
  <ability>/importance/importance.safetensors + manifest.json      finetune
  <ability>/masks/k<k>/{top,bottom,random}.safetensors + stats.csv + manifest.json   extract
  <ability>/damaged/k<k>/<region>/                       damage --save: a full HF checkpoint
  <ability>/eval/k<k>/<region>/<benchmark>.json (+ .samples.jsonl)   evaluate
  profile/ais.csv, ais.md, ais.json, *.png               aggregate
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Optional


def format_k(k: float) -> str:
    """k as a plain decimal with no exponent, for folder names: 1e-05 -> '0.00001'."""
    text = format(Decimal(repr(float(k))), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def parse_k(name: str) -> float:
    """Inverse of the folder name k<k>: 'k0.00001' -> 1e-05."""
    return float(name[1:] if name.startswith("k") else name)


@dataclass(frozen=True)
class Variant:
    """One ablated model: ability a's `region` at fraction k. `ability=None` is the original."""

    ability: Optional[str] = None
    k: Optional[float] = None
    region: Optional[str] = None

    @property
    def is_original(self) -> bool:
        return self.ability is None

    def label(self) -> str:
        return "original" if self.is_original else f"{self.ability}/k{format_k(self.k)}/{self.region}"


@dataclass(frozen=True)
class Layout:
    """Paths under `<root>/<model_tag>/`."""

    root: Path
    model_tag: str

    @property
    def model_dir(self) -> Path:
        return Path(self.root) / self.model_tag

    # finetune
    def importance_dir(self, ability: str) -> Path:
        return self.model_dir / ability / "importance"

    def importance_file(self, ability: str) -> Path:
        return self.importance_dir(ability) / "importance.safetensors"

    # extract
    def masks_dir(self, ability: str, k: float) -> Path:
        return self.model_dir / ability / "masks" / f"k{format_k(k)}"

    def mask_file(self, ability: str, k: float, region: str) -> Path:
        return self.masks_dir(ability, k) / f"{region}.safetensors"

    def mask_stats(self, ability: str, k: float) -> Path:
        return self.masks_dir(ability, k) / "stats.csv"

    # damage
    def damaged_dir(self, ability: str, k: float, region: str) -> Path:
        return self.model_dir / ability / "damaged" / f"k{format_k(k)}" / region

    # evaluate
    def eval_dir(self, variant: Variant) -> Path:
        if variant.is_original:
            return self.model_dir / "original" / "eval"
        return self.model_dir / variant.ability / "eval" / f"k{format_k(variant.k)}" / variant.region

    def eval_file(self, variant: Variant, benchmark: str) -> Path:
        return self.eval_dir(variant) / f"{benchmark}.json"

    def samples_file(self, variant: Variant, benchmark: str) -> Path:
        return self.eval_dir(variant) / f"{benchmark}.samples.jsonl"

    # aggregate
    @property
    def profile_dir(self) -> Path:
        return self.model_dir / "profile"


def manifest_path(directory: Path) -> Path:
    """Each stage output folder records what produced it here."""
    return Path(directory) / "manifest.json"
