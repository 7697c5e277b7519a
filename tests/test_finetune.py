"""benchprof.stages.finetune: importance against an independent autograd reference, DDP, options, skipping."""

import copy
import functools
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from safetensors import safe_open

from benchprof.core.layout import Layout
from benchprof.core.loader import load_config
from benchprof.core.modeling import eligible_names, fingerprint, load_model
from benchprof.core.prompts import encode_record
from benchprof.stages.finetune import batch_loss, encode_batches, finetune
from benchprof.stages.sharding import accumulate_gradients

ROOT = Path(__file__).resolve().parents[1]
ABILITY = "Spatial_Reasoning"
KEYS = ["context", "question", "answer"]
PLACES = ["the lamp", "the chair", "the box", "the plant", "the clock", "the vase"]
WHERE = ["left of", "right of", "above", "below"]


def records(count: int = 14) -> list[dict]:
    """Hand-made spatial items of varying length (so batches need padding)."""
    out = []
    for i in range(count):
        a, b = PLACES[i % 6], PLACES[(i + 1 + i // 6) % 6]
        relation = WHERE[i % 4]
        context = f"{a.capitalize()} is {relation} {b}." + " The room is quiet." * (i % 3)
        options = [f"{a} is {w} {b}" for w in WHERE]
        out.append(
            {
                "id": f"s{i}",
                "ability": ABILITY,
                "question_type": "spatial_relation",
                "context": context,
                "question": f"Where is {a}?",
                "options": options,
                "answer": options[i % 4],
                "label": i % 4,
            }
        )
    return out


def write_config(tmp_path: Path, model_dir: Path, out: str = "outputs", **finetune_settings) -> Path:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records()))
    raw = {
        "settings": {"k_values": [0.001, 0.01], "train_batch_size": 3, "output_dir": out},
        "models": [{"name": str(model_dir), "tag": "tiny"}],
        "datasets": [{"name": ABILITY, "path": str(data)}],
        "evals": {"benchmarks": [ABILITY]},
        "finetune": {"max_samples": 10, "max_length": 96, **finetune_settings},
    }
    path = tmp_path / f"config_{out}.yml"
    path.write_text(yaml.safe_dump(raw))
    return path


