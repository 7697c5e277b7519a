"""`preflight`: the checks `run` makes on the whole plan before any heavy work, writing nothing.

Everything a config names that lives outside the YAML is looked at here: devices and backend,
each model's folder or hub id and tokenizer, the k values against the model's size, user datasets,
composites, task YAMLs, benchmarks and metrics, and whether the output folders can be written.
Checks that need only the YAML live in config.py.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchprof import BenchprofError
from benchprof.core.config import KNOWN_ABILITIES, Config, ModelSpec
from benchprof.core.modeling import hub_unreachable

if TYPE_CHECKING:
    from transformers import PretrainedConfig


def needed_abilities(cfg: Config) -> list[str]:
    """Abilities whose data the run needs: profiled ones, ability benchmarks, composite parts."""
    return list(
        dict.fromkeys(
            cfg.abilities()
            + [split[0] for b in cfg.evals.benchmarks if (split := cfg.split_of(b)) is not None]
            + [a for c in cfg.evals.composites.values() for a in c["abilities"]]
        )
    )


@dataclass
class ModelFacts:
    """What transformers says of a model without reading its weights: whether its tokenizer has a chat template
    (None: the tokenizer did not load), its layers and each parameter's size (tied weights once, from the model
    built on the meta device), or why that build fails."""

    chat_template: bool | None
    layers: int = 0
    parameters: dict[str, int] = field(default_factory=dict)
    unbuildable: str = ""


MODEL_FACTS_FORMAT = 1  # of the cached ModelFacts: a change of what they hold invalidates every one kept
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack", ".onnx")


def model_shape(model_config: PretrainedConfig) -> tuple[int, dict[str, int]]:
    """(layers, parameter name -> size) of a model config, built on the meta device (no weights read or
    allocated); tied weights are one parameter, as modeling.total_params counts them."""
    import torch
    from transformers import AutoModelForCausalLM

    from benchprof.core.modeling import num_layers

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(model_config)
    return num_layers(model), {name: p.numel() for name, p in model.named_parameters()}


def parameter_counts(facts: ModelFacts, scope: str, front: int, back: int) -> tuple[int, int, int]:
    """(total parameters, eligible parameters, layers) of a model."""
    from benchprof.core.modeling import eligible_names

    eligible = eligible_names(facts.parameters, scope, facts.layers, front, back)
    return sum(facts.parameters.values()), sum(facts.parameters[n] for n in eligible), facts.layers


def read_model(i: int, source: str, tokenizer_source: str, problems: list[str]) -> ModelFacts | None:
    """ModelFacts through transformers: the config read, the tokenizer loaded, the model built on the meta device.
    None when the config cannot be read; that and a tokenizer that does not load are problem lines."""
    from transformers import AutoConfig, AutoTokenizer

    try:
        model_config = AutoConfig.from_pretrained(source)
    except Exception as err:  # OSError, ValueError, hub errors: the message is what matters
        problems.append(f"models[{i}].name: cannot read the config of {source!r} ({str(err).strip().splitlines()[0]})")
        return None
    facts = ModelFacts(chat_template=None)
    try:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_source)
    except Exception as err:
        problems.append(f"models[{i}].tokenizer: cannot load {tokenizer_source!r} ({str(err).strip().splitlines()[0]})")
    else:
        facts.chat_template = bool(getattr(tokenizer, "chat_template", None))
    try:
        facts.layers, facts.parameters = model_shape(model_config)
    except Exception as err:  # an architecture transformers cannot build: the k check says so
        facts.unbuildable = str(err).strip().splitlines()[0]
    return facts


def model_facts_key(source: str, tokenizer_source: str) -> list[Any] | None:
    """What read_model's answer depends on for local folders: the content of every file of the model's and the
    tokenizer's folders but the weights (which it never reads) and the versions of the libraries that read them.
    None for a hub id, whose facts are not kept."""
    from importlib.metadata import version

    from benchprof.core.storage import file_hash

    folders = [Path(f) for f in dict.fromkeys([source, tokenizer_source])]
    if not all(f.is_dir() for f in folders):
        return None
    files = [
        {
            str(path.relative_to(f)): file_hash(path)
            for path in sorted(f.rglob("*"))
            if path.is_file()
            and path.suffix not in WEIGHT_SUFFIXES
            and not any(part.startswith(".") for part in path.relative_to(f).parts)
        }
        for f in folders
    ]
    return [MODEL_FACTS_FORMAT, {lib: version(lib) for lib in ("torch", "transformers", "tokenizers")}, files]


SHIPPED_FACTS = Path(__file__).resolve().parents[1] / "assets" / "model_facts.json"  # scripts/ship_model_facts.py


def shipped_facts(key: list[Any]) -> Any:
    """read_model's answer for a model shipped with benchprof (the demo model), written with the package for the
    same key (the folder's files but the weights, and the library versions), so that a new user's first dry run
    needs no transformers; None for any other key, or when the file cannot be read."""
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
        return next((entry["facts"] for entry in json.loads(SHIPPED_FACTS.read_text()) if entry["key"] == key), None)
    return None


def model_facts(i: int, source: str, tokenizer_source: str, problems: list[str]) -> ModelFacts | None:
    """read_model's answer, kept in the user's cache by model_facts_key when it found no problem (and shipped for
    the demo model): importing transformers and torch (about 3 s on 2 cores) is needed only for a model, or a
    library, not checked before."""
    from benchprof.core.user_cache import keep_cached, read_cached

    key = model_facts_key(source, tokenizer_source)
    kept = (read_cached("model_facts", key) or shipped_facts(key)) if key is not None else None
    if isinstance(kept, dict):
        try:
            return ModelFacts(**kept)
        except TypeError:
            pass  # another shape: read again
    found: list[str] = []
    facts = read_model(i, source, tokenizer_source, found)
    problems += found
    if facts is not None and not found and key is not None:
        keep_cached("model_facts", key, asdict(facts))
    return facts


def check_model(
    cfg: Config, i: int, spec: ModelSpec, problems: list[str], warnings: list[str], finetune: bool
) -> ModelFacts | None:
    """Model folder or hub id, tokenizer and chat template; returns the model's ModelFacts when its config is
    readable."""
    from benchprof.stages.data import looks_like_path

    source, tokenizer_source = cfg.model_source(spec)
    key = f"models[{i}].name"
    if Path(source).is_dir():
        if not (Path(source) / "config.json").is_file():
            problems.append(f"{key}: {source}: no config.json (not a Hugging Face model folder)")
            return None
        from benchprof.core.modeling import whole_safetensors

        if not any(next(Path(source).glob(pattern), None) for pattern in ("*.safetensors", "*.bin", "*.pt", "*.pth")):
            problems.append(f"{key}: {source}: no weights (*.safetensors or *.bin) in the model folder")
            return None
        for weights in sorted(Path(source).glob("*.safetensors")):  # reads each header only: a cut file shows
            if not whole_safetensors(weights):
                problems.append(f"{key}: {weights}: cut short or damaged (its size disagrees with its header)")
                return None
    elif looks_like_path(source) or Path(source).exists():
        problems.append(f"{key}: {cfg.resolve(source)}: model folder not found")
        return None
    elif (why := hub_unreachable(source)) is not None:  # in seconds: transformers retries for half a minute
        problems.append(f"{key}: {why}")
        return None
    facts = model_facts(i, source, tokenizer_source, problems)
    if facts is not None and finetune and facts.chat_template is False:
        warnings.append(
            f"models[{i}].tokenizer: {tokenizer_source!r} has no chat template; the importance "
            "pass uses the plain 'role: content' format (prompts.plain_text)"
        )
    return facts


def check_k_values(cfg: Config, spec: ModelSpec, facts: ModelFacts, problems: list[str], warnings: list[str]) -> None:
    """n = floor(k * total parameters) must fit in the eligible weights of the layer range."""
    scope, front, back = cfg.finetune.scope, cfg.settings.front_removal, cfg.settings.back_removal
    if facts.unbuildable:
        problems.append(f"models: {spec.name!r}: cannot count parameters ({facts.unbuildable})")
        return
    total, eligible, n_layers = parameter_counts(facts, scope, front, back)
    if front + back >= n_layers:
        problems.append(
            f"settings.front_removal/back_removal: {front} + {back} remove all {n_layers} layers of {spec.tag}"
        )
        return
    for i, k in enumerate(cfg.settings.k_values):
        n = math.floor(k * total)
        if n > eligible:
            problems.append(
                f"settings.k_values[{i}]: k={k} selects n = floor(k * {total}) = {n} weights, more "
                f"than the {eligible} eligible in {spec.tag} (finetune.scope {scope}, layers "
                f"{front}..{n_layers - back - 1}); lower k or front/back_removal"
            )
        elif n == 0:  # a region of no weight: every AIS would be +0.000, a wrong result, not a small one
            problems.append(
                f"settings.k_values[{i}]: k={k} selects no weight of {spec.tag}: n = floor(k * {total}) = 0 "
                f"({eligible} eligible); raise k to at least {1 / total:.3g}"
            )


def check_benchmarks(cfg: Config, problems: list[str]) -> None:
    """Every benchmark is an ability, a composite, a task under evals.include_path, or a task lm-eval knows."""
    import difflib

    from benchprof.stages.tasks import is_standard, local_copy_files, tasks_dir

    for benchmark in cfg.evals.dataset_paths:  # its split mapping and few-shot source (tasks.local_task_spec)
        try:
            local_copy_files(cfg, benchmark, tasks_dir(cfg))
        except BenchprofError as err:
            problems.append(str(err))
    standard = [b for b in cfg.evals.benchmarks if is_standard(cfg, b)]
    if not standard:
        return
    known = set(builtin_tasks())
    for i, benchmark in enumerate(cfg.evals.benchmarks):
        if benchmark in standard and benchmark not in known:
            close = difflib.get_close_matches(benchmark, sorted(known) + list(KNOWN_ABILITIES), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            problems.append(
                f"evals.benchmarks[{i}]: unknown benchmark {benchmark!r} (not an lm-eval task, "
                f"an ability, an evals.composites entry or a task under evals.include_path{hint})"
            )


def builtin_tasks() -> dict[str, Path | None]:
    """lm-eval's own tasks, groups and tags: name -> YAML (None for a tag); tasks.builtin_index, cached."""
    from benchprof.stages.tasks import builtin_index

    return {name: path for name, (path, _) in builtin_index().items()}


def check_metrics(cfg: Config, problems: list[str]) -> None:
    """Each aggregate.metrics override is a metric its benchmark's task reports (the task YAML's metric_list;
    a group, a tag or a task without one is not checked here, aggregate says so)."""
    from benchprof.stages.tasks import is_local, is_standard, task_yaml, try_task_yaml, user_tasks

    for benchmark, override in cfg.aggregate.metrics.items():
        if is_local(cfg, benchmark):
            spec = json.loads(task_yaml(benchmark, Path(benchmark)))
        else:
            path = (builtin_tasks() if is_standard(cfg, benchmark) else user_tasks(cfg)).get(benchmark)
            spec, unreadable = try_task_yaml(path) if path is not None else ({}, None)
            if unreadable:  # check_user_tasks or lm-eval names it
                continue
        known = [str(m["metric"]) for m in spec.get("metric_list") or [] if isinstance(m, dict) and "metric" in m]
        if known and override.split(",")[0] not in known:
            problems.append(
                f"aggregate.metrics.{benchmark}: {override!r} is not a metric of its task (it reports "
                f"{', '.join(known)})"
            )


def check_datasets(cfg: Config, problems: list[str], finetune: bool) -> None:
    """User-supplied dataset folders hold readable, well-formed splits the plan uses."""
    from benchprof.core.layout import data_file
    from benchprof.stages.data import is_hub_id, read_jsonl

    used_test = set(needed_abilities(cfg)) - (
        set(cfg.abilities())
        - set(cfg.evals.benchmarks)
        - {a for c in cfg.evals.composites.values() for a in c["abilities"]}
    )
    for i, spec in enumerate(cfg.datasets):
        if not spec.path or is_hub_id(cfg, spec.name):
            continue  # generated by `data`, or a hub dataset (read when a stage needs it)
        folder = cfg.resolve(spec.path)
        if not folder.is_dir():
            problems.append(f"datasets[{i}].path: {folder}: folder not found")
            continue
        splits = (["train"] if finetune else []) + (["test"] if spec.name in used_test else [])
        for split in splits:
            try:
                read_jsonl(data_file(folder, split))
            except BenchprofError as err:
                problems.append(f"datasets[{i}].path: {err}")


def check_devices(cfg: Config, problems: list[str], warnings: list[str]) -> None:
    """evals.device names a device torch knows and, for cuda, that this machine has; GPUs listed in
    settings.cuda_visible_devices without CUDA are a warning (the stages then run on the CPU)."""
    if cfg.evals.device == "cpu" and not cfg.settings.devices():
        return  # nothing to ask torch (1.2 s to import) about: the CPU is always there
    import torch

    from benchprof.core.modeling import pick_device

    try:
        pick_device(cfg.evals.device)
    except BenchprofError as err:
        problems.append(str(err))
    if cfg.settings.devices() and not torch.cuda.is_available():
        warnings.append(
            f"settings.cuda_visible_devices: {cfg.settings.cuda_visible_devices!r}, but CUDA is not available on "
            "this machine; every stage runs on the CPU"
        )


def checkpoint_dtype(folder: Path) -> str:
    """The dtype a local checkpoint's config.json names (what dtype auto loads), or "" when it names none."""
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return ""
    return str(config.get("dtype") or config.get("torch_dtype") or "")


def check_cpu_bfloat16(cfg: Config, warnings: list[str]) -> None:
    """A model evaluated in bfloat16 (asked for, or the checkpoint's own under dtype auto) on a CPU without
    bfloat16 units is a warning naming each key: torch emulates bfloat16 there (6.9x slower than float32 on an AMD
    EPYC; docs/research/performance.md, section 5). torch is imported only for such a model."""
    from benchprof.core.modeling import cpu_bfloat16, pick_device
    from benchprof.stages.damage import eval_dtype, eval_dtype_key

    keys = []
    for i, spec in enumerate(cfg.models):
        dtype, key = eval_dtype(cfg, spec), eval_dtype_key(cfg, i)
        if dtype == "auto" and checkpoint_dtype(Path(cfg.model_source(spec)[0])) == "bfloat16":
            dtype, key = "bfloat16", f"{key} (auto: the checkpoint's bfloat16)"
        if dtype == "bfloat16" and key not in keys:
            keys.append(key)
    if not keys or cfg.evals.backend != "hf":
        return
    try:
        if pick_device(cfg.evals.device) != "cpu":
            return
    except BenchprofError:
        return  # check_devices names the device
    native, name = cpu_bfloat16()
    if not native:
        warnings.append(
            f"{', '.join(keys)}: bfloat16 on a CPU without bfloat16 units ({name or 'this one'}), where torch "
            "emulates it: evaluation is slower than in float32 here (6.9x on an AMD EPYC; "
            "docs/research/performance.md, section 5)"
        )


def check_backend(cfg: Config, problems: list[str]) -> None:
    import importlib.util

    if cfg.evals.backend == "vllm" and importlib.util.find_spec("vllm") is None:
        problems.append(
            "evals.backend: vllm is not installed (pip install vllm, on a GPU node); backend hf needs nothing more"
        )


def test_items(cfg: Config, ability: str) -> tuple[int, str] | None:
    """(items, where that number comes from) of an ability's test split; None for a hub dataset or a file
    that cannot be read (check_datasets names that one)."""
    from benchprof.core.layout import data_file
    from benchprof.stages.data import ability_folder, is_hub_id

    if not cfg.dataset(ability).path:
        return cfg.data.test_size, "data.test_size"
    if is_hub_id(cfg, ability):
        return None
    path = data_file(ability_folder(cfg, ability), "test")
    try:
        with open(path, encoding="utf-8") as f:
            return sum(1 for line in f if line.strip()), str(path)
    except OSError:
        return None


def check_composites(cfg: Config, problems: list[str]) -> None:
    """A composite's size takes size // #abilities items of each ability's test split: each must have them."""
    for name, spec in cfg.evals.composites.items():
        if name not in cfg.evals.benchmarks or spec.get("size") is None:
            continue
        share = int(spec["size"]) // len(spec["abilities"])
        for ability in spec["abilities"]:
            found = test_items(cfg, ability)
            if found is not None and found[0] < share:
                problems.append(
                    f"evals.composites.{name}.size: {spec['size']} takes {share} test items of each of its "
                    f"{len(spec['abilities'])} abilities, and {ability} has {found[0]} ({found[1]})"
                )


def yaml_problem(err: Exception) -> str:
    """The first line of what a YAML reader raised, with the line of the file it stopped at."""
    mark = getattr(err, "problem_mark", None)
    text = getattr(err, "problem", None) or str(err).strip() or type(err).__name__
    return (f"line {mark.line + 1}: " if mark is not None else "") + str(text).splitlines()[0]


def check_user_tasks(cfg: Config, problems: list[str]) -> None:
    """Every task YAML under evals.include_path can be read (lm-eval skips one it cannot read without a word:
    its task is then 'unknown'), and the local data files of the benchmarks' own tasks exist."""
    import glob

    from benchprof.stages.tasks import include_paths, try_task_yaml, user_tasks

    for root in include_paths(cfg):
        files = [root] if root.is_file() else sorted(root.glob("**/*.yaml"))
        for path in files:
            _, unreadable = try_task_yaml(path)
            if unreadable:
                problems.append(
                    f"evals.include_path: {path}: lm-eval cannot read this task YAML ({yaml_problem(unreadable)})"
                )
    own = user_tasks(cfg)
    for i, benchmark in enumerate(cfg.evals.benchmarks):
        if benchmark not in own or benchmark in cfg.evals.dataset_paths:
            continue
        spec, unreadable = try_task_yaml(own[benchmark])
        if unreadable:  # reported above
            continue
        shots = cfg.evals.fewshot(benchmark)
        sources = [spec.get(key) for key in ("fewshot_split", "training_split", "validation_split")]
        if shots and not any(source and source != spec.get("test_split") for source in sources):
            # lm-eval then draws the examples from the split it scores
            problems.append(
                f"evals.num_fewshot[{i}]: {benchmark} ({own[benchmark]}) has no fewshot, training or validation "
                f"split apart from the one it scores; its {shots} examples would come from that split; use 0"
            )
        data_files = (spec.get("dataset_kwargs") or {}).get("data_files") or {}
        values = list(data_files.values()) if isinstance(data_files, dict) else [data_files]
        names = [str(n) for value in values for n in (value if isinstance(value, list) else [value])]
        local = str(spec.get("dataset_path") or "")
        if local.startswith(("/", ".", "~")):
            names.append(local)
        for name in names:
            if "://" in name or (glob.glob(os.path.expanduser(name)) if glob.has_magic(name) else Path(name).exists()):
                continue
            where = "" if Path(name).is_absolute() else f" (relative to the working directory {Path.cwd()})"
            problems.append(f"evals.benchmarks[{i}]: {benchmark} ({own[benchmark]}): data {name} not found{where}")


def check_writable(key: str, folder: Path, problems: list[str]) -> None:
    """`folder`, or the nearest existing folder above it, can be written (nothing is created)."""
    existing = Path(folder)
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        problems.append(f"{key}: {existing} is not a folder")
    elif not os.access(existing, os.W_OK | os.X_OK):
        problems.append(f"{key}: {existing} is not writable")


def datasets_cache_problems() -> list[str]:
    """The datasets library's cache (HF_DATASETS_CACHE, else HF_HOME/datasets, as `datasets.config` reads them) can
    be written: lm-eval prepares every benchmark there, and a read-only one fails only after the model has loaded."""
    from huggingface_hub import constants

    cache = Path(os.environ.get("HF_DATASETS_CACHE") or Path(constants.HF_HOME) / "datasets")
    found: list[str] = []
    check_writable("HF_DATASETS_CACHE", cache, found)
    hint = "lm-eval prepares each benchmark there: set HF_DATASETS_CACHE to a writable folder"
    return [f"{line} ({hint})" for line in found]


def check_invented_seed(cfg: Config, problems: list[str]) -> None:
    """An invented ability's splits (invented.py) are a world of invented facts drawn by data.seed: a model planted
    with them (its planted.json, scripts/plant_real.py apply) knows the world of its planting's data seed only."""
    from benchprof.abilities import INVENTED

    used = [a for a in needed_abilities(cfg) if a in INVENTED and not cfg.dataset(a).path]
    for i, spec in enumerate(cfg.models):
        info_file = Path(cfg.model_source(spec)[0]) / "planted.json"
        if not used or not info_file.is_file():
            continue
        settings = json.loads(info_file.read_text()).get("settings", {})
        planted = [a for a in used if a in settings.get("abilities", [])]
        if planted and settings.get("data_seed") != cfg.data.seed:
            problems.append(
                f"data.seed: {cfg.data.seed}, but models[{i}] ({info_file}) was planted with {', '.join(planted)} "
                f"drawn with data seed {settings.get('data_seed')}: another seed is another invented world; "
                f"set data.seed: {settings.get('data_seed')}"
            )


def preflight(cfg: Config, eval_only: bool = False) -> list[str]:
    """Check the whole plan before any heavy work; write nothing but the user's cache (model_facts,
    tasks.builtin_index).

    Checks: evals.device and evals.backend usable here (GPUs listed without CUDA, or bfloat16 evaluation on a CPU
    without bfloat16 units: a warning), each model's folder (config.json) or hub id (in the local cache when
    offline), its tokenizer (and chat template, else a warning), k values against the model's eligible parameter
    count (from its config, on the meta device; a k that selects no weight is refused; a local model's answers are
    kept by the content of its files, so torch and transformers are imported only for a model not checked before),
    user dataset folders readable and well formed, composites no larger than their abilities' test splits, the task
    YAMLs under evals.include_path readable and their data files present, every benchmark known to benchprof or
    lm-eval (and each aggregate.metrics override a metric its task reports), output folders and the datasets
    library's cache writable. Raises
    BenchprofError with one line per problem; returns the warnings. The cheap checks run first and report
    alone (folders; then task YAMLs and benchmark names, from a cached index of lm-eval's tasks): an unknown
    benchmark is named in about a second, and the model and device checks follow once those pass.
    """
    problems: list[str] = []
    warnings: list[str] = []
    finetune = not eval_only and bool(cfg.abilities())
    # the cheap checks first, and alone: an unwritable folder or an unknown benchmark is reported at once, not
    # after importing torch and transformers for the device and model checks below (about 3 s on 2 cores, where
    # a model is checked for the first time or CUDA is asked about)
    check_writable("settings.output_dir", cfg.output_root, problems)
    if cfg.evals.benchmarks:
        problems += datasets_cache_problems()
    if any(not cfg.dataset(a).path for a in needed_abilities(cfg)):
        check_writable("data.dir", cfg.resolve(cfg.data.dir), problems)
    if problems:
        raise BenchprofError("\n".join(problems))
    check_user_tasks(cfg, problems)  # before the benchmarks: an unreadable task YAML is why its task is unknown
    check_benchmarks(cfg, problems)
    if problems:
        raise BenchprofError("\n".join(problems))
    check_devices(cfg, problems, warnings)
    check_cpu_bfloat16(cfg, warnings)
    check_backend(cfg, problems)
    for i, spec in enumerate(cfg.models):
        facts = check_model(cfg, i, spec, problems, warnings, finetune)
        if facts is not None and finetune:
            check_k_values(cfg, spec, facts, problems, warnings)
    check_datasets(cfg, problems, finetune)
    check_invented_seed(cfg, problems)
    check_composites(cfg, problems)
    check_metrics(cfg, problems)
    if problems:
        raise BenchprofError("\n".join(problems))
    return warnings
