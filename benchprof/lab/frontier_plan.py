"""What one frontier measures (FrontierPlan, every value checked before any work) and what its results are computed
from (FrontierInputs): the content of the model's files and of each ability's train and test items, never a path.

Every cache of the frontier (a statistic, general text, an iterative selection) records the inputs it was computed
from in a manifest, and every evaluation record carries the hash of its own (the model, the test items, the neurons
zeroed): a change of data or weights recomputes exactly what depends on it, and a moved or copied project reuses
everything (frontier_cache.py).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from benchprof import BenchprofError
from benchprof.core.config import NEURON_SCORES
from benchprof.core.storage import value_hash

EXECUTION = ("threads", "batch_items")  # how a plan runs, not what it measures
MAX_DRAWS = 1000  # random regions per size


@dataclass(frozen=True)
class FrontierPlan:
    """What one frontier measures: the model, the abilities and their data, the options and sizes."""

    model: str  # a model folder (or hub id), as loaded
    data_dir: Path  # <dir>/<Ability>/{train,test}.jsonl (benchprof data)
    abilities: tuple[str, ...]  # whose regions are zeroed and whose test splits are scored
    out: Path
    options: tuple[str, ...] = NEURON_SCORES
    sizes: tuple[int, ...] = (4, 32, 256, 1024)  # neurons per region
    draws: int = 3  # random regions per size
    contrast: tuple[str, ...] = ()  # the other abilities act_grad_contrast holds a against (default: `abilities`)
    train_items: int = 120  # items of each train split the attribution reads
    train_from: int = 0  # the first of them: another sample of the train split starts further on
    test_items: int = 100  # items of each test split scored
    transfer_items: int = 0  # items of each transfer split scored (0: none; abilities.TRANSFER)
    seed: int = 0
    dtype: str = "float32"  # what the test splits are scored in (frontier.SCORING_DTYPES); attribution: float32
    ablation: str = "zero"  # what a region's neurons output: zero, or their mean over the train items (mean_ablation)
    threads: int = 1
    batch_items: int = 8
    model_given: str = ""  # the model and the data folder as the config names them (plan.json, frontier.md):
    data_given: str = ""  # relative to the config, so that a result records no path of the machine it was made on

    def record(self) -> dict[str, Any]:
        """What the plan measures, as plan.json holds it: the model and data folder as the config names them; how
        it runs (threads, batch) changes no number and is left out."""
        shown = {"model": self.model_given or self.model, "data_dir": self.data_given or str(self.data_dir)}
        skipped = (*EXECUTION, "out", "model_given", "data_given")
        return {
            k: shown.get(k, list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items() if k not in skipped
        }

    def grown(self, recorded: dict[str, Any] | None, neuron_count: int) -> FrontierPlan:
        """This plan with the options and sizes an earlier run in its folder measured (plan.json's `recorded`) added:
        a rerun may add options and sizes beside those measured, so the report covers both. Values no longer valid
        (an unknown option, a size above `neuron_count`) are not carried over."""
        from benchprof.stages.neurons import FRONTIER_SCORES

        if not recorded:
            return self
        options = [o for o in recorded.get("options", []) if o in FRONTIER_SCORES]
        sizes = [n for n in recorded.get("sizes", []) if isinstance(n, int) and 1 <= n <= neuron_count]
        return replace(
            self,
            options=tuple(dict.fromkeys([*options, *self.options])),
            sizes=tuple(sorted({*sizes, *self.sizes})),
        )


def read_plan(path: Path) -> dict[str, Any] | None:
    """plan.json of an earlier run, or None when it is missing or unreadable (its runs' options and sizes are then
    not carried over; nothing measured is lost, the records carry their own inputs)."""
    try:
        recorded = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return recorded if isinstance(recorded, dict) else None


def smallest_split(data_dir: Path, abilities: tuple[str, ...], split: str) -> tuple[int, str]:
    """(items, ability) of the smallest of these abilities' splits, counted as their files' lines (0 for a missing
    file): read before any work, so that an item count no split holds is refused at once."""
    from benchprof.core.layout import data_file

    def lines(ability: str) -> int:
        path = data_file(data_dir / ability, split)
        return sum(1 for line in path.read_bytes().splitlines() if line.strip()) if path.is_file() else 0

    return min((lines(a), a) for a in abilities)


DEFAULT_ITEMS = {"train": 120, "test": 100, "transfer": 100}  # items per split read by default (fewer where fewer)


def item_counts(
    data_dir: Path, held: dict[str, tuple[str, ...]], given: dict[str, object], train_from: int = 0
) -> dict[str, int]:
    """--train_items, --test_items and --transfer_items: per split, the number given, else DEFAULT_ITEMS or the
    smallest of `held`'s splits where that holds fewer (transfer: 0 where an ability has none); refused in one line,
    before any work, where a split holds fewer than asked."""
    counts = {}
    for split, value in given.items():
        smallest, name = smallest_split(data_dir, held[split], split)
        flag = f"--{split}_items"
        if split == "transfer" and (value is None or value == 0) and (smallest == 0 or value == 0):
            counts[split] = 0  # no transfer split asked, or one lacking and none asked for
            continue
        if smallest == 0 and split == "transfer":
            raise BenchprofError(f"{flag}: {name} has no transfer split (set data.transfer_size, run `benchprof data`)")
        if smallest == 0:
            raise BenchprofError(f"frontier: {name} has no {split} split in {data_dir}; run `benchprof data` first")
        skipped = train_from if split == "train" else 0  # the train sample starts at train_from
        default = min(DEFAULT_ITEMS[split], smallest - skipped)
        counts[split] = default if value is None else whole_number(value, flag)
        if counts[split] + skipped > smallest:
            after = f" after the first {skipped}" if skipped else ""
            raise BenchprofError(
                f"{flag}: {counts[split]} is more than {name}'s {split} split holds{after} ({smallest - skipped} items)"
            )
    return counts


def read_split(plan: FrontierPlan, ability: str, split: str, n: int, flag: str) -> list[dict[str, Any]]:
    """The first n records of an ability's split (data.read_jsonl, each record checked), refused in one line when
    the file is missing or holds fewer than n items (`flag` names the option that asked for n)."""
    from benchprof.core.layout import data_file
    from benchprof.stages.data import read_jsonl

    path = data_file(plan.data_dir / ability, split)
    if not path.is_file():
        raise BenchprofError(f"frontier: {path}: not found; run `benchprof data` for {ability} first")
    records = read_jsonl(path)
    if len(records) < n:
        raise BenchprofError(f"{flag}: {n} is more than {ability}'s {split} split holds ({len(records)} items)")
    return records[:n]


@dataclass(frozen=True)
class FrontierInputs:
    """What the frontier's numbers are computed from: the checkpoint's content (modeling.model_identity) and the
    items each ability contributes. Each cache's and each record's inputs are built here, so that one change
    reaches every result that depends on it and no other."""

    model: dict[str, Any]
    train: dict[str, list[dict[str, Any]]]  # every ability's (scored and contrast) first train_items items
    tests: dict[str, list[dict[str, Any]]]  # every scored ability's first test_items items
    dtype: str = "float32"  # what the test splits are scored in: part of every score's identity
    ablation: str = "zero"  # mean_ablation.ABLATIONS: part of the identity of every score of a region under "mean"

    def ablation_key(self, neurons: list[int]) -> dict[str, Any]:
        """What a region's scores depend on beyond the neurons: under mean ablation the value each is held at, a
        function of the model and every train item (the reference set); nothing under zero ablation or for the
        original model, so that those keys are as they always were."""
        from benchprof.stages.mean_ablation import POOLED

        if self.ablation == "zero" or not neurons:
            return {}
        reference = {a: value_hash(self.statistic_inputs("mean", a)) for a in self.train}  # the cached means' own
        return {"ablation": self.ablation, "reference": reference, "pooled": POOLED}

    def statistic_inputs(self, statistic: str, ability: str) -> dict[str, Any]:
        """A statistic (attribution or activity) of one ability's train items."""
        from benchprof.stages.neurons import OBJECTIVES

        return {
            "stage": "frontier statistic",
            "objective": OBJECTIVES[statistic],
            "model": self.model,
            "items": value_hash(self.train[ability]),
            "n_items": len(self.train[ability]),
        }

    def texts_inputs(self, seed: int, n: int) -> dict[str, Any]:
        """The general text the model samples itself (neurons.general_text)."""
        from benchprof.stages.neurons import GENERAL_METHOD

        return {"stage": "frontier general text", "method": GENERAL_METHOD, "model": self.model, "seed": seed, "n": n}

    def general_inputs(self, statistic: str, texts: list[list[int]]) -> dict[str, Any]:
        """A statistic of the general text."""
        from benchprof.stages.neurons import GENERAL_OBJECTIVES

        return {
            "stage": "frontier statistic",
            "objective": GENERAL_OBJECTIVES[statistic],
            "model": self.model,
            "texts": value_hash(texts),
        }

    def selection_inputs(self, option: str, ability: str, size: int, contrast: tuple[str, ...]) -> dict[str, Any]:
        """An iterative selection: the ability's train items (re-scored in rounds) and the contrast's (held fixed)."""
        from benchprof.stages.neurons import ATTRIBUTION_OBJECTIVE, ITERATIVE_ROUNDS

        return {
            "stage": "frontier selection",
            "option": option,
            "rounds": ITERATIVE_ROUNDS,
            "objective": ATTRIBUTION_OBJECTIVE,
            "model": self.model,
            "ability": ability,
            "size": size,
            "items": {b: value_hash(self.train[b]) for b in dict.fromkeys((ability, *contrast))},
        }

    def evaluation_key(self, neurons: list[int]) -> str:
        """What one evaluation record's numbers are a function of: the model, every scored test item and the
        neurons zeroed (none: the original model). Whichever option chose a region, the same neurons score the same."""
        from benchprof.stages.choices import SCORER

        return value_hash(
            {
                "model": self.model,
                "tests": self.tests,
                "neurons": sorted(neurons),
                "scorer": SCORER,
                "dtype": self.dtype,
                **self.ablation_key(neurons),
            }
        )

    def split_key(self, split: str, neurons: list[int]) -> str:
        """What one split's scores in an evaluation record are a function of: the model, that split's items and
        the neurons zeroed. A split is scored on its own (choices.item_scores per split), so where one split's
        items change the others' scores still hold and are reused."""
        from benchprof.stages.choices import SCORER

        return value_hash(
            {"model": self.model, "split": split, "items": self.tests[split], "neurons": sorted(neurons),
             "scorer": SCORER, "dtype": self.dtype, **self.ablation_key(neurons)}
        )  # fmt: skip

    def summary(self) -> dict[str, Any]:
        """Short hashes of each input, as plan.json records them: what changed since the last run (changed_since)."""
        return {
            "model": value_hash(self.model),
            "train": {a: value_hash(r) for a, r in self.train.items()},
            "test": {a: value_hash(r) for a, r in self.tests.items()},
        }


def load_inputs(plan: FrontierPlan, cache_dir: Path) -> FrontierInputs:
    """The plan's inputs: its items (refused in one line where a split holds fewer than asked) and the checkpoint's
    identity (files hashed once, their records kept in `cache_dir`, the model's outputs folder)."""
    from benchprof.core.modeling import model_identity

    train = {
        a: read_split(plan, a, "train", plan.train_from + plan.train_items, "--train_items")[plan.train_from :]
        for a in dict.fromkeys(plan.abilities + plan.contrast)
    }
    tests = {a: read_split(plan, a, "test", plan.test_items, "--test_items") for a in plan.abilities}
    if plan.transfer_items:  # scored beside the test splits, under their benchmark names
        from benchprof.abilities import TRANSFER, transfer_benchmark

        for a in plan.abilities:
            tests[transfer_benchmark(a)] = read_split(plan, a, TRANSFER, plan.transfer_items, "--transfer_items")
    return FrontierInputs(model_identity(plan.model, cache_dir), train, tests, plan.dtype, plan.ablation)


def changed_since(recorded: dict[str, Any] | None, inputs: FrontierInputs) -> list[str]:
    """Which inputs differ from those plan.json recorded at the last run ("model", "<Ability> train", ...)."""
    before = (recorded or {}).get("inputs")
    if not isinstance(before, dict):
        return []
    now = inputs.summary()
    changed = ["model"] if before.get("model") != now["model"] else []
    for split in ("train", "test"):
        old = before.get(split)
        old = old if isinstance(old, dict) else {}
        changed += [f"{a} {split}" for a, h in now[split].items() if a in old and old[a] != h]
    return changed


def neuron_count(model: str) -> int:
    """MLP neurons of a model (layers x intermediate size), from its config alone, without loading its weights."""
    config_file = Path(model) / "config.json"
    try:
        if config_file.is_file():
            config = json.loads(config_file.read_text())
            config = config.get("text_config", config)
            return int(config["num_hidden_layers"]) * int(config["intermediate_size"])
        from transformers import AutoConfig

        loaded = AutoConfig.from_pretrained(model)
        return int(loaded.num_hidden_layers) * int(loaded.intermediate_size)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise BenchprofError(f"frontier: {model}: cannot read its layers and MLP size ({err})") from None


def whole_number(value: object, flag: str, low: int = 1, high: int | None = None) -> int:
    """An option's whole number in [low, high], refused in one line otherwise."""
    try:
        number = int(str(value))
    except ValueError:
        raise BenchprofError(f"{flag}: {str(value)[:40]!r} is not a whole number") from None
    if number < low or (high is not None and number > high):
        bound = f"at least {low}" if high is None else f"between {low} and {high}"
        raise BenchprofError(f"{flag}: must be {bound}, got {number}")
    return number


def region_sizes(value: object, count: int) -> tuple[int, ...]:
    """--sizes: distinct neuron counts, each at least 1 and at most the model's `count` neurons."""
    from benchprof.core.selection import listed

    given = listed(value)
    if not given:
        raise BenchprofError("--sizes: an empty selection; give one or more region sizes in neurons")
    sizes = [whole_number(v, "--sizes", 1, count) for v in given]
    repeated = next((n for i, n in enumerate(sizes) if n in sizes[:i]), None)
    if repeated is not None:
        raise BenchprofError(f"--sizes: {repeated} is given twice")
    return tuple(sorted(sizes))


def recorded_plan(folder: Path) -> tuple[FrontierPlan, dict[str, Any]]:
    """The plan a frontier folder's plan.json records, and the JSON itself (for what else it holds, its
    model_shape): refused in one line naming the file and the value when it is missing, unreadable, or lacks a
    value of the plan or holds one of the wrong kind (an edited plan.json), never a KeyError."""
    from benchprof.core.layout import FrontierLayout

    path = FrontierLayout(Path(folder)).plan_file
    if not path.is_file():
        raise BenchprofError(f"{path}: not found; measure the frontier first (`benchprof frontier`)")
    recorded = read_plan(path)
    if recorded is None:
        raise BenchprofError(f"{path}: not a JSON object; measure the frontier again to rewrite it")

    def value(key: str, kind: type, default: Any = None) -> Any:
        found = recorded.get(key, default)
        if kind is list:
            ok = isinstance(found, list) and found and all(isinstance(v, str) and v for v in found)
        elif kind is int:
            ok = isinstance(found, int) and not isinstance(found, bool) and found >= 0
        else:
            ok = isinstance(found, str) and bool(found)
        if not ok:
            want = {list: "a list of names", int: "a whole number", str: "a name"}[kind]
            raise BenchprofError(f"{path}: {key!r} is {'missing' if found is None else 'not ' + want}; not a plan")
        return found

    sizes = recorded.get("sizes")
    if not isinstance(sizes, list) or not sizes or not all(isinstance(n, int) and n > 0 for n in sizes):
        raise BenchprofError(f"{path}: 'sizes' is not a list of region sizes; not a plan")
    plan = FrontierPlan(
        model=value("model", str), data_dir=Path(value("data_dir", str)), abilities=tuple(value("abilities", list)),
        out=Path(folder), options=tuple(value("options", list)), sizes=tuple(sizes), draws=value("draws", int),
        contrast=tuple(value("contrast", list)), train_items=value("train_items", int),
        train_from=value("train_from", int, 0), test_items=value("test_items", int),
        transfer_items=value("transfer_items", int, 0), seed=value("seed", int), dtype=value("dtype", str, "float32"),
        ablation=value("ablation", str, "zero"), model_given=value("model", str), data_given=value("data_dir", str),
    )  # fmt: skip
    return plan, recorded


PlanRegion = tuple[str, str, int]  # (option, ability or random draw, size) as a record names it


def plan_regions(plan: FrontierPlan) -> list[PlanRegion]:
    """Every region the plan's report reads a record of: the original model, each (option, ability, size) and each
    random draw of each size (frontier.regions names them so)."""
    return [
        ("original", "-", 0),
        *[(o, a, n) for o in plan.options for a in plan.abilities for n in plan.sizes],
        *[("random", f"draw{d}", n) for n in plan.sizes for d in range(plan.draws)],
    ]


def region_name(region: PlanRegion) -> str:
    option, name, size = region
    return "the original model" if option == "original" else f"{option} {name} at {size} neurons"


def plan_records(plan: FrontierPlan, path: Path) -> list[dict[str, Any]]:
    """The records of evaluations.jsonl (`path`) that a report of `plan` reads: one per region of the plan
    (plan_regions; where several records name one region, the last), each checked to score every split the plan
    names (each ability's test split, and its transfer split where the plan scored them) with the plan's item
    counts. Refused in one line when a region has no record (a line cut short or edited is dropped on read: its
    draw would be missing from the random baseline) or when a record disagrees with the plan (plan.json edited, or
    another plan's records), so that no report rests on fewer draws or items than it says."""
    from benchprof.abilities import transfer_benchmark
    from benchprof.core.storage import read_records

    records = read_records(path)
    last = {(r.get("option"), r.get("region"), r.get("size")): r for r in records}
    splits = {a: plan.test_items for a in plan.abilities}
    if plan.transfer_items:
        splits.update({transfer_benchmark(a): plan.transfer_items for a in plan.abilities})

    def check(region: PlanRegion, record: dict[str, Any]) -> None:
        scores = record.get("acc_norm")
        for split, items in splits.items():
            held = scores.get(split) if isinstance(scores, dict) else None
            if not isinstance(held, list) or len(held) != items:
                found = "no scores" if not isinstance(held, list) else f"{len(held)} items"
                raise BenchprofError(
                    f"{path}: {region_name(region)} has {found} for {split}, where plan.json names {items} items; "
                    "plan.json and its records disagree (an edited plan.json, or another plan's records)"
                )

    wanted = plan_regions(plan)
    if wanted[0] in last:  # the original model's record first: a plan naming other splits is told as such
        check(wanted[0], last[wanted[0]])
    missing = [region for region in wanted if region not in last]
    if missing:
        lines = sum(1 for line in path.read_bytes().splitlines() if line.strip()) if path.is_file() else 0
        cut = lines - len(records)
        dropped = f"; {cut} line(s) of it cut short or edited were dropped" if cut > 0 else ""
        shown = ", ".join(region_name(r) for r in missing[:3]) + (", …" if len(missing) > 3 else "")
        raise BenchprofError(
            f"{path}: no record of {len(missing)} of the plan's {len(wanted)} regions ({shown}){dropped}; rerun "
            "`benchprof frontier` with this plan to score them"
        )
    chosen = [last[region] for region in wanted]
    for region, record in zip(wanted, chosen, strict=True):
        check(region, record)
    return chosen
