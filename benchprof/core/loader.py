"""config.yml on disk: read as YAML (a key given twice refused), benchmark entries spread into
their sections, built and checked into a Config (config.py's dataclasses)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchprof.core.config import Config, validate
from benchprof.core.schema import ConfigError, build

BENCHMARK_ENTRY_KEYS = ("name", "num_fewshot", "limit", "metric")


def _spread_benchmark_entries(raw: dict[str, Any]) -> None:
    """The per-benchmark form of `evals.benchmarks` ({name, num_fewshot, limit, metric} entries) spread
    into the parallel list evals.num_fewshot, evals.limits and aggregate.metrics; a lone include_path
    string made a list. In place; the checks of the values' types are the dataclasses' as usual."""
    evals = raw.get("evals")
    if not isinstance(evals, dict):
        return
    evals = raw["evals"] = dict(evals)
    if isinstance(evals.get("include_path"), str):
        evals["include_path"] = [evals["include_path"]]
    entries = evals.get("benchmarks")
    if not isinstance(entries, list) or not any(isinstance(e, dict) for e in entries):
        return
    if evals.get("num_fewshot"):
        first = next(i for i, e in enumerate(entries) if isinstance(e, dict))
        raise ConfigError(
            f"evals.num_fewshot: a list of numbers cannot go with benchmark entries (evals.benchmarks[{first}] is "
            "one); give num_fewshot in each entry ({name: ..., num_fewshot: N}) and drop the list"
        )
    names, fewshot = [], []
    limits = dict(evals.get("limits") or {})
    aggregate = raw["aggregate"] = dict(raw.get("aggregate") or {})
    metrics = aggregate["metrics"] = dict(aggregate.get("metrics") or {})
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            names.append(entry)
            fewshot.append(0)
            continue
        unknown = sorted(set(entry) - set(BENCHMARK_ENTRY_KEYS))
        if unknown:
            raise ConfigError(
                f"evals.benchmarks[{i}].{unknown[0]}: unknown key (known: {', '.join(BENCHMARK_ENTRY_KEYS)})"
            )
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"evals.benchmarks[{i}].name: required, the benchmark's name")
        names.append(name)
        fewshot.append(entry.get("num_fewshot", 0))
        if "limit" in entry:
            limit = entry["limit"]
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise ConfigError(f"evals.benchmarks[{i}].limit: {limit!r} must be a whole number of documents >= 1")
            limits[name] = limit
        if "metric" in entry:
            if isinstance(entry["metric"], str) and not entry["metric"].strip():
                raise ConfigError(f"evals.benchmarks[{i}].metric: an empty metric name")
            metrics[name] = entry["metric"]
    evals.update(benchmarks=names, num_fewshot=fewshot, limits=limits)


def parse_config(raw: Any, path: Path = Path("config.yml")) -> Config:
    """Build and validate a Config from an already-parsed YAML mapping."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections")
    raw = dict(raw)
    _spread_benchmark_entries(raw)
    if "datasets" in raw:
        ds = raw["datasets"]
        if not isinstance(ds, list):
            raise ConfigError("datasets: expected a list of {name, path, key} entries")
    cfg = build(Config, raw, "")
    cfg.path = path.resolve()
    validate(cfg)
    untagged = [i for i, m in enumerate(raw.get("models") or []) if isinstance(m, dict) and not m.get("tag")]
    find_model_folders(cfg, untagged)
    return cfg


def find_model_folders(cfg: Config, untagged: list[int]) -> None:
    """Give each model named without a `tag:` the outputs folder that already holds its checkpoint.

    A tag names a folder and nothing else: no result depends on it. Without one, the tag is the model
    folder's name, so the same checkpoint reached through a symlink, a renamed folder or a hub snapshot
    path would start an empty folder and redo everything. When the folder of that name does not exist
    yet and another one records exactly these files (modeling.same_model_folder), that one is used.
    """
    from benchprof.core.modeling import same_model_folder

    for i in untagged:
        spec = cfg.models[i]
        if (cfg.output_root / spec.tag).exists():
            continue
        found = same_model_folder(cfg.model_source(spec)[0], cfg.output_root)
        if found is not None and found not in {m.tag for m in cfg.models}:
            spec.tag = found


