"""Train benchprof's demo model: a small Llama that really has (some of) the ten abilities.

The training text comes from benchprof's own ability generators (the train splits that
`configs/demo.yml` generates, so the demo's test splits are never seen) and, for the knowledge
abilities, the statements of the fact tables they draw on. Each item is shown in both formats the
pipeline uses: the lm-eval prompt (`Context/Question/Answer:` + the option text) and the chat format
of the importance pass. Loss is next-token cross-entropy with answer tokens up-weighted.

Deterministic from --seed on a fixed thread count: rerunning reproduces the shipped weights.

With --init-from the model and tokenizer are loaded from a folder instead of built (the size options
are then ignored) and trained further: a second, related model for the comparison across models,
e.g. the demo model trained on another mixture of abilities (docs/analyses.md, "Across models").

    python scripts/train_demo_model.py                      # writes benchprof/assets/demo-model (lab/demo_model.py)
    python scripts/train_demo_model.py --steps 200 --out /tmp/m   # a quick smoke run
    python scripts/train_demo_model.py --init-from benchprof/assets/demo-model \
        --abilities Quantitative_Reasoning,Long_Term_Knowledge,Semantic_Relationship \
        --steps 300 --lr 1e-3 --seed 1 --out outputs/models/demo-further   # configs/demo_two_models.yml
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from benchprof.abilities import fact_texts, generate
from benchprof.core.loader import load_config
from benchprof.core.modeling import save_model
from benchprof.core.prompts import chat_messages, eval_prompt
from benchprof.lab.tinymodel import build_model, train_tokenizer
from benchprof.lab.training import Example, batch_tensors, cosine_schedule, weighted_loss
from benchprof.stages.choices import item_scores

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

ROOT = Path(__file__).resolve().parents[2]  # the repository: configs/ and benchprof/assets/


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--config",
        default=str(ROOT / "configs" / "demo.yml"),
        help="demo config: its data section decides the train/test splits",
    )
    p.add_argument("--out", default=str(ROOT / "benchprof" / "assets" / "demo-model"))
    p.add_argument(
        "--init-from",
        default="",
        help="a model folder (e.g. benchprof/assets/demo-model) to train further, its tokenizer kept; "
        "default: a new model and tokenizer",
    )
    p.add_argument("--abilities", default="", help="comma-separated; default: every ability")
    p.add_argument("--steps", type=int, default=3500)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--intermediate", type=int, default=688)
    p.add_argument("--vocab", type=int, default=1000)
    p.add_argument("--max-len", type=int, default=160)
    p.add_argument("--answer-weight", type=float, default=4.0, help="loss weight of answer tokens")
    p.add_argument("--fact-repeats", type=int, default=4, help="times each knowledge statement is shown per epoch")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--heldout",
        type=int,
        default=200,
        help="items per ability held out of training (the first ones generated); the demo's "
        "test split (data.test_size <= this) is drawn from them, so it is never trained on",
    )
    p.add_argument("--eval-items", type=int, default=200, help="held-out items per ability for the final report")
    return p.parse_args(argv)


def build_examples(
    abilities: list[str],
    splits: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]],
    tok: PreTrainedTokenizerBase,
    rng: random.Random,
    fact_repeats: int,
) -> list[Example]:
    """(token ids, index where the answer starts) for every training example."""
    examples: list[Example] = []
    for ability in abilities:
        for record in splits[ability][0]:
            prompt = eval_prompt(record)
            p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
            a_ids = tok(" " + record["answer"], add_special_tokens=False)["input_ids"]
            # no bos: lm-eval scores causal models without one
            examples.append((p_ids + a_ids + [tok.eos_token_id], len(p_ids)))
            messages = chat_messages(record)
            full = tok.apply_chat_template(messages, tokenize=False)
            head = tok.apply_chat_template(messages[:-1], tokenize=False, add_generation_prompt=True)
            ids = tok(full, add_special_tokens=False)["input_ids"]
            examples.append((ids, len(tok(head, add_special_tokens=False)["input_ids"])))
        for fact in fact_texts(ability) * fact_repeats:
            ids = tok(fact, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
            examples.append((ids, 1))  # a statement is all "answer": every token is the fact
    rng.shuffle(examples)
    return examples


def train(
    model: torch.nn.Module, examples: list[Example], tok: PreTrainedTokenizerBase, args: argparse.Namespace
) -> None:
    """AdamW over the examples in order (wrapping around), answer tokens weighted, cosine schedule."""
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, cosine_schedule(args.steps))
    model.train()
    started, pos = time.time(), 0
    for step in range(args.steps):
        if pos + args.batch_size > len(examples):
            pos = 0
        batch = examples[pos : pos + args.batch_size]
        pos += args.batch_size
        input_ids, weights = batch_tensors(batch, tok.pad_token_id, args.max_len, args.answer_weight)
        loss = weighted_loss(model, input_ids, weights)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        if step % 100 == 0 or step == args.steps - 1:
            print(
                f"step {step:5d}  loss {loss.item():.3f}  lr {sched.get_last_lr()[0]:.2e}  "
                f"{time.time() - started:.0f}s",
                flush=True,
            )
    model.eval()


def accuracy(model: torch.nn.Module, tok: PreTrainedTokenizerBase, records: list[dict[str, Any]]) -> float:
    """Multiple-choice accuracy scored like lm-eval's `acc` (planted.item_scores)."""
    return float(item_scores(model, tok, records)[0].mean())