def read_importance(path: Path) -> tuple[dict, dict]:
    with safe_open(str(path), "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, f.metadata()


def reference_importance(model, tokenizer, items, loss_on: str, dtype=torch.float64) -> dict:
    """|theta * dL/dtheta| by plain autograd, one item at a time (no padding), in `dtype`.

    L = (1/N) * sum over loss tokens of -log p, using the model's own loss (a per-item token mean)
    times the item's loss-token count; N is the total count. Independent of batching and padding.
    """
    model = copy.deepcopy(model).to(dtype)
    for p in model.parameters():
        p.requires_grad_(True)
    encoded = [encode_record(tokenizer, r, KEYS, 96) for r in items]
    label_rows = []
    for ids, start, end in encoded:
        labels = torch.tensor(ids)
        if loss_on == "answer":
            labels[:start] = -100
            labels[end:] = -100
        label_rows.append(labels)
    total = sum(int((labels[1:] != -100).sum()) for labels in label_rows)
    model.zero_grad()
    for (ids, _, _), labels in zip(encoded, label_rows):
        count = int((labels[1:] != -100).sum())
        loss = model(input_ids=torch.tensor([ids]), labels=labels[None]).loss
        (loss * count / total).backward()
    eligible = eligible_names([n for n, _ in model.named_parameters()], "mlp", model.config.num_hidden_layers)
    params = dict(model.named_parameters())
    return {n: (params[n].detach() * params[n].grad).abs() for n in eligible}


def assert_matches(ours: dict, reference: dict, rtol: float) -> None:
    assert set(ours) == set(reference)
    for name, ref in reference.items():
        ref = ref.to(torch.float64)
        torch.testing.assert_close(ours[name].to(torch.float64), ref, rtol=rtol, atol=rtol * float(ref.abs().max()))


@pytest.fixture(scope="module")
def fp32_run(tmp_path_factory, tiny_model_dir):
    tmp = tmp_path_factory.mktemp("fp32")
    config = write_config(tmp, tiny_model_dir)
    finetune(load_config(config))
    return config


def test_importance_equals_fp64_autograd_reference(fp32_run, tiny_model_dir):
    cfg = load_config(fp32_run)
    layout = Layout(cfg.output_root, "tiny")
    importance, metadata = read_importance(layout.importance_file(ABILITY))
    model, tok = load_model(str(tiny_model_dir), dtype="float32")
    reference = reference_importance(model, tok, records()[:10], "all")  # max_samples: 10, first in order
    assert_matches(importance, reference, rtol=1e-4)
    # every layer's MLP weights, fp32, parameter shapes; metadata per the contract
    names = [n for n, _ in model.named_parameters()]
    assert sorted(importance) == sorted(eligible_names(names, "mlp", 4)) and len(importance) == 12
    params = dict(model.named_parameters())
    assert all(v.dtype == torch.float32 and v.shape == params[n].shape for n, v in importance.items())
    assert metadata["fingerprint"] == fingerprint(model)
    assert int(metadata["total_params"]) == sum(p.numel() for p in model.parameters())
    assert metadata["n_layers"] == "4" and metadata["scope"] == "mlp" and metadata["n_samples"] == "10"
    manifest = json.loads((layout.importance_dir(ABILITY) / "manifest.json").read_text())
    inputs = manifest["inputs"]
    assert inputs["fingerprint"] == metadata["fingerprint"] and len(inputs["data"]["hash"]) == 16
    assert (inputs["scope"], inputs["loss_on"], inputs["batch_size"], inputs["max_length"]) == ("mlp", "all", 3, 96)


def test_answer_only_loss_matches_reference_and_differs(fp32_run, tiny_model_dir, tmp_path):
    config = write_config(tmp_path, tiny_model_dir, loss_on="answer")
    finetune(load_config(config))
    answer, _ = read_importance(Layout(load_config(config).output_root, "tiny").importance_file(ABILITY))
    everything, _ = read_importance(Layout(load_config(fp32_run).output_root, "tiny").importance_file(ABILITY))
    model, tok = load_model(str(tiny_model_dir), dtype="float32")
    assert_matches(answer, reference_importance(model, tok, records()[:10], "answer"), rtol=1e-4)
    name = "model.layers.2.mlp.up_proj.weight"
    assert not torch.allclose(answer[name], everything[name], rtol=0.05)


def test_batch_size_and_checkpointing_do_not_change_importance(fp32_run, tiny_model_dir, tmp_path):
    base, _ = read_importance(Layout(load_config(fp32_run).output_root, "tiny").importance_file(ABILITY))
    config = write_config(tmp_path, tiny_model_dir)
    finetune(load_config(config), batch_size=1, gradient_checkpointing=True)
    other, _ = read_importance(Layout(load_config(config).output_root, "tiny").importance_file(ABILITY))
    assert_matches(other, base, rtol=1e-4)


def test_bf16_accumulates_bf16_gradients_in_fp32(tiny_model_dir, tmp_path):
    """A bf16 model's per-batch gradients are bf16 (no way around that without an fp32 copy); what
    we control is the sum. Reference: the same bf16 model's per-batch gradients by plain autograd,
    summed in fp64. A bf16 running sum would be off by ~1e-2 relative; ours must agree to ~1e-5.
    Also close (loosely) to the fp64 reference of the upcast weights: bf16 is a fair approximation."""
    config = write_config(tmp_path, tiny_model_dir, dtype="bfloat16")
    finetune(load_config(config))
    importance, metadata = read_importance(Layout(load_config(config).output_root, "tiny").importance_file(ABILITY))
    assert metadata["dtype"] == "torch.bfloat16"

    model, tok = load_model(str(tiny_model_dir), dtype="bfloat16")
    batches, total = encode_batches(tok, records()[:10], KEYS, 96, 3, "all")
    eligible = eligible_names([n for n, _ in model.named_parameters()], "mlp", 4)
    params = dict(model.named_parameters())
    sums = {n: torch.zeros(params[n].shape, dtype=torch.float64) for n in eligible}
    for batch in batches:
        model.zero_grad()
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        loss = (
            torch.nn.functional.cross_entropy(
                logits[:, :-1].flatten(0, 1).float(), batch["labels"][:, 1:].flatten(), reduction="sum"
            )
            / total
        )
        loss.backward()
        for n in eligible:
            sums[n] += params[n].grad.double()
    same_dtype = {n: (params[n].detach().double() * sums[n]).abs() for n in eligible}
    assert_matches(importance, same_dtype, rtol=1e-5)

    upcast = reference_importance(model.float(), tok, records()[:10], "all")
    ours = torch.cat([importance[n].flatten() for n in eligible]).double()
    ref = torch.cat([upcast[n].flatten() for n in eligible])
    assert float((ours - ref).norm() / ref.norm()) < 0.1


def test_non_eligible_parameters_get_no_gradient_and_nothing_moves(tiny_model_dir):
    model, tok = load_model(str(tiny_model_dir), dtype="float32")
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    batches, total = encode_batches(tok, records()[:4], KEYS, 96, 2, "all")
    eligible = eligible_names([n for n, _ in model.named_parameters()], "mlp", 4)[:5]  # a subset on purpose
    sums = accumulate_gradients(model, batches, functools.partial(batch_loss, n_loss_tokens=total), eligible)
    assert sorted(sums) == sorted(eligible) and all(float(s.abs().sum()) > 0 for s in sums.values())
    for name, p in model.named_parameters():
        assert p.grad is None  # the hook frees eligible gradients; the others never get one
        assert p.requires_grad == (name in eligible)
        assert torch.equal(p.detach(), before[name])  # no optimizer, no update


def test_rerun_skips_and_force_recomputes(fp32_run, capsys):
    file = Layout(load_config(fp32_run).output_root, "tiny").importance_file(ABILITY)
    mtime = file.stat().st_mtime_ns
    finetune(load_config(fp32_run))
    assert file.stat().st_mtime_ns == mtime and "1 up to date" in capsys.readouterr().out
    finetune(load_config(fp32_run), force=True)
    assert file.stat().st_mtime_ns != mtime


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_process_gloo_run_equals_one_process(fp32_run, tiny_model_dir, tmp_path):
    """torchrun --nproc_per_node 2 over the CLI: strided batch shards, one all-reduce, rank 0 writes."""
    config = write_config(tmp_path, tiny_model_dir, out="ddp")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(free_port()),
        "-m",
        "benchprof",
        "finetune",
        str(config),
    ]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    layout = Layout(load_config(config).output_root, "tiny")
    two, _ = read_importance(layout.importance_file(ABILITY))
    one, _ = read_importance(Layout(load_config(fp32_run).output_root, "tiny").importance_file(ABILITY))
    assert_matches(two, one, rtol=1e-5)
    assert json.loads((layout.importance_dir(ABILITY) / "manifest.json").read_text())["world_size"] == 2


