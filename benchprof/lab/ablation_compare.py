"""Zero against mean ablation on one model's frontier (issue: which `damage.ablation` a profile should use).

Two frontier folders measured on the same items, one with `--ablation zero` (the default) and one with
`--ablation mean` (lab/frontier.py), are read from their frontier.csv: per ability, what its own region removes from
its own test split (own AIS) and from its transfer split, and its breadth, the damage to the other abilities' test
splits beyond what random regions of its size do under the same ablation (`other_vs_random`). The change from zero
to mean is given per ability and as the mean over the abilities, with the exact sign-flip test over the abilities
(stats.paired.sign_flip_exact_p: the abilities are the units, each its own paired difference).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchprof import BenchprofError

if TYPE_CHECKING:
    import numpy as np
    import torch
    from numpy.typing import NDArray
    from transformers import PreTrainedTokenizerBase

MEASURES = {  # what is compared: frontier.csv's column, and what it says
    "own_ais": "own AIS",
    "transfer_ais": "transfer AIS",
    "other_vs_random": "breadth (other − random)",
}


def checked_plans(zero: Path, mean: Path, option: str, size: int) -> list[str]:
    """Refused in one line unless `zero` and `mean` are frontier folders measured with --ablation zero and mean on one
    plan (dtype_agreement.SAME_PLAN but the options and sizes, which need only hold `option` and `size`; the same
    train and test items); the notes the table adds (a model whose files' identity differs, its scores compared as
    they are)."""
    from benchprof.lab.dtype_agreement import SAME_PLAN
    from benchprof.lab.frontier_plan import recorded_plan

    (plan_z, json_z), (plan_m, json_m) = recorded_plan(zero), recorded_plan(mean)
    if (plan_z.ablation, plan_m.ablation) != ("zero", "mean"):
        raise BenchprofError(
            f"{zero}, {mean}: measured with --ablation {plan_z.ablation} and {plan_m.ablation}, not zero and mean"
        )
    shared = [k for k in (*SAME_PLAN, "dtype") if k not in ("options", "sizes", "ablation")]
    differ = [k for k in shared if json_z.get(k) != json_m.get(k)]
    inputs_z, inputs_m = json_z.get("inputs") or {}, json_m.get("inputs") or {}
    differ += [f"{split} items" for split in ("train", "test") if inputs_z.get(split) != inputs_m.get(split)]
    differ += [
        f"{f} (no {option} at {size})"
        for f, p in ((zero, plan_z), (mean, plan_m))
        if option not in p.options or size not in p.sizes
    ]
    if differ:
        raise BenchprofError(f"{zero}, {mean}: not one plan; they differ in {', '.join(map(str, differ))}")
    if inputs_z.get("model") != inputs_m.get("model"):
        ids = f"{inputs_z.get('model')}, {inputs_m.get('model')}"
        return [f"The model folders' identities differ ({ids}): one plan, its scores compared as they are."]
    return []


def frontier_rows(folder: Path, option: str, size: int) -> dict[str, dict[str, float]]:
    """Per ability, the MEASURES of one option and size in a frontier folder's frontier.csv; refused in one line
    naming the file when it lacks them."""
    from benchprof.core.layout import FrontierLayout
    from benchprof.core.storage import read_csv

    path = FrontierLayout(Path(folder)).report_files()[0]
    if not path.is_file():
        raise BenchprofError(f"{path}: not found; measure the frontier first (`benchprof frontier`)")
    rows = [r for r in read_csv(path) if r.get("option") == option and r.get("size") == str(size)]
    if not rows:
        raise BenchprofError(f"{path}: no row of option {option} at {size} neurons")
    try:
        return {r["ability"]: {m: float(r[m]) for m in MEASURES} for r in rows}
    except (KeyError, ValueError) as err:
        raise BenchprofError(f"{path}: a row lacks a number of {', '.join(MEASURES)} ({err})") from None


def signed(value: float) -> str:
    """value to three decimals with its sign, a change that rounds to zero shown as +0.000."""
    return f"{round(value, 3) + 0.0:+.3f}"


def compare(zero: Path, mean: Path, option: str = "act_grad_contrast_abs", size: int = 256) -> str:
    """A markdown table: per ability, each measure under zero and mean ablation and their difference (mean − zero);
    then the mean over the abilities both folders hold, with the exact sign-flip p of the differences."""
    import numpy as np

    from benchprof.stats.paired import sign_flip_exact_p

    notes = checked_plans(zero, mean, option, size)
    under = {"zero": frontier_rows(zero, option, size), "mean": frontier_rows(mean, option, size)}
    abilities = [a for a in under["zero"] if a in under["mean"]]
    if not abilities:
        raise BenchprofError(f"{zero} and {mean}: no ability in common")
    head = " | ".join(f"{label}: zero / mean / change" for label in MEASURES.values())
    lines = [f"| ability | {head} |", "|---" * (1 + len(MEASURES)) + "|"]
    changes = {m: [under["mean"][a][m] - under["zero"][a][m] for a in abilities] for m in MEASURES}
    for i, ability in enumerate(abilities):
        cells = [
            f"{signed(under['zero'][ability][m])} / {signed(under['mean'][ability][m])} / {signed(changes[m][i])}"
            for m in MEASURES
        ]
        lines.append(f"| {ability} | {' | '.join(cells)} |")
    summary = []
    for m in MEASURES:
        zeros, means = (float(np.mean([under[kind][a][m] for a in abilities])) for kind in ("zero", "mean"))
        p = sign_flip_exact_p(np.array(changes[m]))
        summary.append(f"{signed(zeros)} / {signed(means)} / {signed(means - zeros)} (p = {p:.3f})")
    lines.append(f"| mean of {len(abilities)} | {' | '.join(summary)} |")
    return "\n".join(lines + ["", *notes] if notes else lines) + "\n"


def ablation_compare(
    zero: str, mean: str, option: str = "act_grad_contrast_abs", size: int = 256, out: str | None = None
) -> None:
    """Print (and with --out write to a file) the table of `compare`: zero against mean ablation per ability on two
    frontier folders measured on the same items.

    Arguments:
        zero: the frontier folder measured with --ablation zero.
        mean: the frontier folder measured with --ablation mean.
        option: the neuron option whose regions are compared.
        size: their size in neurons.
        out: a markdown file to write the table to.
    """
    from benchprof.core.storage import write_text

    table = compare(Path(zero), Path(mean), option, int(size))
    if out:
        write_text(Path(out), table)
    print(table, end="")


def output_shift(
    model: torch.nn.Module,
    tok: PreTrainedTokenizerBase,
    records: list[dict[str, Any]],
    ids: list[int],
    means: NDArray[np.float32],
    batch_items: int = 8,
) -> dict[str, float]:
    """How far each ablation moves what the neurons `ids` write, per token of the records (prompt and correct option):
    Σ over their layers of ‖Σ_j h_j W_j‖ when zeroed and of ‖Σ_j (h_j − μ_j) W_j‖ when held at `means` (W_j: neuron
    j's down_proj column), averaged over the tokens. The first-order change each ablation makes where it is made."""
    import torch

    from benchprof.stages.neurons import item_sequences, model_neurons

    neurons = model_neurons(model)
    by_layer = neurons.by_layer(ids)
    columns = {layer: torch.tensor(js) for layer, js in by_layer.items()}
    held = {
        layer: torch.from_numpy(means[[layer * neurons.intermediate + j for j in js]].copy())
        for layer, js in by_layer.items()
    }
    totals = {"zero": 0.0, "mean": 0.0}
    tokens = 0
    mask: list[torch.Tensor] = []

    def measure(layer: int) -> Any:
        def hook(module: Any, args: tuple[torch.Tensor, ...]) -> None:
            h = args[0][..., columns[layer]].float()
            weight = module.weight[:, columns[layer]].float()
            for kind, shifted in (("zero", h), ("mean", h - held[layer])):
                totals[kind] += float((torch.linalg.vector_norm(shifted @ weight.T, dim=-1) * mask[0]).sum())

        return hook

    hooks = [neurons.mlps[layer].down_proj.register_forward_pre_hook(measure(layer)) for layer in by_layer]
    sequences, pad = item_sequences(tok, records)
    try:
        with torch.no_grad():
            for start in range(0, len(sequences), batch_items):
                batch = sequences[start : start + batch_items]
                width = max(len(s) for s in batch)
                ids_ = torch.tensor([list(s) + [pad] * (width - len(s)) for s in batch])
                mask[:] = [torch.tensor([[1.0] * len(s) + [0.0] * (width - len(s)) for s in batch])]
                model(input_ids=ids_, attention_mask=mask[0].long())
                tokens += int(mask[0].sum())
    finally:
        for hook in hooks:
            hook.remove()
    return {kind: total / tokens for kind, total in totals.items()}


def ablation_shift(
    config: str, folder: str, items: int = 50, option: str = "act_grad_contrast_abs", size: int = 256
) -> None:
    """Per ability's region of a frontier folder measured with --ablation mean: how far zeroing it and holding it at
    its means move what its neurons write (output_shift), over the first `items` test items of every ability.

    Arguments:
        config: the config the frontier was measured under (its model).
        folder: the frontier folder (--ablation mean: its cached means, its records' neurons).
        items: test items per ability read.
        option: the neuron option whose regions are read.
        size: their size in neurons.
    """
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from benchprof.core.layout import FrontierLayout
    from benchprof.core.loader import load_config
    from benchprof.core.storage import read_records
    from benchprof.lab.frontier_plan import read_split, recorded_plan
    from benchprof.stages.mean_ablation import pooled_means

    cfg = load_config(config)
    plan, _ = recorded_plan(Path(folder))
    if plan.ablation != "mean":
        raise BenchprofError(f"{folder}: measured with --ablation {plan.ablation}; its means are mean ablation's")
    plan = replace(plan, data_dir=cfg.resolve(str(plan.data_dir)))
    layout = FrontierLayout(Path(folder))
    means = pooled_means(
        {a: np.load(layout.statistic_output("mean", a).files[0]) for a in dict.fromkeys(plan.abilities + plan.contrast)}
    )
    regions = {
        r["region"]: r["neurons"]
        for r in read_records(layout.records_file)
        if r["option"] == option and r["size"] == size
    }
    source = cfg.model_source(cfg.models[0])[0]
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(source)
    records = [r for a in plan.abilities for r in read_split(plan, a, "test", items, "--items")]
    print("| region of | zero: mean ‖shift‖ per token | mean: mean ‖shift‖ per token | mean / zero |")
    print("|---|---|---|---|")
    for ability in plan.abilities:
        shift = output_shift(model, tok, records, regions[ability], means)
        print(f"| {ability} | {shift['zero']:.2f} | {shift['mean']:.2f} | {shift['mean'] / shift['zero']:.2f} |")
