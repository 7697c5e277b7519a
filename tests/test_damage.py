"""damage: in-place ablation, exact restore, mask checks, and --save checkpoints."""

from pathlib import Path

import pytest
import torch
import yaml

from benchprof import BenchprofError
from benchprof.core.layout import Layout
from benchprof.core.loader import load_config
from benchprof.core.modeling import eligible_names, fingerprint, load_model, num_layers, total_params
from benchprof.core.regions import read_region
from benchprof.stages.damage import apply_region, damage, load_region, restore_region

ABILITY = "Spatial_Reasoning"


def magnitude_region(model, k: float, region: str, seed: int = 0) -> dict:
    """A stand-in for extract: n = floor(k * total) MLP weights by |w| (top/bottom) or at random."""
    params = dict(model.named_parameters())
    names = eligible_names(params, "mlp", num_layers(model))
    scores = torch.cat([params[n].detach().abs().reshape(-1) for n in names])
    n = int(k * total_params(model))
    if region == "top":
        chosen = torch.topk(scores, n).indices
    elif region == "bottom":
        chosen = torch.topk(scores, n, largest=False).indices
    else:
        chosen = torch.randperm(scores.numel(), generator=torch.Generator().manual_seed(seed))[:n]
    chosen = chosen.sort().values
    out, offset = {}, 0
    for name in names:
        size = params[name].numel()
        out[name] = (chosen[(chosen >= offset) & (chosen < offset + size)] - offset).to(torch.int64)
        offset += size
    return out


def write_masks(model, layout: Layout, ks, regions, ability: str = ABILITY) -> None:
    """Mask files in the extract stage's format, keyed by parameter name, with metadata."""
    from safetensors.torch import save_file

    meta = {"fingerprint": fingerprint(model), "total_params": str(total_params(model)), "ability": ability}
    for k in ks:
        for region in regions:
            indices = magnitude_region(model, k, region)
            path = layout.mask_file(ability, k, region)
            path.parent.mkdir(parents=True, exist_ok=True)
            save_file(
                indices,
                str(path),
                metadata={**meta, "k": str(k), "region": region, "n": str(sum(i.numel() for i in indices.values()))},
            )


def write_project(
    tmp: Path, model_dir: Path, n_test: int = 24, ks=(0.01, 0.2), regions=("top", "bottom", "random"), limit: int = 6
) -> Path:
    """config.yml, a small Spatial_Reasoning JSONL folder, and masks for every (k, region)."""
    import json
    import random

    data = tmp / "spatial"
    data.mkdir(parents=True)
    where = ["left", "right", "above", "below"]
    things = ["cup", "box", "lamp", "book", "chair", "desk", "plant", "clock"]
    for split, n in (("train", 8), ("test", n_test)):
        rng = random.Random(split)
        with open(data / f"{split}.jsonl", "w") as f:
            for i in range(n):
                a, b = rng.sample(things, 2)
                label = i % 4
                f.write(
                    json.dumps(
                        {
                            "id": f"{split}-{i}",
                            "ability": ABILITY,
                            "question_type": "spatial_relation",
                            "context": f"The {a} is {where[label]} of the {b}.",
                            "question": f"Where is the {a}?",
                            "options": where,
                            "answer": where[label],
                            "label": label,
                        }
                    )
                    + "\n"
                )
    config = tmp / "config.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "settings": {"k_values": list(ks), "eval_batch_size": 8, "output_dir": "outputs"},
                "models": [{"name": str(model_dir), "tag": "tiny", "dtype": "float32"}],
                "datasets": [{"name": ABILITY, "path": str(data)}],
                "extract": {"regions": list(regions)},
                "evals": {"benchmarks": [ABILITY], "num_fewshot": [0], "limit": limit, "device": "cpu"},
            }
        )
    )
    model, _ = load_model(str(model_dir), dtype="float32")
    write_masks(model, Layout(tmp / "outputs", "tiny"), ks, regions)
    return config


@pytest.fixture()
def model(tiny_model_dir):
    return load_model(str(tiny_model_dir), dtype="float32")[0]


def test_apply_zeroes_region_and_restore_is_bit_identical(model):
    before = {name: t.clone() for name, t in model.state_dict().items()}
    region = magnitude_region(model, 0.2, "top")
    saved = apply_region(model, region)
    after = model.state_dict()
    for name, t in after.items():
        idx = region.get(name)
        if idx is None or idx.numel() == 0:
            assert torch.equal(t, before[name]), name
            continue
        keep = torch.ones(t.numel(), dtype=torch.bool)
        keep[idx] = False
        assert (t.view(-1)[idx] == 0).all(), name
        assert torch.equal(t.view(-1)[keep], before[name].view(-1)[keep]), name
        assert (before[name].view(-1)[idx] != 0).all()  # the test would pass vacuously otherwise
    restore_region(model, saved)
    for name, t in model.state_dict().items():
        assert torch.equal(t, before[name]), name


