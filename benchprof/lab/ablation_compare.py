"""Zero against mean ablation on one model's frontier (issue: which `damage.ablation` a profile should use).

Two frontier folders measured on the same items, one with `--ablation zero` (the default) and one with
`--ablation mean` (lab/frontier.py), are read from their frontier.csv: per ability, what its own region removes from
its own test split (own AIS) and from its transfer split, and its breadth, the damage to the other abilities' test
splits beyond what random regions of its size do under the same ablation (`other_vs_random`). The change from zero
to mean is given per ability and as the mean over the abilities, with the exact sign-flip test over the abilities
(stats.paired.sign_flip_exact_p: the abilities are the units, each its own paired difference).
"""

from __future__ import annotations

from pathlib import Path

from benchprof import BenchprofError

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
