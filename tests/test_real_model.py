"""The whole pipeline on a real pretrained LLM (SmolLM2-135M-Instruct, fetched from its registry package)
and a real lm-eval benchmark read from a local copy: two abilities, one k, twenty items."""

import csv
import json
import math
import os
import subprocess
import sys

import pytest
import yaml

pytestmark = pytest.mark.slow

K = 0.01024
ITEMS = 20


def stored_parameters(folder) -> int:
    """Every weight a checkpoint folder stores, from its safetensors headers alone (a tied embedding is stored once)."""
    from safetensors import safe_open

    total = 0
    for path in sorted(folder.glob("*.safetensors")):
        with safe_open(str(path), "pt") as f:
            for name in f.keys():
                shape = f.get_slice(name).get_shape()
                total += math.prod(shape)
    return total


def test_a_real_model_profiles_a_real_benchmark_and_scores_like_lm_eval_s_cli(real_llm, real_benchmarks_dir, tmp_path):
    """`benchprof run` end to end on each real LLM (SmolLM2, a Llama; Qwen2.5-Coder-0.5B, a Qwen2); the unablated
    model's per-document accuracies and log-likelihoods equal those of lm-eval's own command line on the same
    model, task YAML and documents; the regions have exactly floor(k * all parameters) weights, tied embeddings
    counted once, all in the MLP."""
    from safetensors import safe_open

    from benchprof.core.layout import Layout, Variant

    real_model_dir = real_llm

    config = {
        "settings": {"k_values": [K], "output_dir": "outputs", "train_batch_size": 4, "eval_batch_size": 16},
        "models": [{"name": str(real_model_dir), "tag": "smollm2", "dtype": "float32"}],
        "datasets": [{"name": "Long_Term_Knowledge"}, {"name": "Commonsense_Causal"}],
        "evals": {
            "benchmarks": [{"name": "arc_easy", "limit": ITEMS}],
            "device": "cpu",
            "dataset_paths": {"arc_easy": str(real_benchmarks_dir / "arc_easy")},
        },
        "data": {"dir": "data", "train_size": ITEMS, "test_size": ITEMS},
        "finetune": {"max_samples": ITEMS, "max_length": 256, "dtype": "float32"},
        "extract": {"regions": ["top", "random"]},
        "aggregate": {"report_k": K, "bootstrap": 200},
    }
    (tmp_path / "config.yml").write_text(yaml.safe_dump(config))
    done = subprocess.run(
        [sys.executable, "-m", "benchprof", "run", "config.yml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "run: all stages done" in done.stdout

    layout = Layout(tmp_path / "outputs", "smollm2")
    with open(layout.profile_dir / "ais.csv") as f:
        rows = list(csv.DictReader(f))
    cells = {(r["ability"], r["benchmark"], r["region"]) for r in rows if r["benchmark"] == "arc_easy"}
    for ability in ("Long_Term_Knowledge", "Commonsense_Causal"):
        assert {(ability, "arc_easy", "top"), (ability, "arc_easy", "random")} <= cells

    n = math.floor(K * stored_parameters(real_model_dir))
    for region in ("top", "random"):
        with safe_open(str(layout.mask_file("Long_Term_Knowledge", K, region)), "pt") as f:
            assert all(".mlp." in name for name in f.keys())
            assert sum(f.get_slice(name).get_shape()[0] for name in f.keys()) == n

    ours = [json.loads(line) for line in layout.samples_file(Variant(), "arc_easy").read_text().splitlines()]
    cli_out = tmp_path / "cli"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    args = ["run", "--model", "hf", "--model_args", f"pretrained={real_model_dir},dtype=float32"]
    [tasks] = list((tmp_path / "outputs" / "tasks").iterdir())  # the one plan's folder
    args += ["--tasks", "benchprof_local_arc_easy", "--include_path", str(tasks)]
    args += ["--limit", str(ITEMS), "--log_samples", "--output_path", str(cli_out), "--batch_size", "16"]
    args += ["--device", "cpu"]
    cli = subprocess.run([sys.executable, "-m", "lm_eval", *args], capture_output=True, text=True, env=env)
    assert cli.returncode == 0, cli.stderr[-3000:]
    [samples_file] = list(cli_out.rglob("samples_benchprof_local_arc_easy_*.jsonl"))
    theirs = sorted((json.loads(line) for line in samples_file.read_text().splitlines()), key=lambda s: s["doc_id"])
    assert [s["doc_id"] for s in theirs] == [r["doc_id"] for r in ours] == list(range(ITEMS))
    for mine, cli_doc in zip(ours, theirs):
        assert (mine["acc"], mine["acc_norm"]) == (cli_doc["acc"], cli_doc["acc_norm"])
        cli_ll = [float(resp[0]) for resp in cli_doc["filtered_resps"]]
        assert max(abs(a - b) for a, b in zip(mine["loglikelihoods"], cli_ll)) < 1e-4


def test_the_real_tokenizer_s_chat_template_and_answer_tokens(real_llm):
    """Each real model's own chat template renders the importance pass's conversation (our system prompt, not its
    default one: SmolLM2's, or Qwen's "You are Qwen, created by Alibaba Cloud"), and `loss_on: answer` picks
    exactly the tokens of the answer text."""
    from transformers import AutoTokenizer

    from benchprof.core.prompts import SYSTEM_PROMPT, encode_record

    tokenizer = AutoTokenizer.from_pretrained(str(real_llm))
    records = [
        {"context": "Max owns a horse.", "question": "Who owns the horse?", "answer": "Max"},
        {"context": "", "question": "Which element has 90 protons in each atom?", "answer": "thorium"},
        {"context": "Val has 18 coins. Val gives 8 to Sam.", "question": "How many are left?", "answer": "10"},
    ]
    for record in records:
        ids, start, end = encode_record(tokenizer, record, ("context", "question", "answer"), 256)
        text = tokenizer.decode(ids)
        assert text.startswith(f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n<|im_start|>user\n")
        assert text.endswith(f"<|im_start|>assistant\nAnswer: {record['answer']}<|im_end|>\n")
        assert "SmolLM" not in text and "Qwen" not in text  # the template's default system prompt is replaced
        assert tokenizer.decode(ids[start:end]).strip() == record["answer"]


def test_tied_embeddings_count_once_and_ablation_restores_bit_identically(real_model_dir):
    """k's denominator counts the tied input/output embedding once; zeroing a region of the real model in
    place touches exactly its weights and restores every tensor bit for bit, the tie intact."""
    import torch

    from benchprof.core.modeling import eligible_names, load_model, num_layers, total_params
    from benchprof.stages.damage import ablated

    model, _ = load_model(str(real_model_dir), dtype="float32")
    assert total_params(model) == 134_515_008
    params = dict(model.named_parameters())
    eligible = eligible_names(params, "mlp", num_layers(model))
    assert "lm_head.weight" not in eligible and sum(params[n].numel() for n in eligible) == 79_626_240
    before = {name: p.detach().clone() for name, p in model.state_dict().items()}
    generator = torch.Generator().manual_seed(0)
    region = {
        name: torch.randperm(params[name].numel(), generator=generator)[:1000].sort().values for name in eligible[:3]
    }
    with ablated(model, region):
        for name, indices in region.items():
            assert torch.all(params[name].detach().reshape(-1)[indices] == 0)
        changed = [n for n, p in model.state_dict().items() if not torch.equal(p, before[n])]
        assert sorted(changed) == sorted(region)
    assert all(torch.equal(p, before[n]) for n, p in model.state_dict().items())
    assert model.lm_head.weight is model.model.embed_tokens.weight


def test_the_frontier_scores_every_item_as_lm_eval_does_on_a_real_model(real_model_dir, tmp_path):
    """On SmolLM2 and 40 Analogical_Reasoning test items, the frontier's scorer (frontier.score, the one the planted
    effects read too) gives every item the acc_norm that lm-eval's task machinery gives it (document_scores, the
    pipeline's evaluation), and its stored log-likelihoods recompute it. The v1 normaliser, which counted the
    space before each option, scores at least one of these items otherwise: a test that tells the two apart."""
    import numpy as np

    from benchprof.abilities import generate
    from benchprof.core.loader import parse_config
    from benchprof.core.modeling import load_model
    from benchprof.lab.frontier import score
    from benchprof.stages.choices import mc_metrics, option_chars
    from benchprof.stages.data import write_jsonl
    from benchprof.stages.evaluate import document_scores
    from benchprof.stages.prefix_scorer import SharedPrefixLM
    from benchprof.stages.tasks import benchmark_tasks

    ability = "Analogical_Reasoning"
    test = generate(ability, 0, 40, seed=0)[1]
    write_jsonl(tmp_path / "data" / "train.jsonl", test[:4])
    write_jsonl(tmp_path / "data" / "test.jsonl", test)
    raw = {
        "settings": {"output_dir": str(tmp_path / "out")},
        "models": [{"name": str(real_model_dir)}],
        "datasets": [{"name": ability, "path": str(tmp_path / "data")}],
        "evals": {"benchmarks": [ability]},
    }
    cfg = parse_config(raw, tmp_path / "config.yml")
    tasks, manager = benchmark_tasks(cfg, [ability], str(tmp_path / "config.yml"))
    model, tok = load_model(str(real_model_dir), dtype="float32")
    pipeline = document_scores(
        SharedPrefixLM(pretrained=model, tokenizer=tok, batch_size=8), tasks, None, manager, 0, "acc_norm"
    )
    frontier = score(model, tok, {ability: test})[ability]
    assert frontier["acc_norm"] == pipeline[ability].tolist()
    labels = [r["label"] for r in test]
    assert mc_metrics(frontier["loglik"], option_chars(test), labels)[1].tolist() == frontier["acc_norm"]
    with_space = [[n + 1 for n in item] for item in option_chars(test)]
    assert (mc_metrics(frontier["loglik"], with_space, labels)[1] != np.array(frontier["acc_norm"])).any()
