"""The selection options, each declared once: what ranks the weights or neurons of an ability's region.

An option has a name, its formula in one line, what it is for, its status (the authors' default, recommended for
a real model, or for study only) and the doc section that measures it. Config validation (core.config SCORES),
extract's --help, the frontier's option names (stages/neurons.py), the validation study's rows, docs/config.md's
table and an unknown name's did-you-mean all read OPTIONS; tests/test_options.py holds README, config.yml and the
docs to it. The formulas' code is weight_scores.specific_score (weights) and neurons.neuron_scores (neurons).

Notation: I_b = |θ · Σ ∂L_b/∂θ| per weight (ability b's importance), A = Σ_positions h · ∂ log P(correct) / ∂h per
train item and MLP neuron (h its activation), t_b = A's t statistic over b's items, E = the mean of h² over an
item's prompt and correct option.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Unit = Literal["weights", "neurons"]
Status = Literal["default", "recommended", "study"]
STATUS_WORDS: dict[str, str] = {
    "default": "the authors' default",
    "recommended": "recommended for a real model",
    "study": "for study only",
}


@dataclass(frozen=True)
class Option:
    """One selection option. `extract`: an `extract.score` (else a frontier option only). For a neuron option,
    `statistic` is the per-item statistic it reads (attribution A or activity E) and `against` what it holds an
    ability against ("": nothing, "abilities": the other abilities', "general": text the model samples itself);
    a union's `parts` are the two options whose top neurons it joins."""

    name: str
    unit: Unit
    formula: str
    purpose: str
    status: Status
    measured_in: str  # docs path#section, relative to the repository root
    extract: bool = True
    statistic: str = ""
    against: str = ""
    parts: tuple[str, ...] = ()


# The weight scores' formulas are recorded in the masks' manifests (weight_scores.score_inputs): editing one
# makes every mask built with it stale.
OPTIONS: tuple[Option, ...] = (
    Option(
        "importance",
        "weights",
        "S_a = I_a",
        "the paper's regions, comparable with its numbers: read them as what zeroing these weights breaks",
        "default",
        "docs/research/real-model.md#every-region-is-the-same-region",
    ),
    Option(
        "contrast_mean",
        "weights",
        "S_a = I_a - mean_{b!=a} I_b",
        "discounts what every ability needs",
        "study",
        "docs/research/weight-scores-demo.md#side-by-side-on-the-demo-model",
    ),
    Option(
        "ratio",
        "weights",
        "S_a = I_a / (mean_{b!=a} I_b + eps), eps = 1 x its mean over eligible weights",
        "relative importance: distinct regions, the same damage on a real model",
        "study",
        "docs/research/real-model.md#under-another-score-distinct-regions-the-same-damage",
    ),
    Option(
        "rank",
        "weights",
        "S_a = P_a - mean_{b!=a} P_b, P = mid-rank percentile of I (bfloat16 precision)",
        "with finetune.loss_on: answer, the weight score that recovers planted weights best",
        "study",
        "docs/research/validation.md#recommendation",
    ),
    Option(
        "entropy",
        "weights",
        "S_a = q_a (1 - H(p)/log M), q_b = I_b / mean I_b, p_b = q_b / sum_c q_c",
        "LAPE-style: importance concentrated on few abilities",
        "study",
        "docs/research/weight-scores-demo.md#side-by-side-on-the-demo-model",
    ),
    Option(
        "act_grad",
        "neurons",
        "mean of A over a's items",
        "what every answer leans on: breaks every split alike",
        "study",
        "docs/research/frontier.md#the-first-sweep-paper-level-mean-over-the-three-abilities",
        statistic="attribution",
    ),
    Option(
        "act_grad_t",
        "neurons",
        "t_a",
        "neurons every item of a leans on",
        "study",
        "docs/research/frontier.md#the-first-sweep-paper-level-mean-over-the-three-abilities",
        statistic="attribution",
    ),
    Option(
        "act_grad_contrast",
        "neurons",
        "t_a - max_{b!=a} t_b",
        "removes the ability; its specificity is mostly the other abilities' gains",
        "study",
        "docs/research/frontier.md#the-effectivenessspecificity-frontier",
        statistic="attribution",
        against="abilities",
    ),
    Option(
        "act_grad_contrast_abs",
        "neurons",
        "t_a - max_{b!=a} |t_b|",
        "removes the ability in and beyond its train format without the others' gains",
        "recommended",
        "docs/research/frontier.md#the-effectivenessspecificity-frontier",
        statistic="attribution",
        against="abilities",
    ),
    Option(
        "act_contrast",
        "neurons",
        "log mean E_a - log max_{b!=a} mean E_b",
        "finds planted neurons; removes little of a real model's own abilities",
        "study",
        "docs/research/frontier.md#the-planted-ground-truths",
        statistic="activity",
        against="abilities",
    ),
    Option(
        "act_grad_general",
        "neurons",
        "t_a - t_general (general: text the model samples itself)",
        "attribution against ordinary text: removes the other abilities too",
        "study",
        "docs/research/frontier.md#what-is-not-settled",
        extract=False,
        statistic="attribution",
        against="general",
    ),
    Option(
        "act_general",
        "neurons",
        "log mean E_a - log mean E_general",
        "activity against ordinary text: finds planted neurons, costs every split alike",
        "study",
        "docs/research/frontier.md#what-is-not-settled",
        extract=False,
        statistic="activity",
        against="general",
    ),
    Option(
        "act_grad_contrast_iter",
        "neurons",
        "act_grad_contrast's top n/4, four times, re-scoring a with the chosen neurons zeroed",
        "larger own effect, larger gains elsewhere; misses planted neurons",
        "study",
        "docs/research/frontier.md#what-is-not-settled",
        extract=False,
        statistic="attribution",
        against="abilities",
    ),
    Option(
        "act_union",
        "neurons",
        "act_contrast's and act_grad_contrast_abs's top neurons, about n/2 each",
        "closest to the planted goal; on SmolLM2's plant its regions of the real abilities remove about half what "
        "act_grad_contrast_abs's do",
        "study",
        "docs/research/frontier.md#the-real-splits-on-smollm2s-plant",
        extract=False,
        parts=("act_contrast", "act_grad_contrast_abs"),
    ),
)

BY_NAME: dict[str, Option] = {o.name: o for o in OPTIONS}
DEFAULT: str = next(o.name for o in OPTIONS if o.status == "default")
RECOMMENDED: str = next(o.name for o in OPTIONS if o.status == "recommended")
SCORES: tuple[str, ...] = tuple(o.name for o in OPTIONS if o.extract)  # extract.score
NEURON_SCORES: tuple[str, ...] = tuple(o.name for o in OPTIONS if o.extract and o.unit == "neurons")
WEIGHT_SCORES: tuple[str, ...] = tuple(o.name for o in OPTIONS if o.unit == "weights")
FRONTIER_OPTIONS: tuple[str, ...] = tuple(o.name for o in OPTIONS if o.unit == "neurons")


def did_you_mean(value: object, known: Sequence[object]) -> str:
    """'; did you mean X?' for the known name closest to a mistyped one (difflib), else ''."""
    close = difflib.get_close_matches(str(value), [str(k) for k in known], n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def compares(name: str) -> bool:
    """Whether an extract.score reads the other abilities too (and so needs at least two in datasets)."""
    option = BY_NAME[name]
    return option.against == "abilities" or (option.unit == "weights" and name != "importance")


def score_help() -> str:
    """extract --score's help: every extract.score with its status, from OPTIONS (no colon: fire would read the
    words before one as another argument's name)."""
    weights = ", ".join(_labelled(o) for o in OPTIONS if o.extract and o.unit == "weights")
    neurons = ", ".join(_labelled(o) for o in OPTIONS if o.extract and o.unit == "neurons")
    return f"per weight {weights}; whole MLP neurons {neurons}; formulas and status in docs/config.md"


def frontier_help() -> str:
    """frontier --options' help: every neuron option with its status, from OPTIONS."""
    names = ", ".join(_labelled(o) for o in OPTIONS if o.unit == "neurons")
    return f"{names}; formulas and status in docs/config.md"


def _labelled(option: Option) -> str:
    return option.name if option.status == "study" else f"{option.name} ({STATUS_WORDS[option.status]})"


def markdown_table() -> str:
    """docs/config.md's table of every option, one row each (tests/test_options.py holds the doc to it)."""
    lines = [
        "| option | unit | formula | for | status | measured in |",
        "|---|---|---|---|---|---|",
    ]
    for o in OPTIONS:
        where = o.measured_in.removeprefix("docs/")
        page = where.split("#")[0]
        status = STATUS_WORDS[o.status] + ("" if o.extract else "; frontier only")
        formula = o.formula.replace("|", "\\|")
        lines.append(f"| `{o.name}` | {o.unit} | `{formula}` | {o.purpose} | {status} | [{page}]({where}) |")
    return "\n".join(lines)