def test_float16_is_refused_in_one_line_and_an_fp16_checkpoint_runs_wider(tiny_model_dir, tmp_path, capsys):
    """fp16 gradients of the split-wide loss underflow (issue 22): finetune.dtype float16 fails at load,
    an explicit float16 model dtype fails before any work, and dtype auto on an fp16 checkpoint runs in
    fp32 on the CPU: the same importance as loading that checkpoint in fp32 by hand."""
    from benchprof import BenchprofError
    from benchprof.core.config import ConfigError

    with pytest.raises(ConfigError, match=r"^finetune\.dtype: float16 is refused .*use bfloat16, float32 or auto$"):
        load_config(write_config(tmp_path, tiny_model_dir, out="a", dtype="float16"))
    raw = yaml.safe_load(write_config(tmp_path, tiny_model_dir, out="b").read_text())
    raw["models"][0]["dtype"] = "float16"
    explicit = tmp_path / "explicit.yml"
    explicit.write_text(yaml.safe_dump(raw))
    with pytest.raises(BenchprofError, match="float16 is refused"):
        finetune(load_config(explicit))

    fp16_dir = tmp_path / "fp16-model"
    model, tok = load_model(str(tiny_model_dir), dtype="float16")
    model.save_pretrained(fp16_dir)
    tok.save_pretrained(fp16_dir)
    finetune(load_config(write_config(tmp_path, fp16_dir, out="auto")))
    assert "is an fp16 checkpoint; importance runs in torch.float32" in capsys.readouterr().out
    finetune(load_config(write_config(tmp_path, fp16_dir, out="fp32", dtype="float32")))
    auto, meta = read_importance(Layout(tmp_path / "auto", "tiny").importance_file(ABILITY))
    fp32, _ = read_importance(Layout(tmp_path / "fp32", "tiny").importance_file(ABILITY))
    assert meta["dtype"] == "torch.float32" and auto.keys() == fp32.keys()
    assert all(torch.equal(auto[name], fp32[name]) for name in auto)
