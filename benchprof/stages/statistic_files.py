"""The per-item statistic files a neuron score reads (stages/neurons.py's attribution or activity over an ability's
train items): which items (train_items; with extract.selections, disjoint samples: selection_rows), the placebo
items that carry no skill (placebo_items), and each file computed where missing or stale and read back otherwise
(attributions), with what its manifest records (attribution_inputs).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from benchprof import BenchprofError
from benchprof.stages.neurons import OBJECTIVES, STATISTICS, model_neurons

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from benchprof.core.config import Config, ModelSpec


def attribution_inputs(
    cfg: Config,
    spec: ModelSpec,
    ability: str,
    update_cache: bool = True,
    records: list[dict[str, Any]] | None = None,
    statistic: str = "attribution",
    placebo: bool = False,
) -> dict[str, Any]:
    """What one ability's statistic file (attribution or activity) is computed from (its manifest's inputs): the
    checkpoint's content (modeling.model_identity, read without loading it), the train split and how many of its
    items, the objective; a placebo file's also how its answers were drawn (PLACEBO_LABELS). `records`: the
    ability's train_items when the caller has read them already."""
    from benchprof.core.modeling import model_signature
    from benchprof.stages.finetune import data_identity

    records = train_items(cfg, ability) if records is None else records
    return {
        "stage": statistic,
        "ability": ability,
        "model": model_signature(cfg, spec, update_cache),
        "data": data_identity(cfg, ability, records),
        "n_samples": len(records),
        "objective": OBJECTIVES[statistic],
        **({"placebo": PLACEBO_LABELS} if placebo else {}),
    }


def train_items(cfg: Config, ability: str) -> list[dict[str, Any]]:
    """The train items the attribution reads: the first finetune.max_samples (all when unset), as finetune; with
    extract.selections = S, the first S x max_samples, sample s being rows selection_rows(cfg, s). Refused in one
    line when the split holds fewer."""
    from benchprof.stages.data import load_split

    records = load_split(cfg, ability, "train")
    per_sample, samples = cfg.finetune.max_samples, cfg.extract.selections
    if samples > 1 and per_sample and len(records) < samples * per_sample:
        raise BenchprofError(
            f"{ability}: {len(records)} train items cannot hold extract.selections x finetune.max_samples = "
            f"{samples * per_sample} disjoint items (raise data.train_size, or lower one of the two)"
        )
    return records[: samples * per_sample] if per_sample else records


def selection_rows(cfg: Config, selection: int, items: int) -> slice:
    """The rows of a statistic file (`items` rows, train_items') that attribution sample `selection` (1, 2, ...)
    reads: disjoint blocks of finetune.max_samples items, in the split's order; all rows with one selection."""
    if cfg.extract.selections == 1:  # every row of every ability's file, whatever its length
        return slice(None)
    size = items // cfg.extract.selections
    return slice((selection - 1) * size, selection * size)


PLACEBO_LABELS = "each item's label drawn uniformly over its options, numpy PCG64 seeded by crc32(ability), v1"


def placebo_items(records: Sequence[dict[str, Any]], ability: str) -> list[dict[str, Any]]:
    """A placebo ability's items: the ability's own (same prompts, options and format) with each one's correct
    option replaced by one drawn uniformly at random (PLACEBO_LABELS), so that no skill predicts the label. The
    same draws on every run and machine."""
    import zlib

    import numpy as np

    rng = np.random.default_rng(zlib.crc32(ability.encode()))
    out = []
    for r in records:
        label = int(rng.integers(len(r["options"])))
        out.append({**r, "label": label, "answer": r["options"][label]})
    return out


def attributions(
    cfg: Config,
    spec: ModelSpec,
    abilities: Sequence[str],
    force: bool = False,
    statistic: str = "attribution",
    placebo: bool = False,
) -> tuple[dict[str, NDArray[np.float32]], dict[str, str]]:
    """Each ability's statistic (attribution or activity, items x neurons), computed where its file is missing or
    stale and read back otherwise, and the model's metadata (fingerprint, total_params, n_layers, hidden,
    intermediate). `placebo`: the statistic of its placebo items (placebo_items), in a file of its own."""
    import numpy as np
    import torch
    from tqdm import tqdm

    from benchprof.core.layout import Layout
    from benchprof.core.modeling import checkpoint_fingerprint, load_model
    from benchprof.core.storage import clear_manifest, is_current, read_tensors, save_tensors, write_manifest

    layout = Layout(cfg.output_root, spec.tag)
    records = {a: train_items(cfg, a) for a in abilities}
    inputs = {a: attribution_inputs(cfg, spec, a, True, records[a], statistic, placebo) for a in abilities}
    outputs = {a: layout.attribution_output(a, statistic, placebo) for a in abilities}
    todo = [a for a in abilities if force or not is_current(outputs[a], inputs[a])]
    compute = STATISTICS[statistic]
    if todo:
        source, tokenizer = cfg.model_source(spec)
        loaded_at = time.time()
        model, tok = load_model(source, tokenizer, dtype="float32", device="cpu")
        model.eval()
        neurons = model_neurons(model)
        metadata = {
            "fingerprint": checkpoint_fingerprint(source, layout.model_dir, model, loaded_at=loaded_at),
            "total_params": str(neurons.total_params),
            "n_layers": str(len(neurons.mlps)),
            "hidden": str(neurons.hidden),
            "intermediate": str(neurons.intermediate),
            "model": spec.tag,
        }
        for ability in tqdm(todo, desc=statistic + (" placebo" if placebo else ""), unit="ability", leave=False):
            started = time.time()
            values = compute(model, tok, placebo_items(records[ability], ability) if placebo else records[ability])
            folder = layout.attribution_dir(ability, statistic, placebo)
            clear_manifest(folder)
            path = layout.attribution_file(ability, statistic, placebo)
            save_tensors(path, {statistic: torch.from_numpy(values)}, metadata)
            write_manifest(folder, inputs[ability], started=started)
        del model
    out: dict[str, NDArray[np.float32]] = {}
    meta: dict[str, str] = {}
    for ability in abilities:
        tensors, meta = read_tensors(layout.attribution_file(ability, statistic, placebo))
        out[ability] = tensors[statistic].numpy().astype(np.float32)
    return out, meta
