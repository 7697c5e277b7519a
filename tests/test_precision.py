"""bf16 against fp32 on the shipped demo model: the regions importance picks, and exact restores.

A bf16 model's gradients are bf16 (accumulated in fp32, test_finetune checks the sum); its top
regions cannot equal the fp32 model's, only nearly. The floor below was measured first with
`benchprof finetune` + `extract` on benchprof/assets/demo-model, fp32 against bf16, 5 abilities x
k in {0.001, 0.003, 0.01, 0.03}: Jaccard of the top regions 0.943-0.979 with 32 training items,
0.937-0.979 with 16 and 0.969-0.986 with 300 (torch 2.13 CPU). For scale, the same fp32 model on
32 against 300 items of the same ability gives 0.21-0.39, and two abilities 0.05-0.14: precision
moves the regions an order of magnitude less than the choice of items. The floor, 0.90, leaves
room for another BLAS or torch build and still fails if bf16 picked a region of another make.
"""

from pathlib import Path

import pytest
import torch
import yaml
from test_golden import reduced_demo

from benchprof.core.layout import Layout
from benchprof.core.loader import load_config
from benchprof.core.modeling import fingerprint, load_model
from benchprof.core.regions import Region, read_region
from benchprof.stages.damage import ablated, apply_region, load_region, restore_region
from benchprof.stages.data import data
from benchprof.stages.extract import extract
from benchprof.stages.finetune import finetune

ROOT = Path(__file__).resolve().parents[1]
DEMO_MODEL = ROOT / "benchprof" / "assets" / "demo-model"
ABILITIES = ["Quantitative_Reasoning", "Commonsense_Causal"]
KS = [0.001, 0.01, 0.03]
JACCARD_FLOOR = 0.90


def demo_config(folder: Path, dtype: str) -> Path:
    """The demo config cut to two abilities, 32 training items, top and random regions, in `dtype`."""
    config = reduced_demo(folder)
    raw = yaml.safe_load(config.read_text())
    raw["data"].update(dir=str(folder.parent / "data"), train_size=32, test_size=20)
    raw["finetune"].update(max_samples=32, dtype=dtype)
    raw["evals"]["dtype"] = dtype
    raw["settings"]["k_values"] = KS
    raw["extract"]["regions"] = ["top", "random"]
    config.write_text(yaml.safe_dump(raw))
    return config


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Layout]:
    """Importance and regions of the demo model in fp32 and in bf16, same items, same settings."""
    root = tmp_path_factory.mktemp("precision")
    layouts = {}
    for dtype in ("float32", "bfloat16"):
        folder = root / dtype
        folder.mkdir()
        cfg = load_config(demo_config(folder, dtype))
        data(cfg)
        finetune(cfg)
        extract(cfg)
        layouts[dtype] = Layout(cfg.output_root, "demo")
    return layouts


def jaccard(a: Region, b: Region) -> float:
    """|A ∩ B| / |A ∪ B| of two regions as sets of (tensor, position)."""
    inter = union = 0
    for name in set(a) | set(b):
        first = set(a[name].tolist()) if name in a else set()
        second = set(b[name].tolist()) if name in b else set()
        inter += len(first & second)
        union += len(first | second)
    return inter / union


def test_bf16_top_regions_overlap_fp32_above_the_measured_floor(runs):
    from safetensors import safe_open

    with safe_open(str(runs["bfloat16"].importance_file(ABILITIES[0])), "pt") as f:
        assert f.metadata()["dtype"] == "torch.bfloat16"
        assert all(f.get_slice(name).get_dtype() == "F32" for name in f.keys())  # scores kept in fp32
    top = {
        (dtype, ability, k): read_region(layout.mask_file(ability, k, "top"))[0]
        for dtype, layout in runs.items()
        for ability in ABILITIES
        for k in KS
    }
    for ability in ABILITIES:
        for k in KS:
            same = jaccard(top["bfloat16", ability, k], top["float32", ability, k])
            assert same >= JACCARD_FLOOR, (ability, k, same)
            # the measure can tell regions apart: the other ability's fp32 region is far away
            other = ABILITIES[1 - ABILITIES.index(ability)]
            assert jaccard(top["bfloat16", ability, k], top["float32", other, k]) < 0.5


def bits(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter (tied aliases too) and buffer as raw integers: -0.0 and +0.0 differ here."""
    state = model.state_dict(keep_vars=False)
    return {
        name: t.detach().clone().view(torch.int16) if t.dtype == torch.bfloat16 else t.clone()
        for name, t in state.items()
    }


def test_damage_in_place_on_bf16_restores_every_bit(runs):
    """Regions from the bf16 run, applied and restored on the bf16 model the way evaluate does
    (several variants in turn on one loaded model). Negative zeros and subnormals are planted inside
    the regions first and compared as raw bits: a restore that did any arithmetic on the saved values
    (-0.0 + 0 is +0.0, which torch.equal accepts) or flushed denormals would fail here."""
    model, _ = load_model(str(DEMO_MODEL), dtype="bfloat16")
    original_fingerprint = fingerprint(model)
    layout = runs["bfloat16"]
    paths = [layout.mask_file(a, k, r) for a in ABILITIES for k in KS for r in ("top", "random")]
    regions = [load_region(model, path, original_fingerprint) for path in paths]
    planted = {}
    with torch.no_grad():
        for name, idx in regions[-1].items():  # the largest random region: overlaps several others
            flat = dict(model.named_parameters())[name].data.view(-1)
            flat[idx[0::7]] = -0.0
            flat[idx[3::7]] = torch.tensor(2.0**-130, dtype=torch.bfloat16)  # a bf16 subnormal
            planted[name] = idx
    negative_zero = torch.tensor(-0.0, dtype=torch.bfloat16).view(torch.int16)
    some = next(iter(planted))
    assert int(dict(model.named_parameters())[some].data.view(-1)[planted[some][0]].view(torch.int16)) == int(
        negative_zero
    )
    before = bits(model)

    params = dict(model.named_parameters())
    for region in regions:
        with ablated(model, region):
            for name, idx in region.items():
                assert torch.equal(
                    params[name].data.view(-1)[idx].view(torch.int16), torch.zeros_like(idx, dtype=torch.int16)
                )
        after = bits(model)
        assert after.keys() == before.keys()
        assert all(torch.equal(after[name], before[name]) for name in before)

    # nested, as two regions of the same weights could be: restored in reverse, still exact
    outer = apply_region(model, regions[0])
    inner = apply_region(model, regions[-1])
    restore_region(model, inner)
    restore_region(model, outer)
    after = bits(model)
    assert all(torch.equal(after[name], before[name]) for name in before)
    assert all(p.dtype == torch.bfloat16 for p in model.parameters())