def test_restore_handles_tied_alias_listed_twice(model):
    # the tiny model ties lm_head to the embedding: a mask may name the weight under both names
    before = model.model.embed_tokens.weight.detach().clone()
    idx = torch.arange(0, 500, 7, dtype=torch.int64)
    saved = apply_region(model, {"model.embed_tokens.weight": idx, "lm_head.weight": idx})
    assert (model.lm_head.weight.view(-1)[idx] == 0).all()
    restore_region(model, saved)
    assert torch.equal(model.model.embed_tokens.weight, before)


def save_mask(path: Path, indices: dict, metadata: dict) -> Path:
    from safetensors.torch import save_file

    save_file(indices, str(path), metadata=metadata)
    return path


def test_masks_from_another_model_fail_naming_the_file(model, tmp_path):
    fp = fingerprint(model)
    good = {"model.layers.0.mlp.up_proj.weight": torch.tensor([0, 5, 9], dtype=torch.int64)}
    ok = save_mask(tmp_path / "ok.safetensors", good, {"fingerprint": fp})
    assert load_region(model, ok).keys() == good.keys()

    cases = {
        "fingerprint": (good, {"fingerprint": "0123456789abcdef"}, "masks from another model"),
        "unknown": (
            {"model.layers.9.mlp.up_proj.weight": torch.tensor([1], dtype=torch.int64)},
            {"fingerprint": fp},
            "is not a parameter",
        ),
        "range": (
            {"model.layers.0.mlp.up_proj.weight": torch.tensor([64 * 172], dtype=torch.int64)},
            {"fingerprint": fp},
            "index outside",
        ),
        "nometa": (good, {}, "no 'fingerprint'"),
    }
    for label, (indices, meta, message) in cases.items():
        path = save_mask(tmp_path / f"{label}.safetensors", indices, meta)
        with pytest.raises(BenchprofError, match=message) as err:
            load_region(model, path)
        assert str(path) in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(BenchprofError, match="not found"):
        read_region(tmp_path / "missing.safetensors")


def test_region_of_another_checkpoint_is_refused(tiny_model_dir, tmp_path):
    from benchprof.lab.tinymodel import make_tiny_model

    other = load_model(str(make_tiny_model(tmp_path / "other", seed=1)), dtype="float32")[0]
    mine = load_model(str(tiny_model_dir), dtype="float32")[0]
    path = tmp_path / "m.safetensors"
    save_mask(path, magnitude_region(other, 0.01, "top"), {"fingerprint": fingerprint(other)})
    with pytest.raises(BenchprofError, match="masks from another model"):
        load_region(mine, path)


def test_save_writes_checkpoint_with_same_logits_and_skips_current(tiny_model_dir, tmp_path, capsys):
    from transformers import AutoModelForCausalLM

    config = write_project(tmp_path, tiny_model_dir, ks=(0.2,), regions=("top",))
    layout = Layout(tmp_path / "outputs", "tiny")
    damage(load_config(config), save=True)
    out = layout.damaged_dir(ABILITY, 0.2, "top")
    assert (out / "config.json").is_file() and (out / "tokenizer.json").is_file()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no temp folder left

    base = load_model(str(tiny_model_dir), dtype="float32")[0]
    reloaded = AutoModelForCausalLM.from_pretrained(out)
    ids = torch.tensor([[1, 20, 30, 40, 50, 60, 70, 80]])
    with torch.no_grad():
        original_logits = base(ids).logits
        saved = apply_region(base, load_region(base, layout.mask_file(ABILITY, 0.2, "top")))
        ablated_logits = base(ids).logits
        restore_region(base, saved)
        assert torch.equal(reloaded(ids).logits, ablated_logits)
        assert not torch.allclose(ablated_logits, original_logits)

    stamp = (out / "model.safetensors").stat().st_mtime_ns
    damage(load_config(config), save=True)
    assert (out / "model.safetensors").stat().st_mtime_ns == stamp
    assert "0 checkpoint(s) written, 1 current kept" in capsys.readouterr().out
    damage(load_config(config), save=True, force=True)
    assert (out / "model.safetensors").stat().st_mtime_ns != stamp


def test_report_without_save_writes_nothing(tiny_model_dir, tmp_path, capsys):
    config = write_project(tmp_path, tiny_model_dir, ks=(0.01,), regions=("top", "random"))
    damage(load_config(config))
    out = capsys.readouterr().out
    assert f"{ABILITY}/k0.01/top" in out and f"{ABILITY}/k0.01/random" in out and "1.000%" in out
    assert not (tmp_path / "outputs" / "tiny" / ABILITY / "damaged").exists()
    with pytest.raises(BenchprofError, match="--region"):
        damage(load_config(config), region="middle")
