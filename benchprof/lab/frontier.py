"""The effectiveness–specificity frontier: for each neuron-selection option and region size, how much zeroing
ability a's region costs a's own test split, how much it costs the other abilities' splits, and how much a
random region of the same size costs (docs/research/frontier.md).

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
  (neurons.iterative_contrast; each region's choice kept under frontier/act_grad_contrast_iter/);
- `act_grad_contrast_abs`: t_a − max_{b≠a} |t_b|, which leaves out the neurons the other abilities lean against;
- `act_union`: the union of act_contrast's and act_grad_contrast_abs's top neurons, each given equal room
  (neurons.option_scores), meant to hold both ground truths.

Every (option, ability, size) region and `draws` random regions per size are zeroed in turn and the test
splits scored in process (acc_norm as lm-eval's multiple-choice scores it, choices.item_scores). Each result is
a self-verifying line of frontier/evaluations.jsonl keyed by what it was computed from (the model's content, the
test items, the neurons zeroed), and each split's scores by that split's items, so a rerun reuses exactly the
results whose inputs still hold and scores again only the splits whose items changed
(frontier_plan.py, frontier_cache.py); frontier.csv, frontier.md and frontier.png summarise them
(frontier_report.py). The planted recovery is frontier_planted.py's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchprof import BenchprofError
from benchprof.core.config import MAX_THREADS, NEURON_SCORES
from benchprof.core.layout import FrontierLayout
from benchprof.core.options import frontier_help
from benchprof.core.storage import append_record, link_error, read_records, write_text
from benchprof.lab.frontier_plan import (
    MAX_DRAWS,
    FrontierInputs,
    FrontierPlan,
    changed_since,
    item_counts,
    load_inputs,
    neuron_count,
    read_plan,
    region_sizes,
    whole_number,
)
from benchprof.stages.neurons import (
    FRONTIER_SCORES,
    ITERATIVE,
    Neurons,
    model_neurons,
    neuron_ids_region,
    option_scores,
    random_neurons,
    top_neurons,
)

if TYPE_CHECKING:
    import numpy as np
    import torch
    from numpy.typing import NDArray
    from transformers import PreTrainedTokenizerBase

    from benchprof.core.config import Config

RANDOM = "random"
SCORING_DTYPES = ("float32", "bfloat16")  # what the frontier may score in
SplitScores = dict[str, Any]  # one split's scores: "acc_norm" (0/1 per item) and "loglik" (per item, per option)


@dataclass(frozen=True)
class Region:
    """One region the plan measures: the option (or "random", or "original" for none), the ability or draw it
    belongs to, its size in neurons and its neuron ids."""

    option: str
    name: str
    size: int
    neurons: list[int]


def regions(
    plan: FrontierPlan,
    neurons: Neurons,
    statistics: dict[str, dict[str, NDArray[np.float32]]],
    iterative: dict[tuple[str, int], list[int]],
) -> Iterator[Region]:
    """The original model (no neuron zeroed) and every region the plan measures; `statistics`: per statistic
    (neurons.statistics_of), every ability's values; `iterative`: the iterative selection of each (ability, size)."""
    yield Region("original", "-", 0, [])
    for option in plan.options:
        for ability in plan.abilities:
            scores = option_scores(statistics, ability, option)
            for size in plan.sizes:
                chosen = iterative[(ability, size)] if option == ITERATIVE else top_neurons(scores, size)
                yield Region(option, ability, size, chosen)
    for size in plan.sizes:
        for draw in range(plan.draws):
            seed = plan.seed * 1000 + size * 10 + draw
            yield Region(RANDOM, f"draw{draw}", size, random_neurons(neurons.count, size, seed))