def load_config(path: str | Path = "config.yml") -> Config:
    """Read, parse and validate config.yml; raise ConfigError naming the key on any problem."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    return parse_config(read_yaml(path), path)


def read_yaml(path: Path) -> Any:
    """A config file's YAML, read as load_config reads it; ConfigError naming the file (and line) when it is not UTF-8
    text, not valid YAML, or gives a key twice."""
    import yaml

    try:
        return _read_yaml(path)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}{where}: not valid YAML ({getattr(err, 'problem', err)})") from None


def _read_yaml(path: Path) -> Any:
    """yaml.safe_load of the file, refusing a key given twice in one mapping (YAML keeps the last silently)."""
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not a UTF-8 text file (byte {err.start}); a config is YAML text") from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            if (size := _expanded_size(node, {})) > MAX_NODES:  # an alias bomb: a few lines that expand to millions
                raise ConfigError(f"{path}: its aliases expand to {size:,} values (at most {MAX_NODES:,})")
            _refuse_duplicate_keys(node, "", path, set())
        return loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()


MAX_NODES = 100_000  # values of a config once its YAML aliases are expanded: a real config has a few hundred


def _expanded_size(node: Any, sizes: dict[int, int]) -> int:
    """How many values the node stands for once every alias is expanded, counted without expanding them (each
    node's size computed once: an alias bomb of n levels costs n steps, not its 10^n values)."""
    import yaml

    if id(node) not in sizes:
        sizes[id(node)] = 0  # a recursive alias counts as one value where it closes its loop
        if isinstance(node, yaml.MappingNode):
            total = sum(_expanded_size(k, sizes) + _expanded_size(v, sizes) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            total = sum(_expanded_size(item, sizes) for item in node.value)
        else:
            total = 0
        sizes[id(node)] = min(1 + total, 10**12)
    return sizes[id(node)]


def _refuse_duplicate_keys(node: Any, key: str, path: Path, seen: set[int]) -> None:
    """ConfigError naming the key path and lines of the first key given twice in a mapping under `node`."""
    import yaml

    if id(node) in seen:  # an alias to a node already checked
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        lines: dict[str, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # <<: *anchor merges, it does not repeat
                _refuse_duplicate_keys(value_node, key, path, seen)
                continue
            name = str(key_node.value)
            sub = f"{key}.{name}" if key else name
            line = key_node.start_mark.line + 1
            if name in lines:
                raise ConfigError(f"{sub}: duplicate key ({path} line {line}; first on line {lines[name]})")
            lines[name] = line
            _refuse_duplicate_keys(value_node, sub, path, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _refuse_duplicate_keys(item, f"{key}[{i}]", path, seen)


def effective_config(cfg: Config) -> Path:
    """A config file that loads back into `cfg` as it is now, for the processes benchprof starts (torchrun's
    ranks, evaluate's workers): a Config built or changed in Python reaches them whole, not as its file says.

    Every path in it is absolute (a model or dataset that is not a local path stays a hub id), so it
    loads the same from anywhere. Written once per content under `<output_dir>/.configs/<hash>.yml`.
    """
    import dataclasses

    import yaml

    from benchprof.core.storage import make_folder, value_hash, write_text

    raw = dataclasses.asdict(cfg)
    del raw["path"]
    raw["settings"]["output_dir"] = str(cfg.output_root)
    raw["data"]["dir"] = str(cfg.resolve(cfg.data.dir))
    for entry, spec in zip(raw["models"], cfg.models):
        entry["name"], entry["tokenizer"] = cfg.model_source(spec)
    for entry in raw["datasets"]:
        if entry["path"] and cfg.resolve(entry["path"]).exists():
            entry["path"] = str(cfg.resolve(entry["path"]))
    raw["evals"]["include_path"] = [str(cfg.resolve(p)) for p in cfg.evals.include_path]
    raw["evals"]["dataset_paths"] = {b: str(cfg.resolve(p)) for b, p in cfg.evals.dataset_paths.items()}
    folder = cfg.output_root / ".configs"
    path = folder / f"{value_hash(raw)}.yml"
    if not path.is_file():
        make_folder(folder)
        write_text(path, yaml.safe_dump(raw, sort_keys=False))
    return path
