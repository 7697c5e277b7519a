"""Stage `data`: generate the ability datasets, and load any ability's split (generated, a JSONL
folder or a Hugging Face dataset) with its schema checked."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from benchprof import BenchprofError
from benchprof.abilities import ABILITIES, split_sizes
from benchprof.core.config import Config
from benchprof.core.layout import DATA_SPLITS, data_file, data_output
from benchprof.core.selection import select
from benchprof.core.storage import clear_manifest, is_current, write_manifest, write_text

# required fields; optional: "cluster" (str or int; items sharing it are resampled together by aggregate)
SCHEMA: dict[str, type | tuple[type, ...]] = {
    "id": (str, int),
    "ability": str,
    "question_type": str,
    "context": str,
    "question": str,
    "options": list,
    "answer": str,
    "label": int,
}


def check_record(record: Any, where: str) -> dict[str, Any]:
    """Raise BenchprofError naming `where` (file:line) if `record` breaks the schema."""
    if not isinstance(record, dict):
        raise BenchprofError(f"{where}: expected a JSON object, got {type(record).__name__}")
    for key, kind in SCHEMA.items():
        if key not in record:
            raise BenchprofError(f"{where}: missing field {key!r}")
        if not isinstance(record[key], kind) or isinstance(record[key], bool):
            raise BenchprofError(f"{where}: field {key!r} has type {type(record[key]).__name__}")
    cluster = record.get("cluster")
    if cluster is not None and (not isinstance(cluster, (str, int)) or isinstance(cluster, bool)):
        raise BenchprofError(f"{where}: optional field 'cluster' has type {type(cluster).__name__}")
    options, label = record["options"], record["label"]
    if len(options) < 2 or not all(isinstance(o, str) for o in options):
        raise BenchprofError(f"{where}: 'options' must be a list of at least two strings")
    if not 0 <= label < len(options):
        raise BenchprofError(f"{where}: 'label' {label} is out of range for {len(options)} options")
    if options[label] != record["answer"]:
        raise BenchprofError(f"{where}: options[label] is {options[label]!r}, not the answer {record['answer']!r}")
    return record


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of a JSONL file, each checked; an error names the file and line."""
    path = Path(path)
    if not path.is_file():
        raise BenchprofError(f"{path}: file not found")
    records = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise BenchprofError(f"{path}:{lineno}: not valid JSON ({err.msg})") from None
            records.append(check_record(record, f"{path}:{lineno}"))
    if not records:
        raise BenchprofError(f"{path}: no records")
    return records


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def ability_folder(cfg: Config, ability: str) -> Path:
    """Where an ability's train.jsonl/test.jsonl live: its `path`, or the generated folder."""
    spec = cfg.dataset(ability)
    return cfg.resolve(spec.path) if spec.path else cfg.resolve(cfg.data.dir) / ability


def looks_like_path(name: str) -> bool:
    """A name that can only be a local path: a hub id is 'org/name' (or 'name' for a model)."""
    return name.startswith(("/", ".", "~")) or name.count("/") > 1 or "\\" in name


def is_hub_id(cfg: Config, ability: str) -> bool:
    """A `datasets[i].path` that names a Hugging Face dataset ('org/name'): not a folder that exists, not
    written as a path, and not under a folder beside the config ('mydata/QR' with mydata/ there is a missing
    folder, not a hub id)."""
    spec = cfg.dataset(ability)
    return (
        bool(spec.path)
        and not cfg.resolve(spec.path).exists()
        and "/" in spec.path
        and not looks_like_path(spec.path)
        and not cfg.resolve(spec.path.split("/")[0]).is_dir()
    )


def generated_splits(cfg: Config, ability: str) -> tuple[str, ...]:
    """The splits the data stage writes for `ability`: train and test, and its transfer split where data.transfer_size
    asks for one and its generator has one (a user's folder holds train and test)."""
    from benchprof.abilities import TRANSFER, has_transfer

    wanted = cfg.data.transfer_size > 0 and has_transfer(ability) and not cfg.dataset(ability).path
    return (*DATA_SPLITS, TRANSFER) if wanted else DATA_SPLITS


def load_split(cfg: Config, ability: str, split: str) -> list[dict[str, Any]]:
    """An ability's split as checked records: from a JSONL folder, generated data or the hub."""
    from benchprof.abilities import TRANSFER

    if split not in (*DATA_SPLITS, TRANSFER):
        raise BenchprofError(f"unknown split {split!r} (known: {', '.join((*DATA_SPLITS, TRANSFER))})")
    if split == TRANSFER and TRANSFER not in generated_splits(cfg, ability):
        raise BenchprofError(f"{ability}: no transfer split (set data.transfer_size, for a generated ability)")
    spec = cfg.dataset(ability)
    if is_hub_id(cfg, ability):
        import datasets

        try:
            rows = datasets.load_dataset(spec.path, spec.subset or None, split=split)
        except Exception as err:  # datasets raises many kinds; the message is what matters
            raise BenchprofError(f"datasets.{ability}.path: cannot load {spec.path!r}: {err}") from None
        if len(rows) == 0:
            raise BenchprofError(f"datasets.{ability}.path: {spec.path!r} has no {split} records")
        return [check_record(dict(r), f"{spec.path}[{split}][{i}]") for i, r in enumerate(rows)]
    path = data_file(ability_folder(cfg, ability), split)
    if not path.is_file():
        hint = " (run `benchprof data` first)" if not spec.path else ""
        raise BenchprofError(f"{path}: file not found for datasets.{ability}{hint}")
    return read_jsonl(path)