def scored(
    plan: FrontierPlan,
    inputs: FrontierInputs,
    model: torch.nn.Module,
    tok: PreTrainedTokenizerBase,
    todo: list[tuple[Region, dict[str, SplitScores]]],
    means: NDArray[np.float32] | None = None,
) -> Iterator[dict[str, Any]]:
    """Each region of `todo` ablated in turn (zeroed, or held at `means` under mean ablation) and the test splits its
    known scores lack scored: its record (every split, the known ones as they were), appended to the records file
    before it is yielded (a kill loses at most the region being scored)."""
    from tqdm import tqdm

    from benchprof.stages.mean_ablation import removed

    log, neurons = FrontierLayout(plan.out).records_file, model_neurons(model)
    for region, known in tqdm(todo, desc="frontier", unit="region", leave=False):
        missing = {split: items for split, items in inputs.tests.items() if split not in known}
        with removed(model, neuron_ids_region(neurons, region.neurons), means):
            new = score(model, tok, missing)
        split_scores = {split: known[split] if split in known else new[split] for split in inputs.tests}
        record = {
            "option": region.option, "region": region.name, "size": region.size, "neurons": region.neurons,
            "acc_norm": {split: scores["acc_norm"] for split, scores in split_scores.items()},
            "loglik": {split: scores["loglik"] for split, scores in split_scores.items()},
            "inputs": inputs.evaluation_key(region.neurons),
            "split_inputs": {split: inputs.split_key(split, region.neurons) for split in inputs.tests},
        }  # fmt: skip
        append_record(log, record)
        yield record


def known_scores(records: list[dict[str, Any]]) -> dict[str, SplitScores]:
    """Each split's scores that earlier records hold, by the split key they were computed from (the scorer's
    version is in the key, so records of another scorer are never reused)."""
    return {
        key: {"acc_norm": r["acc_norm"][split], "loglik": r["loglik"][split]}
        for r in records
        if all(isinstance(r.get(field), dict) for field in ("split_inputs", "acc_norm", "loglik"))
        for split, key in r["split_inputs"].items()
        if isinstance(key, str) and split in r["acc_norm"] and split in r["loglik"]
    }


def measure(plan: FrontierPlan) -> Path:
    """Measure the frontier of `plan` (reusing every record whose inputs still hold) and write its summary;
    returns the folder."""
    import json

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from benchprof.lab.frontier_cache import iterative_selections, train_statistics
    from benchprof.lab.frontier_report import write_report
    from benchprof.stages.mean_ablation import pooled_means

    torch.set_num_threads(plan.threads)
    started = time.time()
    layout = FrontierLayout(plan.out)
    for path in (layout.records_file, layout.plan_file):
        if path.is_symlink():
            raise link_error(path)
    recorded = read_plan(layout.plan_file)
    # one folder, one ablation: its report says which
    if recorded and recorded.get("ablation", "zero") != plan.ablation:
        raise BenchprofError(
            f"{layout.plan_file}: measured with --ablation {recorded.get('ablation', 'zero')}; give another --folder"
        )
    plan = plan.grown(recorded, neuron_count(plan.model))
    inputs = load_inputs(plan, plan.out.parent)
    changed = changed_since(recorded, inputs)
    plan.out.mkdir(parents=True, exist_ok=True)
    write_text(layout.plan_file, json.dumps({**plan.record(), "inputs": inputs.summary()}, indent=1) + "\n")
    tok = AutoTokenizer.from_pretrained(plan.model)
    model = AutoModelForCausalLM.from_pretrained(plan.model, dtype=torch.float32).eval()
    statistics = train_statistics(plan, inputs, model, tok)
    iterative = iterative_selections(plan, inputs, model, tok, statistics.get("attribution", {}))
    # mean ablation: every neuron held at its mean over every train item the statistics read (float32, as they are)
    means = pooled_means(statistics["mean"]) if plan.ablation == "mean" else None
    model = model.to(getattr(torch, plan.dtype))  # selections are made in float32; the scoring dtype from here on
    measured = list(regions(plan, model_neurons(model), statistics, iterative))
    known_splits = known_scores(read_records(layout.records_file))
    todo: dict[str, tuple[Region, dict[str, SplitScores]]] = {}  # one per set of neurons, whichever option chose it
    known: dict[str, dict[str, SplitScores]] = {}  # every split's scores, by evaluation key
    for region in measured:
        key = inputs.evaluation_key(region.neurons)
        held = {s: known_splits.get(inputs.split_key(s, region.neurons)) for s in inputs.tests}
        if all(v is not None for v in held.values()):
            known[key] = {s: v for s, v in held.items() if v is not None}
        elif key not in todo:
            todo[key] = (region, {s: v for s, v in held.items() if v is not None})
    splits_scored = sum(len(inputs.tests) - len(held) for _, held in todo.values())
    for r in scored(plan, inputs, model, tok, list(todo.values()), means):
        known[r["inputs"]] = {s: {"acc_norm": r["acc_norm"][s], "loglik": r["loglik"][s]} for s in inputs.tests}
    records = [
        {"option": r.option, "region": r.name, "size": r.size, "neurons": r.neurons,
         **{field: {s: v[field] for s, v in known[inputs.evaluation_key(r.neurons)].items()}
            for field in ("acc_norm", "loglik")}}
        for r in measured
    ]  # fmt: skip
    shape = {"weights_per_neuron": model_neurons(model).weights(1), "total_params": model_neurons(model).total_params}
    record = {**plan.record(), "inputs": inputs.summary(), "model_shape": shape}
    write_text(layout.plan_file, json.dumps(record, indent=1) + "\n")  # with what render needs to redraw it
    files = write_report(plan, records, shape["weights_per_neuron"], shape["total_params"])
    note = f" (inputs changed since the last run: {', '.join(changed)})" if changed else ""
    print(
        f"frontier: {len(todo)} regions scored ({splits_scored} of their {len(todo) * len(inputs.tests)} splits), "
        f"{len(measured) - len(todo)} reused (the original model counted as one){note}; "
        f"{', '.join(map(str, files))} ({time.time() - started:.0f}s)"
    )
    return plan.out


