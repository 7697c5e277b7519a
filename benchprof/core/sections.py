"""config.yml's sections as typed dataclasses, one per section (`settings`, `models`, `datasets`, `evals`, `data`,
`finetune`, `extract`, `damage`, `aggregate`), with their defaults. core/config.py holds the whole Config and
checks each value.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from benchprof.abilities import ABILITIES
from benchprof.core.options import DEFAULT, SCORES
from benchprof.core.region_names import DEFAULT_REGIONS, REGIONS, SELECTED, random_draw_names, selection_name

PAPER_K_VALUES = (0.00001, 0.00004, 0.00016, 0.00064, 0.00256, 0.01024)  # the paper's k sweep: the default k_values
# extract.score: a selection option of core/options.py (its registry: name, formula, purpose, status)
if TYPE_CHECKING:
    ScoreName = str
else:
    ScoreName = Literal[SCORES]  # the registry's extract.scores, so that schema.cast checks the name


@dataclass
class Settings:
    """`settings:` run-wide values (the authors' keys plus a few of ours)."""

    k_values: list[float] = field(default_factory=lambda: list(PAPER_K_VALUES))
    front_removal: int = 0  # skip this many decoder layers at the front when selecting regions
    back_removal: int = 0  # ... and this many at the back
    cuda_visible_devices: str = ""  # "0,1,2,3": one evaluation worker per listed GPU
    train_batch_size: int = 4  # importance pass, per process
    eval_batch_size: int = 8  # lm-eval batch size given to HFLM
    output_dir: str = "outputs"
    seed: int = 1234
    threads: int = 0  # CPU threads of torch per process; 0: the usable cores / the processes run side by side

    def devices(self) -> list[str]:
        return [d.strip() for d in str(self.cuda_visible_devices).split(",") if d.strip()]

    def thread_count(self, processes: int | None = None) -> int:
        """torch's CPU threads for one of `processes` processes run side by side (default: this process's own
        world, LOCAL_WORLD_SIZE under torchrun, else 1): `threads` when set, else the usable cores divided among
        the processes, at least 1, so that processes x threads never exceeds the cores (oversubscribed, two
        processes of two threads each on two cores ran 5x slower)."""
        if self.threads:
            return self.threads
        if processes is None:
            processes = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return max(1, cores // max(1, processes))


@dataclass
class ModelSpec:
    """One entry of `models:`. `tag` names the model's folder under outputs/."""

    name: str
    tag: str = ""
    tokenizer: str = ""  # tokenizer id or path; defaults to `name`
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"

    def __post_init__(self) -> None:
        if not self.tag:
            self.tag = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(self.name.rstrip("/")).name)
        if not self.tokenizer:
            self.tokenizer = self.name


@dataclass
class DatasetSpec:
    """One entry of `datasets:` (the authors' form `name, path, key`).

    `path` is a folder holding `train.jsonl` and `test.jsonl`, or a Hugging Face dataset id;
    left empty, benchprof generates the ability's data under `data.dir`. `key` lists the record
    fields that make up the prompt, as in the authors' config.
    """

    name: str
    path: str = ""
    key: str = "context,question,answer"
    subset: str = ""  # Hugging Face dataset config name, if any

    def keys(self) -> list[str]:
        return [k.strip() for k in self.key.split(",") if k.strip()]


@dataclass
class DataSettings:
    """`data:` how `benchprof data` generates the ability datasets."""

    dir: str = "data"
    train_size: int = 2000
    test_size: int = 500
    seed: int = 1234
    # "paper": the paper's kinds of question; "easy": one step, two facts, wrong options far from the answer and
    # out of the context, for a small model (abilities.LEVELS)
    difficulty: Literal["paper", "easy"] = "paper"
    # what a test item may not share with a train item (abilities.SPLIT_BY): "question", its (context, question),
    # as every earlier version; "problem", its problem with names and wording masked (no test item repeats one)
    split_by: Literal["question", "problem"] = "question"
    # items of each ability's transfer split (<Ability>_transfer, a benchmark): formats its train split never uses,
    # asking no problem of its train split; 0: none
    transfer_size: int = 0


@dataclass
class FinetuneSettings:
    """`finetune:` the importance pass (no optimizer ever steps)."""

    scope: Literal["mlp", "attention", "all"] = "mlp"
    loss_on: Literal["all", "answer"] = "all"  # all tokens (authors) or the answer tokens only
    max_samples: int | None = None
    max_length: int = 1024
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    gradient_checkpointing: bool = False
    strategy: Literal["ddp", "fsdp", "deepspeed"] = "ddp"
    # processes `benchprof run` starts for the importance pass; default one per configured GPU (1 on CPU)
    processes: int | None = None

    def process_count(self, gpus: int) -> int:
        """How many importance processes `run` starts, given the configured GPUs that CUDA sees."""
        return self.processes if self.processes is not None else max(1, gpus)


@dataclass
class ExtractSettings:
    """`extract:` how regions are selected from importance scores."""

    selection: Literal["exact", "chunked"] = "exact"
    chunk_size: int = 1_000_000  # only for selection: chunked (the authors' approximation)
    regions: list[str] = field(default_factory=lambda: list(DEFAULT_REGIONS))
    random_seed: int = 0
    score: ScoreName = DEFAULT  # what ranks the weights or neurons: core/options.py
    random_draws: int = 1  # independently seeded random regions per (ability, k): random, random2, ...
    # attribution samples per ability from disjoint train items (finetune.max_samples each), each its own region:
    # top, top2, top3 (and placebo, placebo2, placebo3)
    selections: int = 1

    def region_names(self) -> list[str]:
        """The regions extract writes, in REGIONS order: "random" stands for all its draws, "top" and "placebo"
        for one region per selection (top, top2, ...; placebo, placebo2, ...)."""
        names: list[str] = []
        for region in REGIONS:
            if region in self.regions:
                if region == "random":
                    names += random_draw_names(self.random_draws)
                elif region in SELECTED:
                    names += [selection_name(region, s) for s in range(1, self.selections + 1)]
                else:
                    names.append(region)
        return names


@dataclass
class EvalSettings:
    """`evals:` which benchmarks to score and how (every key: docs/config.md).

    A benchmark is a standard lm-eval task name, a task of a YAML under `include_path` (your own), an ability's
    name (its test split), or a name under `composites`. Each entry of `benchmarks` is a name or a mapping {name,
    num_fewshot, limit, metric} (parse_config spreads the mapping into num_fewshot, limits and aggregate.metrics).
    `scorer` shared_prefix is prefix_scorer.SharedPrefixLM (a shared context computed once), lm_eval lm-eval's HFLM;
    `cpu_workers` evaluate processes side by side on a CPU (docs/scaling.md, "On a CPU")."""

    benchmarks: list[str] = field(default_factory=lambda: list(ABILITIES))
    num_fewshot: list[int] = field(default_factory=list)
    backend: Literal["hf", "vllm"] = "hf"
    scorer: Literal["shared_prefix", "lm_eval"] = "shared_prefix"
    limit: int | None = None
    limits: dict[str, int] = field(default_factory=dict)  # benchmark -> its own limit (else `limit`)
    include_path: list[str] = field(default_factory=list)  # folders (or YAML files) of your lm-eval tasks
    dataset_paths: dict[str, str] = field(default_factory=dict)  # benchmark -> a local copy of its dataset
    device: str = "auto"
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    tensor_parallel_size: int = 1
    cpu_workers: int = 1  # evaluating on the CPU: this many `evaluate --shard` processes side by side
    composites: dict[str, dict[str, Any]] = field(default_factory=dict)

    def fewshot(self, benchmark: str) -> int:
        return self.num_fewshot[self.benchmarks.index(benchmark)] if self.num_fewshot else 0

    def limit_for(self, benchmark: str) -> int | None:
        """At most this many documents of `benchmark`: its own limit, else `limit` (None: all)."""
        return self.limits.get(benchmark, self.limit)


@dataclass
class DamageSettings:
    """`damage:` what a region's removal leaves. `ablation` zero sets its weights to 0; mean (neuron regions, the hf
    backend) holds each of its neurons at its mean output over every ability's train items (stages/mean_ablation.py)."""

    ablation: Literal["zero", "mean"] = "zero"


@dataclass
class AggregateSettings:
    """`aggregate:` how AIS tables and plots are made."""

    report_k: float | None = None  # defaults to the largest k
    threshold: float = 0.05  # ribbon figure draws ability -> benchmark links above this AIS
    bootstrap: int = 1000
    seed: int = 0
    metrics: dict[str, str] = field(default_factory=dict)  # benchmark -> primary metric override
    alpha: float = 0.05  # every star's level: Holm over the claim family, Benjamini-Hochberg over the others
    chance: dict[str, float] = field(default_factory=dict)  # benchmark -> chance level (default: 1/#options)
    # a generation task (chance 0 unless aggregate.chance says otherwise): the original must get this many
    # items right before an AIS ratio means anything (with 3 right, 2 lost items are an AIS of +0.667)
    min_correct: int = 10
    clusters: bool = True  # resample items by their `cluster` and a group's subtasks as strata, where present
    # the claim rule on p_correct too, beside the primary metric: a family of its own (docs/claims.md)
    p_correct_claims: bool = True
    # a real benchmark's pairs are tested only for abilities whose region removes them on their own split (the gate)
    claim_gate: bool = True