def data_inputs(cfg: Config, ability: str, train_size: int, test_size: int, seed: int) -> dict[str, Any]:
    """What a generated folder depends on (its manifest records these). The difficulty is recorded only where it
    changes the items (an easy level the ability has): paper-level folders made before it existed stay current."""
    from benchprof import __version__
    from benchprof.abilities import GENERATORS_VERSION, INVENTED, TRANSFER, has_easy_level

    inputs: dict[str, Any] = {
        "ability": ability,
        "train_size": train_size,
        "test_size": test_size,
        "seed": seed,
        "generator_version": f"{__version__}/{GENERATORS_VERSION}",
    }
    if cfg.data.difficulty != "paper" and has_easy_level(ability):
        inputs["difficulty"] = cfg.data.difficulty
    # recorded only where they change the files: folders written before they existed stay current
    if cfg.data.split_by != "question" and ability not in INVENTED:
        inputs["split_by"] = cfg.data.split_by
    if TRANSFER in generated_splits(cfg, ability):
        inputs["transfer_size"] = cfg.data.transfer_size
    return inputs


def generate_ability(
    folder: Path, ability: str, train_size: int, test_size: int, seed: int, inputs: dict[str, Any]
) -> None:
    """Write one ability's train/test JSONL files (abilities.splits: generated at the difficulty and split rule
    `inputs` records, or an invented ability's fixed splits), its transfer split when `inputs` asks for one, and
    its manifest (last)."""
    sizes = (train_size, test_size)
    from benchprof.abilities import TRANSFER, splits, transfer_split

    started = time.time()
    level, split_by = inputs.get("difficulty", "paper"), inputs.get("split_by", "question")
    train, test = splits(ability, train_size, test_size, seed, level, split_by)
    transfer = inputs.get("transfer_size", 0)
    clear_manifest(folder)  # a run killed below must not leave an old manifest over new files
    data_file(folder, TRANSFER).unlink(missing_ok=True)  # a transfer split of other inputs is not left beside
    write_jsonl(data_file(folder, "train"), train)
    write_jsonl(data_file(folder, "test"), test)
    if transfer:
        write_jsonl(data_file(folder, TRANSFER), transfer_split(ability, transfer, *sizes, seed, level, split_by))
    write_manifest(folder, inputs, started=started)


def data(
    cfg: Config,
    ability: str | None = None,
    out: str | None = None,
    train_size: int | None = None,
    test_size: int | None = None,
    seed: int | None = None,
    difficulty: str | None = None,
    split_by: str | None = None,
    transfer_size: int | None = None,
    force: bool = False,
) -> None:
    """Generate the ability datasets: <dir>/<Ability>/{train,test}.jsonl.

    Abilities whose `datasets:` entry has a `path` use the user's data and are not generated.

    Arguments:
        cfg: the config (on the command line: the path of config.yml).
        ability: only this ability (or a comma-separated list); default all in `datasets:`.
        out: output folder; default `data.dir` from the config.
        train_size: items in each train split; default `data.train_size`.
        test_size: items in each test split; default `data.test_size`.
        seed: generator seed; default `data.seed`. Same seed, byte-identical files.
        difficulty: paper (the paper's kinds of question) or easy (one step, two facts, wrong options far from the
            answer and out of the context: for a small model); default `data.difficulty`.
        split_by: question (no test item's context and question in the train split, as every earlier version) or
            problem (no test item's problem, names and wording masked, in the train split); default `data.split_by`.
        transfer_size: items of each ability's transfer split (formats its train split never uses), 0 for none;
            default `data.transfer_size`.
        force: regenerate even when the files match the requested sizes and seed.
    """
    started = time.time()
    names = select(ability, cfg.abilities() or list(ABILITIES), "--ability")
    # --out is relative to where the command runs, data.dir to the config's folder
    cfg = cfg.with_overrides(
        data={
            "dir": str(Path(out).resolve()) if out else None,
            "train_size": train_size,
            "test_size": test_size,
            "seed": seed,
            "difficulty": difficulty,
            "split_by": split_by,
            "transfer_size": transfer_size,
        }
    )
    write_data(cfg, names, force, started)


def write_data(cfg: Config, names: list[str], force: bool = False, started: float | None = None) -> None:
    """Generate the data of `names` under data.dir (skipping user-supplied abilities and files already current)
    and print the stage's one-line summary: the `data` command, and `run`'s data stage."""
    started = time.time() if started is None else started
    root = cfg.resolve(cfg.data.dir)
    train_size, test_size, seed = cfg.data.train_size, cfg.data.test_size, cfg.data.seed
    written, skipped, smaller = [], [], []
    for name in names:
        if name in cfg.abilities() and cfg.dataset(name).path:
            skipped.append(name)  # the user's own data
            continue
        folder = root / name
        sizes = split_sizes(name, train_size, test_size, seed)
        inputs = data_inputs(cfg, name, *sizes, seed)
        if not force and is_current(data_output(folder, name), inputs):
            skipped.append(name)
            continue
        generate_ability(folder, name, *sizes, seed, inputs)
        written.append(name)
        if sizes != (train_size, test_size):
            smaller.append(f"{name} {sizes[0]} / {sizes[1]}")
    fewer = f"; fewer where the splits hold fewer: {', '.join(smaller)}" if smaller else ""
    print(
        f"data: wrote {len(written)} abilities ({train_size} train / {test_size} test each{fewer}), "
        f"{len(skipped)} up to date or user-supplied, in {root} ({time.time() - started:.1f}s)"
    )