def frontier(
    cfg: Config,
    ability: str | tuple[str, ...] | None = None,
    model: str | None = None,
    options: str | tuple[str, ...] = ",".join(NEURON_SCORES),
    sizes: str | tuple[int, ...] = "4,32,256,1024",
    draws: int = 3,
    train_items: int | None = None,
    test_items: int | None = None,
    transfer_items: int | None = None,
    train_from: int = 0,
    folder: str = "frontier",
    threads: int | None = None,
    dtype: str = "float32",
    ablation: str = "zero",
) -> None:
    """The effectiveness–specificity frontier of neuron regions: for every option and size, each ability's
    region zeroed and every ability's test split scored, against random regions of the same size
    (docs/research/frontier.md). Run it before a profile of your own model, to choose its selection option and region
    size. Writes outputs/<model>/frontier/; a rerun reuses every result whose inputs (the model's content, the
    items) still hold, and recomputes exactly those whose inputs changed.

    Needs the abilities' data (`benchprof data`). Attribution reads the train splits, scoring the test splits.

    Arguments:
        cfg: the config (on the command line: the path of config.yml); its model, abilities and data.dir.
        ability: the abilities whose regions are measured (comma-separated); default every ability of `datasets:`.
            At least two. act_grad_contrast holds each against every ability of `datasets:`.
        model: the model (name or tag); default the config's first.
        options: neuron options, comma-separated, of FRONTIER_HELP (act_grad_contrast_iter costs three more
            attributions of the ability per region). A rerun may add options and sizes to those already measured.
        sizes: region sizes in neurons (each neuron is 3 x hidden weights), comma-separated; at most the model's
            neurons (layers x MLP width).
        draws: random regions per size (at least 3 for a comparison with random; at most 1000).
        train_items: train items per ability the attribution reads (at most its train split's); default 120, or
            the smallest train split where that holds fewer.
        test_items: test items per ability scored (at most its test split's); default 100, or the smallest test
            split where that holds fewer.
        transfer_items: transfer items per ability scored (formats its train split never uses; `data.transfer_size`);
            default 100, or the smallest transfer split where that holds fewer, or none where an ability has none.
        train_from: the first train item the attribution reads (0); another value draws a second sample of the
            train split, measured in its own --folder.
        folder: the frontier's folder under outputs/<model>/ (default frontier).
        threads: torch threads (1 to 4096); default settings.threads (automatic: the usable cores).
        dtype: what the test splits are scored in, float32 or bfloat16 (the attribution is float32 either way);
            part of every score's identity, so the two never mix in one folder's results (docs/research/performance.md).
        ablation: what a region's neurons output, zero or mean (their mean over the train items the attribution
            reads, stages/mean_ablation.py); part of every ablated score's identity.
    """
    from benchprof.core.layout import Layout
    from benchprof.core.selection import select
    from benchprof.stages.mean_ablation import ablation_kind

    spec = cfg.selected_models(model)[0]
    abilities = select(ability, cfg.abilities(), "--ability")
    if len(abilities) < 2:
        raise BenchprofError("--ability: the frontier compares an ability's split with the others': give two or more")
    source, data_dir = cfg.model_source(spec)[0], cfg.resolve(cfg.data.dir)
    held = {"train": tuple(dict.fromkeys([*abilities, *cfg.abilities()])), "test": tuple(abilities)}
    held["transfer"] = held["test"]
    start = whole_number(train_from, "--train_from", 0)
    items = item_counts(data_dir, held, {"train": train_items, "test": test_items, "transfer": transfer_items}, start)
    plan = FrontierPlan(
        model=source,
        data_dir=data_dir,
        abilities=tuple(abilities),
        contrast=tuple(cfg.abilities()),
        out=Layout(cfg.output_root, spec.tag).frontier_folder(folder),
        options=tuple(select(options, FRONTIER_SCORES, "--options")),
        sizes=region_sizes(sizes, neuron_count(source)),
        draws=whole_number(draws, "--draws", 1, MAX_DRAWS),
        train_items=items["train"],
        train_from=start,
        test_items=items["test"],
        transfer_items=items["transfer"],
        threads=whole_number(threads, "--threads", 1, MAX_THREADS)
        if threads is not None
        else cfg.settings.thread_count(),
        seed=cfg.settings.seed,
        dtype=scoring_dtype(dtype),
        ablation=ablation_kind(ablation, "--ablation"),
        model_given=spec.name,
        data_given=cfg.data.dir,
    )
    measure(plan)


