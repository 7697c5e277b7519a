"""How well each score recovers the planted regions of a planted model (docs/research/validation.md).

Reads the planted sets R_a from the model folder (planted.json, planted/<ability>.safetensors), writes
one config per `finetune.loss_on` (all, answer) and runs the real stages through the CLI: `benchprof
data`, `benchprof finetune`, then per score and selection `benchprof extract --score <score> --selection
<selection>` (exact, and chunked with extract.chunk_size = --chunk-size; top and random regions at k =
|R_a| / total parameters and the other --ks). For every (loss, score, selection, k) and ability it
measures, against R_a: weight-level and neuron-level precision and recall of the top region, its share
in tensors without R_a, the AUROC of R_a's weights in the score order (selection-independent), the mean
Jaccard between abilities' top regions; and at k = |R_a| / total the AIS known answer: the AIS matrix of
zeroing each top region (acc_norm on the abilities' test splits, scored in process like lm-eval's
multiple-choice), its diagonal dominance, the own-split AIS of the top region against benchprof's random
region of the same size.

    python scripts/validate.py --model /tmp/demo-planted          # a planted model folder (plant_real.py apply)
    python scripts/validate.py --model /tmp/p --out /tmp/v --scores importance,entropy
    python scripts/validate.py --model /tmp/p --selections exact --no-ais   # the quickest
    python scripts/validate.py --combine OUT0,OUT1,OUT2 --out OUT  # builds combined (validate_report.py)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from benchprof.core.layout import Layout, data_file
from benchprof.core.regions import Region, read_region
from benchprof.lab.planted import load_planted
from benchprof.lab.validate_report import SCORES, SELECTIONS, combine, markdown, option
from benchprof.lab.validation import (
    auroc,
    jaccard_pairs,
    neuron_counts,
    neuron_set,
    positions_region,
    precision_recall,
    region_mask,
    set_precision_recall,
    share_outside,
    shared_count,
    size,
    top_n,
    top_neurons,
)
from benchprof.stages.choices import item_scores

TAG = "planted"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--model",
        default="",
        help="(required unless --combine) a planted model folder, or several builds (comma-separated): each into "
        "OUT/build-<i>, then combined",
    )
    p.add_argument("--combine", default="", help="comma-separated --out folders of earlier runs: only combine them")
    p.add_argument("--out", default="/tmp/benchprof-validate")
    p.add_argument("--scores", default=",".join(SCORES))
    p.add_argument("--loss", default="all,answer", help="finetune.loss_on values")
    p.add_argument("--ks", default="0.5,1,2", help="k values as multiples of |R_a| / total parameters")
    p.add_argument("--selections", default=",".join(SELECTIONS), help="extract.selection values")
    p.add_argument(
        "--chunk-size",
        type=int,
        default=4096,
        help="extract.chunk_size for chunked (default 4096: a sixth of one of the planted model's MLP tensors)",
    )
    p.add_argument("--max-samples", type=int, default=300, help="finetune.max_samples")
    p.add_argument("--no-ais", action="store_true", help="skip the AIS known answer (no model evaluation)")
    p.add_argument("--metric", choices=("acc", "acc_norm"), default="acc", help="per-item score of the AIS")
    p.add_argument(
        "--benchmarks",
        default="",
        help="real benchmarks of --config (e.g. arc_easy,piqa) scored too for every AIS region set (a real model; "
        "their task files are written under the config's output_dir)",
    )
    p.add_argument("--config", default="configs/smollm2.yml", help="where --benchmarks are defined")
    p.add_argument("--limit", type=int, default=100, help="documents per --benchmarks benchmark")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="auto", help="where the AIS scoring and AUROC run (auto: cuda if available)")
    args = p.parse_args(argv)
    if not args.model and not args.combine:
        p.error("--model: give a planted model folder (plant_real.py apply writes one)")
    if args.benchmarks and args.no_ais:
        p.error("--benchmarks scores the AIS known answer's regions; leave out --no-ais")
    return args


def k_for(n: int, total: int) -> float:
    """A short k with floor(k * total) == n (extract's region size)."""
    for digits in range(4, 17):
        k = float(f"{(n + 0.5) / total:.{digits}g}")
        if math.floor(k * total) == n:
            return k
    raise ValueError(f"no k gives {n} of {total}")


def held_out_data(out: Path, info: dict[str, Any], n: int) -> dict[str, Path]:
    """For abilities the planting drew from benchprof's generators: a data folder whose train split holds `n`
    items disjoint from the planting items (the generator's next draws after the planting's train split, same
    seed) and whose test split is the planted model's own test split. Importance is then measured on items
    the planted neurons never saw, as a user's diagnostic items would be. (An invented ability's `benchprof
    data` split is already disjoint: its probe split.)"""
    from benchprof.abilities import INVENTED, generate
    from benchprof.stages.data import write_jsonl

    s = info["settings"]
    folders = {}
    for a in s["abilities"]:
        if a in INVENTED:
            continue
        planted_train, test = generate(a, s["train_size"], s["test_size"], s["data_seed"])
        wider, same_test = generate(a, s["train_size"] + n, s["test_size"], s["data_seed"])
        assert same_test == test, f"{a}: the generator's test split moved with train_size"
        seen = {(r["context"], r["question"]) for r in planted_train}
        probe = [r for r in wider if (r["context"], r["question"]) not in seen][:n]
        folder = out / "held-out" / a
        write_jsonl(folder / "train.jsonl", probe)
        write_jsonl(folder / "test.jsonl", test)
        folders[a] = folder
    return folders


def write_config(
    out: Path,
    model: Path,
    info: dict[str, Any],
    loss_on: str,
    ks: list[float],
    max_samples: int,
    chunk_size: int,
    held_out: dict[str, Path],
) -> Path:
    s = info["settings"]
    abilities = list(s["abilities"])
    cfg = {
        "settings": {
            "cuda_visible_devices": "",
            "train_batch_size": 16,
            "eval_batch_size": 32,
            "k_values": ks,
            "front_removal": 0,
            "back_removal": 0,
            "output_dir": str(out / loss_on),
            "seed": 1234,
        },
        "models": [{"name": str(model), "tag": TAG, "dtype": "float32"}],
        "datasets": [{"name": a, "path": str(held_out[a])} if a in held_out else {"name": a} for a in abilities],
        "evals": {"benchmarks": abilities, "num_fewshot": [0] * len(abilities), "backend": "hf", "device": "cpu"},
        "data": {
            "dir": str(out / "data"),
            "train_size": s["train_size"],
            "test_size": s["test_size"],
            "seed": s["data_seed"],
        },
        "finetune": {
            "scope": "mlp",
            "loss_on": loss_on,
            "max_samples": max_samples,
            "max_length": 256,
            "dtype": "float32",
        },
        "extract": {"selection": "exact", "chunk_size": chunk_size, "regions": ["top", "random"], "random_seed": 0},
        "aggregate": {"report_k": ks[0], "bootstrap": 200},
    }
    path = out / f"{loss_on}.yml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def cli(*args: str) -> None:
    started = time.time()
    result = subprocess.run([sys.executable, "-m", "benchprof", *args], capture_output=True, text=True)
    if result.returncode:
        sys.exit(f"benchprof {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    last = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    print(f"  benchprof {' '.join(args)}: {time.time() - started:.0f}s  {last}", flush=True)


def score_vector(layout: Layout, ability: str, abilities: list[str], score: str) -> tuple[Any, list[str], list[int]]:
    """S_a over every eligible weight (concatenated in extract's order), the tensor names and sizes."""
    import torch

    from benchprof.stages.weight_scores import open_specific_scores

    others = {b: layout.importance_file(b) for b in abilities if b != ability}
    scores = open_specific_scores(score, layout.importance_file(ability), others)
    values = torch.cat([v for _, v in scores])
    return values, list(scores.names), list(scores.numels)


def ais_matrix(
    metric: int,
    model: Any,
    tok: Any,
    tests: dict[str, list[dict[str, Any]]],
    regions: dict[str, Region],
    original: dict[str, Any],
) -> dict[str, dict[str, float]]:
    """AIS (acc_norm) of each benchmark when each ability's region is zeroed."""
    from benchprof.stages.damage import ablated
    from benchprof.stats.impact import impact_score

    out: dict[str, dict[str, float]] = {}
    for a, region in regions.items():
        with ablated(model, region):
            out[a] = {
                b: float(impact_score(original[b].mean(), item_scores(model, tok, recs)[metric].mean()))
                for b, recs in tests.items()
            }
    return out


def real_tasks(args: argparse.Namespace) -> tuple[Any, dict[str, str], Any] | None:
    """(config, {benchmark: task}, TaskManager) of --benchmarks in --config, or None without --benchmarks."""
    from benchprof.core.loader import load_config
    from benchprof.stages.tasks import benchmark_tasks

    names = [b for b in args.benchmarks.split(",") if b]
    if not names:
        return None
    cfg = load_config(Path(args.config))
    return (cfg, *benchmark_tasks(cfg, names, args.config))


class RealBenchmarks:
    """The --benchmarks of a real model: each document's score scored by lm-eval through benchprof's scorer
    with the model as it is now, and the AIS of each ability's region on each benchmark."""

    def __init__(
        self, model: Any, tok: Any, benchmarks: tuple[Any, dict[str, str], Any], limit: int, metric: str, log: Path
    ) -> None:
        from benchprof.core.console import quiet
        from benchprof.stages.prefix_scorer import SharedPrefixLM

        self.cfg, self.tasks, self.manager = benchmarks
        self.model, self.limit, self.metric, self.log = model, limit, metric, log
        with quiet("validate benchmarks", [log]):
            self.lm = SharedPrefixLM(pretrained=model, tokenizer=tok, batch_size=16)
        self.original = self.scores()

    def scores(self) -> dict[str, Any]:
        from benchprof.core.console import quiet
        from benchprof.stages.evaluate import document_scores

        with quiet("validate benchmarks", [self.log]):  # lm-eval's bars and warnings go to the log
            return document_scores(self.lm, self.tasks, self.limit, self.manager, self.cfg.settings.seed, self.metric)

    def summary(self) -> dict[str, Any]:
        original = {b: float(v.mean()) for b, v in self.original.items()}
        return {"names": list(self.tasks), "limit": self.limit, "original": original}

    def matrix(self, regions: dict[str, Region]) -> dict[str, dict[str, float]]:
        """{ability: {benchmark: AIS}} of zeroing each ability's region."""
        from benchprof.stages.damage import ablated
        from benchprof.stats.impact import impact_score

        out = {}
        for a, region in regions.items():
            with ablated(self.model, region):
                after = self.scores()
            out[a] = {b: float(impact_score(self.original[b].mean(), after[b].mean())) for b in self.tasks}
        return out


def summarize_ais(matrix: dict[str, dict[str, float]], random_own: dict[str, float]) -> dict[str, Any]:
    from benchprof.stats.impact import diagonal_dominance

    dominance = diagonal_dominance(matrix)
    own = [matrix[a][a] for a in matrix]
    off = [matrix[a][b] for a in matrix for b in matrix[a] if b != a]
    return {
        "diagonal": sum(bool(v) for v in dominance.values()),
        "own_top": float(np.mean(own)),
        "own_random": float(np.mean([random_own[a] for a in matrix])),
        "off_diagonal": float(np.mean(off)),
        "matrix": matrix,
    }


def recovery_row(
    loss: str,
    score: str,
    selection: str,
    k: float,
    ability: str,
    top: Region,
    area: float,
    planted: dict[str, Region],
    shapes: dict[str, tuple[int, ...]],
    total: int,
    base_n: int,
) -> dict[str, Any]:
    """One row of the recovery table: `top` (ability's region at k) against the planted sets."""
    truth = neuron_set(planted[ability], shapes)
    p_w, r_w = precision_recall(top, planted[ability])
    p_n, r_n = set_precision_recall(neuron_set(top, shapes), truth)
    strongest = top_neurons(neuron_counts(top, shapes), len(truth))
    others = sum(shared_count(top, planted[b]) for b in planted if b != ability) / max(1, size(top))
    return {
        "loss_on": loss,
        "score": score,
        "selection": selection,
        "k": k,
        "k_multiple": round(k * total / base_n, 3),
        "ability": ability,
        "n": size(top),
        "precision": p_w,
        "recall": r_w,
        "neuron_precision": p_n,
        "neuron_recall": r_n,
        "top_neuron_precision": len(strongest & truth) / len(truth),
        "in_other_planted": others,
        "outside_tensors": share_outside(top, planted[ability]),
        "auroc": area,
    }


def add_jaccard(
    rows: list[dict[str, Any]],
    loss: str,
    score: str,
    selection: str,
    k: float,
    tops: dict[str, Region],
    eligible: int,
) -> None:
    """The mean Jaccard between the abilities' top regions (and its chance level) into their rows."""
    pairs = jaccard_pairs(tops, eligible)
    for r in rows:
        if option(r) == (loss, score, selection, k):
            r["jaccard_mean"] = float(np.mean([p[2] for p in pairs]))
            r["jaccard_chance"] = float(np.mean([p[3] for p in pairs]))


def main(argv: list[str] | None = None) -> None:
    """The study's command line (scripts/validate.py): one build, several builds, or --combine."""
    args = parse_args(argv)
    out = Path(args.out).resolve()
    if args.combine:
        combine([Path(f) for f in args.combine.split(",")], out)  # as given: combined.md names them so
        return
    models = [Path(m).resolve() for m in args.model.split(",")]
    if len(models) == 1:
        validate_one(args, models[0], out)
        return
    folders = [out / f"build-{i}" for i in range(len(models))]
    for model_dir, folder in zip(models, folders, strict=True):
        validate_one(args, model_dir, folder)
    combine(folders, out)


def validate_one(args: argparse.Namespace, model_dir: Path, out: Path) -> None:
    """Every stage and comparison for one planted model: validation.json and validation.md in `out`."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")
    import torch

    from benchprof.core.modeling import load_model, pick_device
    from benchprof.stages.data import read_jsonl
    from benchprof.stages.weight_scores import open_scores

    torch.set_num_threads(args.threads)
    device = pick_device(args.device, "--device")
    benchmarks = real_tasks(args)  # a benchmark the config lacks fails here, before anything is written
    started = time.time()
    out.mkdir(parents=True, exist_ok=True)
    planted, info = load_planted(model_dir)
    abilities = list(info["settings"]["abilities"])
    total = int(info["total_params"])
    n_planted = {a: size(planted[a]) for a in abilities}
    multiples = [float(x) for x in args.ks.split(",")]
    base_n = n_planted[abilities[0]]
    ks = [k_for(int(m * base_n), total) for m in multiples]
    k_exact = k_for(base_n, total)
    losses = [x for x in args.loss.split(",") if x]
    scores = [x for x in args.scores.split(",") if x]
    selections = [x for x in args.selections.split(",") if x]
    held_out = held_out_data(out, info, args.max_samples)
    configs = {
        loss: write_config(out, model_dir, info, loss, ks, args.max_samples, args.chunk_size, held_out)
        for loss in losses
    }
    print(
        f"validate: {model_dir.name}, |R_a| = {base_n} weights (k = {k_exact}), k values {ks}, selections "
        f"{selections} (chunk_size {args.chunk_size}), out {out}"
    )
    cli("data", str(configs[losses[0]]))
    for loss in losses:
        cli("finetune", str(configs[loss]))

    model, tok = load_model(str(model_dir), dtype="float32", device=device)
    shapes = {n: tuple(p.shape) for n, p in model.named_parameters()}
    truth_neurons = {a: neuron_set(planted[a], shapes) for a in abilities}
    tests = {a: read_jsonl(data_file(held_out.get(a, out / "data" / a), "test")) for a in abilities}
    which = 0 if args.metric == "acc" else 1
    original = {b: item_scores(model, tok, recs)[which] for b, recs in tests.items()} if not args.no_ais else {}
    rows: list[dict[str, Any]] = []
    ais: dict[str, Any] = {}
    random_own: dict[str, float] = {}
    real = None
    if benchmarks is not None:
        real = RealBenchmarks(model, tok, benchmarks, args.limit, args.metric, out / "benchmarks.log")

    def known_answer(regions: dict[str, Region], matrix: dict[str, dict[str, float]] | None = None) -> dict[str, Any]:
        if matrix is None:
            matrix = ais_matrix(which, model, tok, tests, regions, original)
        summary = summarize_ais(matrix, random_own)
        if real is not None:
            summary["benchmarks"] = real.matrix(regions)
        return summary

    if not args.no_ais:
        layout = Layout(Path(out / losses[0]), TAG)
        cli("extract", str(configs[losses[0]]), "--score", "importance", "--selection", "exact", "--k", str(k_exact))
        randoms = {a: read_region(layout.mask_file(a, k_exact, "random"))[0] for a in abilities}
        random_matrix = ais_matrix(which, model, tok, tests, randoms, original)
        random_own = {a: random_matrix[a][a] for a in abilities}
        ais["planted"] = known_answer(planted)
        ais["random"] = known_answer(randoms, random_matrix)
    # baseline that knows nothing of the abilities: the largest |θ| (extract's order and tie-break)
    reference = open_scores(Layout(Path(out / losses[0]), TAG).importance_file(abilities[0]))
    params = dict(model.named_parameters())
    magnitude = torch.cat([params[n].detach().abs().reshape(-1).float() for n in reference.names]).cpu()
    magnitude_tops = {
        k: positions_region(top_n(magnitude, math.floor(k * total)), reference.names, reference.numels) for k in ks
    }
    for a in abilities:
        area = auroc(magnitude, region_mask(planted[a], reference.names, reference.numels), device)
        for k in ks:
            top = magnitude_tops[k]
            rows.append(recovery_row("-", "magnitude", "exact", k, a, top, area, planted, shapes, total, base_n))
    for k in ks:  # one region for every ability: Jaccard 1
        add_jaccard(
            rows, "-", "magnitude", "exact", k, {a: magnitude_tops[k] for a in abilities}, int(info["eligible"])
        )
    for loss in losses:
        layout = Layout(Path(out / loss), TAG)
        for score in scores:
            areas = {}  # the score order over all eligible weights: the same for every selection
            for a in abilities:
                values, names, numels = score_vector(layout, a, abilities, score)
                areas[a] = auroc(values, region_mask(planted[a], names, numels), device)
            for selection in selections:  # extract writes the masks in place: read them before the next one
                cli("extract", str(configs[loss]), "--score", score, "--selection", selection)
                tops: dict[float, dict[str, Region]] = {k: {} for k in ks}
                for a in abilities:
                    for k in ks:
                        top = read_region(layout.mask_file(a, k, "top"))[0]
                        tops[k][a] = top
                        rows.append(
                            recovery_row(loss, score, selection, k, a, top, areas[a], planted, shapes, total, base_n)
                        )
                for k in ks:
                    add_jaccard(rows, loss, score, selection, k, tops[k], int(info["eligible"]))
                if not args.no_ais:
                    ais[f"{loss}/{score}/{selection}"] = known_answer(tops[k_exact])
                print(f"  {loss}/{score}/{selection} done ({time.time() - started:.0f}s)", flush=True)
    n_neurons = sum(shape[0] for name, shape in shapes.items() if name.endswith("gate_proj.weight"))
    result = {
        "model": Path(model_dir).name,  # the folder's name: a result records no path of the machine it was made on
        "planted_weights": n_planted,
        "k_exact": k_exact,
        "ks": ks,
        "selections": selections,
        "chunk_size": args.chunk_size,
        "chance_precision": {
            "weights": base_n / int(info["eligible"]),
            "neurons": len(truth_neurons[abilities[0]]) / n_neurons,
        },
        "metric": args.metric,
        "benchmarks": real.summary() if real is not None else {},
        "rows": rows,
        "ais": ais,
    }
    (out / "validation.json").write_text(json.dumps(result, indent=1) + "\n")
    table = markdown(result, abilities)
    (out / "validation.md").write_text(table + "\n")
    print(table)
    print(f"validate: {time.time() - started:.0f}s; {out / 'validation.md'}, {out / 'validation.json'}")