def main(argv: list[str] | None = None) -> None:
    """scripts/train_demo_model.py: train (or train further) and save the demo model with its report."""
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    cfg = load_config(args.config)
    from benchprof.abilities import ABILITIES

    abilities = [a for a in args.abilities.split(",") if a] or list(ABILITIES)
    # `benchprof data` draws the demo's test split as the first data.test_size items of the same
    # (seed) sequence, so holding out the first `heldout` >= test_size items keeps it unseen, and the
    # training set does not change when the demo's test_size does (the shipped model used 200)
    heldout = max(args.heldout, cfg.data.test_size)
    # report on the demo's profiled abilities too: training further on a few may change the others
    reported = abilities + [d.name for d in cfg.datasets if d.name in ABILITIES and d.name not in abilities]
    splits = {a: generate(a, cfg.data.train_size, heldout, cfg.data.seed) for a in reported}
    if args.init_from:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(args.init_from)
        model = AutoModelForCausalLM.from_pretrained(args.init_from, dtype=torch.float32)
        model.eval()
        before = {a: accuracy(model, tok, splits[a][1][: args.eval_items]) for a in reported}
    else:
        corpus = [eval_prompt(r) + " " + r["answer"] for a in abilities for r in splits[a][0]]
        corpus += [f for a in abilities for f in fact_texts(a)]
        corpus += ["You are a helpful assistant.", "Context: Question: Answer:"]
        tok = train_tokenizer(corpus, vocab_size=args.vocab)
        model = build_model(
            tok,
            hidden_size=args.hidden,
            num_layers=args.layers,
            num_heads=args.heads,
            intermediate_size=args.intermediate,
            max_positions=max(256, args.max_len),
            seed=args.seed,
        )
        before = {}
    examples = build_examples(abilities, splits, tok, rng, args.fact_repeats)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params / 1e6:.2f}M parameters, vocab {len(tok)}; {len(examples)} training examples")
    started = time.time()
    train(model, examples, tok, args)
    accuracies: dict[str, float] = {}
    report = {
        "seconds": round(time.time() - started),
        "parameters": n_params,
        # paths as their names: a result records no path of the machine it was made on
        "args": {k: Path(v).name if k in ("config", "out") and v else v for k, v in vars(args).items()},
        "accuracy": accuracies,
    }
    if before:
        report["accuracy_before"] = {a: round(acc, 3) for a, acc in before.items()}
    for a in reported:
        acc = accuracy(model, tok, splits[a][1][: args.eval_items])
        accuracies[a] = round(acc, 3)
        was = f"  (was {before[a]:.3f})" if a in before else ""
        trained = "" if a in abilities else "  not trained on"
        print(f"  {a:24s} test accuracy {acc:.3f}{was}  (chance 0.25){trained}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    save_model(model, tok, out)
    (out / "training_report.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"saved to {out} after {report['seconds']}s of training")
