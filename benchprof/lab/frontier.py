"""The effectiveness–specificity frontier: for each neuron-selection option and region size, how much zeroing
ability a's region costs a's own test split, how much it costs the other abilities' splits, and how much a
random region of the same size costs (docs/frontier.md).

A region here is a set of whole MLP neurons (neuron j of layer l: row j of gate_proj and up_proj, column j of
down_proj, as in knowledge-neuron and language-specific-neuron work), chosen by an attribution on neuron
outputs computed over the ability's *train* split and evaluated on the *test* splits (disjoint items):

    A_a(l, j) = Σ_items Σ_positions  h_lj · ∂ log P(correct option) / ∂ h_lj

h_lj the neuron's activation (the input of down_proj), P the softmax over the options of their per-character
log-likelihoods (what lm-eval's acc_norm ranks). −A is the first-order change of the objective when the
neuron is zeroed, so a large A marks a neuron the right answer leans on. Options (`FRONTIER_SCORES`):

- `act_grad`: the mean of A_a over a's train items (effective: what a's answers lean on most);
- `act_grad_t`: its t statistic over items (neurons every item leans on, not a few items a lot);
- `act_grad_contrast`: t_a − max_{b≠a} t_b over the other abilities of the contrast set (specific: what a
  leans on and no other ability does). The contrast set is every ability of the config by default, scored or
  not: an ability the model is at chance on still shows which neurons every prompt of the format leans on.
- `act_contrast`, `act_grad_general`, `act_general`: the activation contrast and the two scores held against
  general text the model samples itself (stages/neurons.py, whose module docstring gives every formula);
- `act_grad_contrast_iter`: act_grad_contrast chosen in rounds, re-scored with the neurons chosen so far zeroed
  (neurons.iterative_contrast; each region's choice kept under frontier/act_grad_contrast_iter/).

Every (option, ability, size) region and `draws` random regions per size are zeroed in turn and the test
splits scored in process (acc_norm as lm-eval's multiple-choice scores it, planted.item_scores). Results are
appended line by line to frontier/evaluations.jsonl and reused by a rerun; frontier.csv, frontier.md and
frontier.png summarise them (frontier_report.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchprof import BenchprofError
from benchprof.core.config import NEURON_SCORES
from benchprof.core.storage import atomic_path, write_text
from benchprof.lab.frontier_report import EXECUTION, GROWS, FrontierPlan
from benchprof.stages.neurons import (
    FRONTIER_SCORES,
    GENERAL,
    ITERATIVE,
    ITERATIVE_ROUNDS,
    STATISTICS,
    Neurons,
    general_statistic,
    general_text,
    iterative_contrast,
    model_neurons,
    neuron_ids_region,
    neuron_scores,
    random_neurons,
    reads_general,
    statistic_of,
    top_neurons,
)

if TYPE_CHECKING:
    import numpy as np
    import torch
    from numpy.typing import NDArray
    from transformers import PreTrainedTokenizerBase

    from benchprof.core.config import Config

RANDOM = "random"


def read_split(plan: FrontierPlan, ability: str, split: str, n: int) -> list[dict[str, Any]]:
    """The first n records of an ability's split (data.read_jsonl, each record checked), refused in one line
    when the file is missing."""
    from benchprof.core.layout import data_file
    from benchprof.stages.data import read_jsonl

    path = data_file(plan.data_dir / ability, split)
    if not path.is_file():
        raise BenchprofError(f"frontier: {path}: not found; run `benchprof data` for {ability} first")
    return read_jsonl(path)[:n]


def evaluations(path: Path) -> Iterator[dict[str, Any]]:
    """The records of evaluations.jsonl written so far (a half-written last line, from a kill, is skipped)."""
    if not path.is_file():
        return
    for line in path.read_text().splitlines():
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            continue


def variants(
    plan: FrontierPlan,
    neurons: Neurons,
    statistics: dict[str, dict[str, NDArray[np.float32]]],
    iterative: dict[tuple[str, int], list[int]],
) -> Iterator[tuple[str, str, int, int, list[int]]]:
    """(option, ability or draw name, size, draw, neuron ids) of every region the plan measures; `statistics`:
    per statistic (neurons.statistic_of), every ability's values; `iterative`: the iterative selection of each
    (ability, size) not yet scored (iterative_selections)."""
    for option in plan.options:
        for ability in plan.abilities:
            scores = neuron_scores(statistics[statistic_of(option)], ability, option)
            for size in plan.sizes:
                if option != ITERATIVE:
                    yield option, ability, size, 0, top_neurons(scores, size)
                elif (ability, size) in iterative:
                    yield option, ability, size, 0, sorted(iterative[(ability, size)])
    for size in plan.sizes:
        for draw in range(plan.draws):
            yield (
                RANDOM,
                f"draw{draw}",
                size,
                draw,
                random_neurons(neurons.count, size, plan.seed * 1000 + size * 10 + draw),
            )


def cached(path: Path, compute: Callable[..., NDArray[np.float32]], *args: Any) -> NDArray[np.float32]:
    """compute(*args), read from its .npy file, or computed and written there first (storage.atomic_path: a kill
    leaves no half-written file) when missing."""
    import numpy as np

    if not path.is_file():
        values = compute(*args)
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            np.save(f, values)
    return np.load(path)


def train_statistics(
    plan: FrontierPlan, model: torch.nn.Module, tok: PreTrainedTokenizerBase
) -> dict[str, dict[str, NDArray[np.float32]]]:
    """Per statistic the plan's options read (neurons.statistic_of), each ability's values over its train items and,
    for the general-text options, general text's (key GENERAL), cached under the frontier's folder."""

    def of_ability(statistic: str, ability: str) -> NDArray[np.float32]:
        records = read_split(plan, ability, "train", plan.train_items)
        return STATISTICS[statistic](model, tok, records, plan.batch_items)

    statistics: dict[str, dict[str, NDArray[np.float32]]] = {}
    for statistic in dict.fromkeys(statistic_of(o) for o in plan.options):
        statistics[statistic] = {
            ability: cached(plan.out / statistic / f"{ability}.npy", of_ability, statistic, ability)
            for ability in dict.fromkeys(plan.abilities + plan.contrast)
        }
    general = list(dict.fromkeys(statistic_of(o) for o in plan.options if reads_general(o)))
    if general:
        texts_file = plan.out / "general" / "texts.json"
        if not texts_file.is_file():
            texts_file.parent.mkdir(exist_ok=True)
            write_text(texts_file, json.dumps(general_text(model, tok, plan.seed, plan.train_items)) + "\n")
        texts = json.loads(texts_file.read_text())
        for statistic in general:
            path = plan.out / statistic / f"{GENERAL}.npy"
            statistics[statistic][GENERAL] = cached(path, general_statistic, model, texts, statistic, plan.batch_items)
    return statistics


def iterative_selections(
    plan: FrontierPlan,
    model: torch.nn.Module,
    tok: PreTrainedTokenizerBase,
    attribution: dict[str, NDArray[np.float32]],
    done: set[tuple[str, str, int]],
) -> dict[tuple[str, int], list[int]]:
    """act_grad_contrast_iter's neurons for every (ability, size) the plan has not scored yet
    (neurons.iterative_contrast: up to three more attributions of the ability's train items per region), each kept
    in <frontier>/act_grad_contrast_iter/<ability>-<size>.json with its rounds, so that a killed run does not
    choose it again. A folder whose selections were made in another number of rounds is refused in one line: its
    regions (scored or not) are another option's."""
    from tqdm import tqdm

    if ITERATIVE not in plan.options:
        return {}
    folder = plan.out / ITERATIVE
    for kept in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if json.loads(kept.read_text()).get("rounds") != ITERATIVE_ROUNDS:
            raise BenchprofError(
                f"frontier: {kept} was chosen in other rounds than this benchprof's {ITERATIVE_ROUNDS}; "
                f"move {plan.out} aside (or set another settings.output_dir) to measure again"
            )
    todo = [(a, n) for a in plan.abilities for n in plan.sizes if (ITERATIVE, a, n) not in done]
    out = {}
    for ability, size in tqdm(todo, desc="iterative selection", unit="region", leave=False):
        path = folder / f"{ability}-{size}.json"
        if not path.is_file():
            records = read_split(plan, ability, "train", plan.train_items)
            chosen, _ = iterative_contrast(model, tok, attribution, ability, records, size, plan.batch_items)
            folder.mkdir(exist_ok=True)
            write_text(path, json.dumps({"rounds": ITERATIVE_ROUNDS, "neurons": chosen}) + "\n")
        out[(ability, size)] = json.loads(path.read_text())["neurons"]
    return out


def measure(plan: FrontierPlan) -> Path:
    """Measure the frontier of `plan` (resuming what frontier/evaluations.jsonl already holds) and write its
    summary; returns the folder."""
    import torch
    from tqdm import tqdm
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from benchprof.lab.frontier_report import write_report
    from benchprof.stages.damage import ablated

    torch.set_num_threads(plan.threads)
    started = time.time()
    plan.out.mkdir(parents=True, exist_ok=True)
    plan_file = plan.out / "plan.json"
    recorded = json.loads(plan_file.read_text()) if plan_file.is_file() else None
    if recorded is not None:
        if {k: v for k, v in recorded.items() if k not in EXECUTION + GROWS} != {
            k: v for k, v in plan.record().items() if k not in GROWS
        }:
            raise BenchprofError(
                f"frontier: {plan.out} holds another plan's results (plan.json); move it aside or set another "
                f"settings.output_dir"
            )
        # options and sizes add regions beside those measured: the plan grows to cover both
        plan = replace(
            plan,
            options=tuple(dict.fromkeys([*recorded["options"], *plan.options])),
            sizes=tuple(sorted({*recorded["sizes"], *plan.sizes})),
        )
    write_text(plan_file, json.dumps(plan.record(), indent=1) + "\n")
    tok = AutoTokenizer.from_pretrained(plan.model)
    model = AutoModelForCausalLM.from_pretrained(plan.model, dtype=torch.float32).eval()
    neurons = model_neurons(model)
    tests = {a: read_split(plan, a, "test", plan.test_items) for a in plan.abilities}

    statistics = train_statistics(plan, model, tok)
    log = plan.out / "evaluations.jsonl"
    done = {(r["option"], r["region"], r["size"]) for r in evaluations(log)}
    if ("original", "-", 0) not in done:
        append(
            log,
            {
                "option": "original",
                "region": "-",
                "size": 0,
                "neurons": [],
                "acc_norm": score(model, tok, tests),
            },
        )
    iterative = iterative_selections(plan, model, tok, statistics.get("attribution", {}), done)
    todo = [v for v in variants(plan, neurons, statistics, iterative) if (v[0], v[1], v[2]) not in done]
    for option, region, size, _draw, ids in tqdm(todo, desc="frontier", unit="region", leave=False):
        with ablated(model, neuron_ids_region(neurons, ids)):
            scores = score(model, tok, tests)
        append(log, {"option": option, "region": region, "size": size, "neurons": ids, "acc_norm": scores})
    files = write_report(plan, list(evaluations(log)), neurons.weights(1), neurons.total_params)
    written = ", ".join(map(str, files))
    print(f"frontier: {len(todo)} regions scored, {len(done)} reused; {written} ({time.time() - started:.0f}s)")
    return plan.out


def frontier(
    cfg: Config,
    ability: str | tuple[str, ...] | None = None,
    model: str | None = None,
    options: str | tuple[str, ...] = ",".join(NEURON_SCORES),
    sizes: str | tuple[int, ...] = "4,32,256,1024",
    draws: int = 3,
    train_items: int = 120,
    test_items: int = 100,
    threads: int | None = None,
) -> None:
    """The effectiveness–specificity frontier of neuron regions: for every option and size, each ability's
    region zeroed and every ability's test split scored, against random regions of the same size
    (docs/frontier.md). Writes outputs/<model>/frontier/; a rerun reuses every region already scored.

    Needs the abilities' data (`benchprof data`). Attribution reads the train splits, scoring the test splits.

    Arguments:
        cfg: the config (on the command line: the path of config.yml); its model, abilities and data.dir.
        ability: the abilities whose regions are measured (comma-separated); default every ability of `datasets:`.
            At least two. act_grad_contrast holds each against every ability of `datasets:`.
        model: the model (name or tag); default the config's first.
        options: neuron scores, comma-separated, of act_grad, act_grad_t, act_grad_contrast, act_contrast and the two
            against general text the model samples itself, act_grad_general and act_general, and act_grad_contrast
            chosen in four rounds of zeroing and re-scoring, act_grad_contrast_iter (neurons.py; three more
            attributions of the ability per region); a rerun may add options and sizes to those already measured.
        sizes: region sizes in neurons (each neuron is 3 x hidden weights), comma-separated.
        draws: random regions per size (at least 3 for a comparison with random).
        train_items: train items per ability the attribution reads.
        test_items: test items per ability scored.
        threads: torch threads; default settings.threads (automatic: the usable cores).
    """
    from benchprof.core.config import listed, select
    from benchprof.core.layout import Layout

    spec = cfg.selected_models(model)[0]
    abilities = select(ability, cfg.abilities(), "--ability")
    if len(abilities) < 2:
        raise BenchprofError("--ability: the frontier compares an ability's split with the others': give two or more")
    plan = FrontierPlan(
        model=cfg.model_source(spec)[0],
        data_dir=cfg.resolve(cfg.data.dir),
        abilities=tuple(abilities),
        contrast=tuple(cfg.abilities()),
        out=Layout(cfg.output_root, spec.tag).frontier_dir,
        options=tuple(select(options, FRONTIER_SCORES, "--options")),
        sizes=tuple(sorted({positive(v, "--sizes") for v in listed(sizes)})),
        draws=positive(draws, "--draws"),
        train_items=positive(train_items, "--train_items"),
        test_items=positive(test_items, "--test_items"),
        threads=positive(threads, "--threads") if threads is not None else cfg.settings.thread_count(),
        seed=cfg.settings.seed,
    )
    measure(plan)


def positive(value: object, flag: str) -> int:
    """An option's positive integer, refused in one line otherwise."""
    try:
        number = int(str(value))
    except ValueError:
        raise BenchprofError(f"{flag}: {str(value)[:40]!r} is not a whole number") from None
    if number < 1:
        raise BenchprofError(f"{flag}: must be at least 1, got {number}")
    return number


def score(
    model: torch.nn.Module, tok: PreTrainedTokenizerBase, tests: dict[str, list[dict[str, Any]]]
) -> dict[str, list[float]]:
    """acc_norm per item of every test split."""
    from benchprof.stages.choices import item_scores

    return {a: [float(x) for x in item_scores(model, tok, records)[1]] for a, records in tests.items()}


def append(path: Path, record: dict[str, Any]) -> None:
    """One line of evaluations.jsonl, flushed and synced: a kill loses at most the line being written."""
    import os

    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def planted_probe(
    folder: Path, items: int
) -> tuple[dict[str, Any], torch.nn.Module, PreTrainedTokenizerBase, dict[str, list[dict[str, Any]]]]:
    """A planted model folder (`plant_real.py apply`) as its recovery reads it: planted.json, the model in float32
    and its tokenizer, and the records: each planted ability's first `items` probe items (never planted), and
    each generated ability's first `items` train items (the contrast)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from benchprof.abilities import ABILITIES, splits
    from benchprof.abilities.invented import invented_splits
    from benchprof.lab.planted import planted_json_file

    info = json.loads(planted_json_file(folder).read_text())
    seed = int(info["settings"]["data_seed"])
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    records = {a: invented_splits(a, seed)["probe"][:items] for a in info["neurons"]}
    records.update({a: splits(a, items, 0, 1234)[0] for a in ABILITIES})
    return info, model, tok, records


def planted_truth(neurons: Neurons, layers: dict[str, list[int]]) -> NDArray[np.bool_]:
    """Which neuron ids (layer × intermediate + j) one planted ability lives in: planted.json's {layer: [j, ...]}."""
    import numpy as np

    truth = np.zeros(neurons.count, dtype=bool)
    for layer, js in layers.items():
        truth[[int(layer) * neurons.intermediate + j for j in js]] = True
    return truth


def planted_recovery(
    folder: Path, items: int = 120, threads: int = 1, options: Sequence[str] = FRONTIER_SCORES
) -> list[dict[str, Any]]:
    """How well each neuron score finds the neurons a planted model's abilities live in (planted.json of a
    folder `plant_real.py apply` wrote): per option and planted ability, the AUROC of its planted neurons in
    the score order and the precision of its top |R_a| neurons. Attribution on each planted ability's probe
    split (never planted) and, for the contrasts, on the ten generated abilities' train splits and on general text
    the planted model samples itself (neurons.general_text, seed 0). `options`: the neuron scores measured."""
    import numpy as np
    import torch

    from benchprof.lab.validation import auroc

    torch.set_num_threads(threads)
    info, model, tok, records = planted_probe(folder, items)
    neurons = model_neurons(model)
    read = list(dict.fromkeys(statistic_of(o) for o in options))
    statistics = {name: {a: STATISTICS[name](model, tok, r) for a, r in records.items()} for name in read}
    if any(reads_general(o) for o in options):
        texts = general_text(model, tok, 0, items)
        for name in read:
            statistics[name][GENERAL] = general_statistic(model, texts, name)
    rows = []
    for option in options:
        for ability, layers in info["neurons"].items():
            truth = planted_truth(neurons, layers)
            size = int(truth.sum())
            if option == ITERATIVE:  # its order: the neurons in the order chosen, then the last round's scores
                values = statistics["attribution"]
                top, scores = iterative_contrast(model, tok, values, ability, records[ability], size)
                scores[top] = scores[np.isfinite(scores)].max() + np.arange(size, 0, -1)  # first chosen highest
            else:
                scores = neuron_scores(statistics[statistic_of(option)], ability, option)
                top = top_neurons(scores, size)
            rows.append({
                "option": option, "ability": ability, "auroc": auroc(scores, truth),
                "top_neuron_precision": float(truth[top].mean()), "chance": float(truth.mean()),
            })  # fmt: skip
    return rows


def recovery_over_builds(
    builds: list[list[dict[str, Any]]],
) -> dict[str, tuple[tuple[float, float, float], tuple[float, float, float]]]:
    """Per option, (AUROC, top-neuron precision) over several planted builds (planted_recovery's rows of each):
    each build's mean over its planted abilities, then the mean over builds with its 95% t interval, clipped to
    [0, 1] (validation.share_interval: how much the figure would move with another build)."""
    from benchprof.lab.validation import share_interval

    out = {}
    for option in dict.fromkeys(r["option"] for build in builds for r in build):
        per_build = [[r for r in build if r["option"] == option] for build in builds]
        auroc = [sum(r["auroc"] for r in rows) / len(rows) for rows in per_build]
        precision = [sum(r["top_neuron_precision"] for r in rows) / len(rows) for rows in per_build]
        out[option] = (share_interval(auroc), share_interval(precision))
    return out