frontier.__doc__ = (frontier.__doc__ or "").replace("FRONTIER_HELP", frontier_help())  # the registry's options


def scoring_dtype(given: str) -> str:
    """--dtype: one of SCORING_DTYPES, refused in one line otherwise."""
    if given not in SCORING_DTYPES:
        raise BenchprofError(f"--dtype: {given!r} is not one of {', '.join(SCORING_DTYPES)}")
    return given


def score(
    model: torch.nn.Module, tok: PreTrainedTokenizerBase, tests: dict[str, list[dict[str, Any]]]
) -> dict[str, SplitScores]:
    """Every test split's per-item acc_norm (lm-eval's, choices.mc_metrics) and each item's option
    log-likelihoods (rounded to 1e-6, below float32's resolution at these magnitudes), so that another metric
    can be computed from a record without scoring again."""
    from benchprof.stages.choices import item_logliks, mc_metrics, option_chars

    scores: dict[str, SplitScores] = {}
    for split, records in tests.items():
        logliks = item_logliks(model, tok, records)
        acc_norm = mc_metrics(logliks, option_chars(records), [int(r["label"]) for r in records])[1]
        scores[split] = {
            "acc_norm": [float(x) for x in acc_norm],
            "loglik": [[round(value, 6) for value in item] for item in logliks],
        }
    return scores


def render(folder: str | Path) -> list[Path]:
    """Redraw a frontier folder's frontier.csv, .md and .png from its plan.json and evaluations.jsonl alone (no
    model, no data): a committed result read by the current report. A record's region is named by its option,
    ability or draw and size; where a folder holds several records of one region (other inputs), the last counts.
    Refused in one line, before any file is written, when plan.json is not a plan or its records lack a region or
    disagree with it (frontier_plan.plan_records)."""
    from benchprof.lab.frontier_plan import plan_records, recorded_plan
    from benchprof.lab.frontier_report import write_report

    folder = Path(folder)
    layout = FrontierLayout(folder)
    plan, recorded = recorded_plan(folder)
    shape, keys = recorded.get("model_shape"), ("weights_per_neuron", "total_params")
    if not isinstance(shape, dict) or not all(isinstance(shape.get(k), int) for k in keys):
        raise BenchprofError(f"{layout.plan_file}: no model_shape to render from (written at the end of a run)")
    records = plan_records(plan, layout.records_file)  # every region of the plan, or one line saying which is not
    return write_report(plan, records, int(shape["weights_per_neuron"]), int(shape["total_params"]))
