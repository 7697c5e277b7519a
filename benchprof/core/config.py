"""config.yml's schema: typed dataclasses, each value checked (schema.build casts the types, `validate`
checks what a type does not say, one check per section).

The top-level sections `settings`, `models`, `datasets` and `evals` keep the shape of the authors'
config; `data`, `finetune`, `extract`, `damage` and `aggregate` hold what benchprof adds. Every value is
checked at load time (loader.load_config reads the file) and a bad one raises `ConfigError` with
the YAML key in its message.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchprof.abilities import KNOWN_ABILITIES, TRANSFER, split_of
from benchprof.core.layout import SHARED_FOLDERS, name_problem, shown
from benchprof.core.options import NEURON_SCORES, compares, did_you_mean
from benchprof.core.region_names import REGIONS
from benchprof.core.schema import ConfigError, cast
from benchprof.core.sections import (
    AggregateSettings,
    DamageSettings,
    DatasetSpec,
    DataSettings,
    EvalSettings,
    ExtractSettings,
    FinetuneSettings,
    ModelSpec,
    Settings,
)

MAX_SPLIT = 1_000_000  # items of a generated split
MAX_FEWSHOT = 1_000  # few-shot examples of a benchmark
MAX_BOOTSTRAP = 100_000  # resamples of aggregate's intervals
MAX_THREADS = 4096  # torch threads of one process (settings.threads, a command's --threads)
RECORD_FIELDS: tuple[str, ...] = ("context", "question", "options", "answer")


FP16_WHY = "fp16 gradients of the split-wide mean loss underflow: at 200k tokens the importance is 55% off"
FP16_REFUSED = f"finetune.dtype: float16 is refused for the importance pass ({FP16_WHY}); use bfloat16, float32 or auto"


@dataclass
class Config:
    """The whole config.yml."""

    settings: Settings = field(default_factory=Settings)
    models: list[ModelSpec] = field(default_factory=list)
    datasets: list[DatasetSpec] = field(default_factory=list)
    evals: EvalSettings = field(default_factory=EvalSettings)
    data: DataSettings = field(default_factory=DataSettings)
    finetune: FinetuneSettings = field(default_factory=FinetuneSettings)
    extract: ExtractSettings = field(default_factory=ExtractSettings)
    damage: DamageSettings = field(default_factory=DamageSettings)
    aggregate: AggregateSettings = field(default_factory=AggregateSettings)
    # where it was read from (not a YAML key); relative paths resolve against its folder
    path: Path = field(default=Path("config.yml"), metadata={"yaml": False})

    def resolve(self, relative: str) -> Path:
        """A path from the config, made absolute against the config file's folder."""
        p = Path(relative).expanduser()
        return p if p.is_absolute() else (self.path.parent / p).resolve()

    @property
    def output_root(self) -> Path:
        return self.resolve(self.settings.output_dir)

    def model_source(self, spec: ModelSpec) -> tuple[str, str]:
        """(model, tokenizer) to load: a path relative to the config when one exists there, else a hub id."""

        def local(name: str) -> str:
            candidate = self.resolve(name)
            return str(candidate) if candidate.exists() else name

        return local(spec.name), local(spec.tokenizer)

    def abilities(self) -> list[str]:
        return [d.name for d in self.datasets]

    def own_abilities(self) -> list[str]:
        """The abilities of `datasets:` that are not built in: the user's own, named by them, data in `path`."""
        return [d.name for d in self.datasets if d.name not in KNOWN_ABILITIES]

    def split_of(self, benchmark: str) -> tuple[str, str] | None:
        """(ability, split) of a benchmark that is an ability's split, the user's own abilities included (split_of)."""
        return split_of(benchmark, self.own_abilities())

    def dataset(self, ability: str) -> DatasetSpec:
        for d in self.datasets:
            if d.name == ability:
                return d
        if ability in KNOWN_ABILITIES:  # e.g. a benchmark that is an ability not profiled: generated data
            return DatasetSpec(name=ability)
        raise ConfigError(f"datasets: no entry for ability {shown(ability)}")

    def selected_models(self, name_or_tag: str | None = None) -> list[ModelSpec]:
        """The models a command works on: all of them, or the one named by `--model` (name or tag)."""
        return list(self.models) if name_or_tag is None else [self.model(name_or_tag)]

    def with_overrides(self, **sections: dict[str, Any]) -> Config:
        """A copy with command-line values put into their config sections, checked like the YAML.

        `cfg.with_overrides(finetune={"scope": "all", "dtype": None})`: a None value was not given and
        keeps the config's value. The values come from the command line, so a bad one raises
        ConfigError naming the flag (`--scope: 'x' is not one of mlp, attention, all`).
        """
        updated = {}
        for section, values in sections.items():
            current = getattr(self, section)
            hints = typing.get_type_hints(type(current))
            given = {key: cast(value, hints[key], f"--{key}") for key, value in values.items() if value is not None}
            updated[section] = dataclasses.replace(current, **given)
        cfg = dataclasses.replace(self, **updated)
        validate(cfg)
        return cfg

    def model(self, name_or_tag: str | None = None) -> ModelSpec:
        if name_or_tag is None:
            return self.models[0]
        for m in self.models:
            if name_or_tag in (m.name, m.tag):
                return m
        raise ConfigError(f"models: no model named {shown(name_or_tag)}")


def validate(cfg: Config) -> None:
    """Check what a value's type does not say (schema.build checks the types), one check per section in this
    order (a config with several bad values names the first found); a bad value raises ConfigError naming its key."""
    for check in (_settings, _models, _datasets, _evals, _extract, _damage, _data, _finetune, _aggregate):
        check(cfg)


def _seed(key: str, seed: int) -> None:
    if not 0 <= seed < 2**32:  # numpy, torch and lm-eval take 32-bit seeds; a larger one fails at evaluate
        raise ConfigError(f"{key}: {shown(seed)} must lie in [0, 2**32)")


def _folder(key: str, folder: str) -> None:
    if not folder.strip():  # it would resolve to the config's folder; say so with "."
        raise ConfigError(f"{key}: an empty path (write . for the config's folder)")


def _written_folder(cfg: Config, key: str, folder: str, below: tuple[str, ...] = ()) -> None:
    """A folder benchprof writes into (and its subfolders `below`, e.g. one per model tag): never inside the
    benchprof package (its code, assets and ability tables) nor inside a .git folder, where a stage's files or its
    temp-file cleanup would land among files that are not its own."""
    package = Path(__file__).resolve().parents[1]
    for path in [cfg.resolve(folder), *(cfg.resolve(folder) / name for name in below)]:
        real = path.resolve()
        if real == package or package in real.parents:
            raise ConfigError(
                f"{key}: {shown(folder)} is inside benchprof's package folder {package}; choose a folder outside it"
            )
        if ".git" in real.parts:
            raise ConfigError(f"{key}: {shown(folder)} is inside a .git folder ({real}); choose a folder outside it")


def _settings(cfg: Config) -> None:
    """`settings:` the k values, the layers left out, batch sizes, the outputs folder, threads, the seed."""
    settings = cfg.settings
    if not settings.k_values:
        raise ConfigError("settings.k_values: at least one region size k is required")
    for i, k in enumerate(settings.k_values):
        if not 0.0 < k < 1.0:
            raise ConfigError(f"settings.k_values[{i}]: {k} must lie in (0, 1)")
    if len(set(settings.k_values)) != len(settings.k_values):
        raise ConfigError("settings.k_values: duplicate values")
    for key in ("front_removal", "back_removal"):
        if getattr(settings, key) < 0:
            raise ConfigError(f"settings.{key}: must be >= 0")
    for key in ("train_batch_size", "eval_batch_size"):
        if getattr(settings, key) < 1:
            raise ConfigError(f"settings.{key}: must be >= 1")
    _folder("settings.output_dir", settings.output_dir)
    _written_folder(cfg, "settings.output_dir", settings.output_dir, tuple(m.tag for m in cfg.models))
    if not 0 <= settings.threads <= MAX_THREADS:
        raise ConfigError(f"settings.threads: {shown(settings.threads)} must lie in [0, {MAX_THREADS}] (0: automatic)")
    _seed("settings.seed", settings.seed)


def _models(cfg: Config) -> None:
    """`models:` at least one, each named, each with its own tag that can name a folder."""
    if not cfg.models:
        raise ConfigError("models: at least one model is required")
    for i, m in enumerate(cfg.models):
        if not m.name.strip():
            raise ConfigError(f"models[{i}].name: empty; a hub id or a folder is required")
    for i, m in enumerate(cfg.models):
        if problem := name_problem(m.tag):
            raise ConfigError(f"models[{i}].tag: {shown(m.tag)} {problem}")
        if m.tag in SHARED_FOLDERS:
            raise ConfigError(f"models[{i}].tag: {shown(m.tag)} is the outputs folder's own {m.tag}/; set another tag")
    tags = [m.tag for m in cfg.models]
    if len(set(tags)) != len(tags):
        raise ConfigError("models: two models share the tag; set models[i].tag")


def _datasets(cfg: Config) -> None:
    """`datasets:` at least one, each a known ability once, with known record fields."""
    if not cfg.datasets:
        raise ConfigError("datasets: at least one ability to profile is required")
    for i, d in enumerate(cfg.datasets):
        if d.name not in KNOWN_ABILITIES:
            _own_ability(f"datasets[{i}].name", d)
        if not d.keys():
            raise ConfigError(f"datasets[{i}].key: empty; at least one of {', '.join(RECORD_FIELDS)} is required")
        for record_field in d.keys():
            if record_field not in RECORD_FIELDS:
                known = ", ".join(RECORD_FIELDS)
                raise ConfigError(f"datasets[{i}].key: unknown field {shown(record_field)} (known: {known})")
    if len(set(cfg.abilities())) != len(cfg.datasets):
        raise ConfigError("datasets: an ability is listed twice")


def _own_ability(key: str, d: DatasetSpec) -> None:
    """An ability of the user's own: its data in `path`, a name that can name its folders and its test split."""
    if not d.path:
        raise ConfigError(
            f"{key}: unknown ability {shown(d.name)} (built in: {', '.join(KNOWN_ABILITIES)}; an ability of your own "
            f"needs `path:`, a folder of train.jsonl and test.jsonl){did_you_mean(d.name, KNOWN_ABILITIES)}"
        )
    if problem := name_problem(d.name) or (
        f"ends in _{TRANSFER}, which names transfer splits" * d.name.endswith(f"_{TRANSFER}")
    ):
        raise ConfigError(f"{key}: {shown(d.name)} {problem}")


def _evals(cfg: Config) -> None:
    """`evals:` the benchmarks (names, few-shot, limits), the task folders and dataset copies, the composites."""
    ev = cfg.evals
    if not ev.benchmarks:
        raise ConfigError("evals.benchmarks: at least one benchmark is required")
    for i, shots in enumerate(ev.num_fewshot):
        if shots < 0:
            raise ConfigError(f"evals.num_fewshot[{i}]: {shots} must be >= 0")
    if ev.num_fewshot and len(ev.num_fewshot) != len(ev.benchmarks):
        raise ConfigError(f"evals.num_fewshot: {len(ev.num_fewshot)} values for {len(ev.benchmarks)} evals.benchmarks")
    for i, name in enumerate(ev.benchmarks):
        if (cfg.split_of(name) is not None or name in ev.composites) and ev.fewshot(name) > 0:
            raise ConfigError(
                f"evals.num_fewshot[{i}]: {name} is a generated task with its test split only, so its "
                f"{ev.fewshot(name)} examples would come from the split it scores; use 0"
            )
    for i, name in enumerate(ev.benchmarks):
        if problem := name_problem(name):  # it names the benchmark's result files
            raise ConfigError(f"evals.benchmarks[{i}]: {shown(name)} {problem}")
    if len(set(ev.benchmarks)) != len(ev.benchmarks):
        raise ConfigError("evals.benchmarks: a benchmark is listed twice")
    for i, name in enumerate(ev.benchmarks):
        if (split := cfg.split_of(name)) is not None and split[1] == TRANSFER and cfg.data.transfer_size < 1:
            raise ConfigError(f"evals.benchmarks[{i}]: {name} is a transfer split; set data.transfer_size to make it")
    if ev.limit is not None and ev.limit < 1:
        raise ConfigError("evals.limit: must be >= 1")
    if ev.tensor_parallel_size < 1:
        raise ConfigError(f"evals.tensor_parallel_size: {ev.tensor_parallel_size} must be >= 1")
    if not 1 <= ev.cpu_workers <= MAX_THREADS:
        raise ConfigError(f"evals.cpu_workers: {shown(ev.cpu_workers)} must lie in [1, {MAX_THREADS}]")
    for key, mapping in (("limits", ev.limits), ("dataset_paths", ev.dataset_paths)):
        for name, value in mapping.items():
            if name not in ev.benchmarks:
                raise ConfigError(f"evals.{key}.{name}: not one of evals.benchmarks")
            if key == "limits" and int(value) < 1:
                raise ConfigError(f"evals.limits.{name}: must be >= 1")
    for i, folder in enumerate(ev.include_path):
        _folder(f"evals.include_path[{i}]", folder)
        if not cfg.resolve(folder).exists():
            raise ConfigError(f"evals.include_path: {cfg.resolve(folder)}: no such folder or file")
    for name, local in ev.dataset_paths.items():
        if not local.strip():
            raise ConfigError(f"evals.dataset_paths.{name}: an empty path")
        if not cfg.resolve(local).exists():
            raise ConfigError(f"evals.dataset_paths.{name}: {cfg.resolve(local)}: no such folder or file")
    for name, spec in ev.composites.items():
        if cfg.split_of(str(name)) is not None:  # the split would be scored on the composite's items
            raise ConfigError(
                f"evals.composites: {shown(name)} is an ability's test split; give the composite another name"
            )
        _composite(name, spec, cfg.own_abilities())
    for i, name in enumerate(ev.benchmarks):
        if not 0 <= ev.fewshot(name) <= MAX_FEWSHOT:
            raise ConfigError(f"evals.num_fewshot[{i}]: {shown(ev.fewshot(name))} must lie in [0, {MAX_FEWSHOT}]")


def _composite(name: str, spec: dict[str, Any], own: list[str]) -> None:
    """One entry of evals.composites: a task of items from several abilities' test splits."""
    if problem := name_problem(str(name)):  # it names the composite's task files
        raise ConfigError(f"evals.composites: {shown(name)} {problem}")
    parts = spec.get("abilities") if isinstance(spec, dict) else None
    if not isinstance(parts, list) or not parts:
        raise ConfigError(f"evals.composites.{name}.abilities: a non-empty list of abilities is required")
    for a in parts:
        if a not in KNOWN_ABILITIES and a not in own:
            raise ConfigError(f"evals.composites.{name}.abilities: unknown ability {shown(a)}")
    unknown = set(spec) - {"abilities", "size"}
    if unknown:
        raise ConfigError(f"evals.composites.{name}.{sorted(unknown)[0]}: unknown key (known: abilities, size)")
    size = spec.get("size")
    if "size" in spec and (isinstance(size, bool) or not isinstance(size, int) or size < len(parts)):
        raise ConfigError(
            f"evals.composites.{name}.size: {shown(size)} must be a whole number of items, at least one per "
            f"ability (>= {len(parts)}); leave it out for as many of each as the smallest test split has"
        )


def _damage(cfg: Config) -> None:
    """`damage:` mean ablation holds whole neurons, with hooks in the model the hf backend loads."""
    if cfg.damage.ablation != "mean":
        return
    if cfg.extract.score not in NEURON_SCORES:
        raise ConfigError(
            f"damage.ablation: mean holds whole neurons at their mean; extract.score {shown(cfg.extract.score)} "
            "ranks weights (use a neuron score: docs/config.md, Selection options)"
        )
    if cfg.evals.backend != "hf":
        raise ConfigError("damage.ablation: mean holds neurons with hooks in the loaded model; use evals.backend hf")


def _extract(cfg: Config) -> None:
    """`extract:` the regions and their random draws, the score against the selection and the datasets."""
    extract = cfg.extract
    if extract.random_draws < 1:
        raise ConfigError(f"extract.random_draws: {extract.random_draws} must be at least 1")
    if extract.selections < 1:
        raise ConfigError(f"extract.selections: {extract.selections} must be at least 1")
    if (extract.selections > 1 or "placebo" in extract.regions) and extract.score not in NEURON_SCORES:
        what = "extract.selections" if extract.selections > 1 else "extract.regions: placebo"
        raise ConfigError(
            f"{what} needs a neuron score (extract.score: {shown(extract.score)} ranks weights by an importance "
            "pass over all the train items; act_grad_contrast_abs is recommended)"
        )
    if extract.selections > 1 and not cfg.finetune.max_samples:
        raise ConfigError(
            f"extract.selections: {extract.selections} samples of disjoint train items need finetune.max_samples "
            "(the items of each sample)"
        )
    need = extract.selections * (cfg.finetune.max_samples or 0)
    if extract.selections > 1 and cfg.data.train_size < need and any(not d.path for d in cfg.datasets):
        raise ConfigError(
            f"data.train_size: {cfg.data.train_size} train items cannot hold extract.selections x "
            f"finetune.max_samples = {need} disjoint items"
        )
    if not extract.regions:
        raise ConfigError(f"extract.regions: at least one region is required (known: {', '.join(REGIONS)})")
    for r in extract.regions:
        if r not in REGIONS:
            raise ConfigError(f"extract.regions: unknown region {shown(r)} (known: {', '.join(REGIONS)})")
    if not {"top", "random"} & set(extract.regions):  # each benchmark's profile figure draws those two
        raise ConfigError("extract.regions: top or random is required; the profile figures draw those")
    if extract.score in NEURON_SCORES and extract.selection != "exact":
        raise ConfigError(f"extract.selection: a neuron score ({extract.score}) ranks whole neurons; use exact")
    if compares(extract.score) and len(cfg.datasets) < 2:
        raise ConfigError(
            f"extract.score: {shown(extract.score)} compares abilities; it needs at least two in datasets"
        )
    if extract.chunk_size < 1:
        raise ConfigError("extract.chunk_size: must be >= 1")
    _seed("extract.random_seed", extract.random_seed)


def _data(cfg: Config) -> None:
    """`data:` the folder, the split sizes, the seed."""
    _folder("data.dir", cfg.data.dir)
    _written_folder(cfg, "data.dir", cfg.data.dir)
    for key in ("train_size", "test_size"):
        if not 1 <= getattr(cfg.data, key) <= MAX_SPLIT:  # a generator asked for 1e12 items would never end
            raise ConfigError(f"data.{key}: {getattr(cfg.data, key)} must lie in [1, {MAX_SPLIT:,}]")
    if not 0 <= cfg.data.transfer_size <= MAX_SPLIT:
        raise ConfigError(f"data.transfer_size: {cfg.data.transfer_size} must lie in [0, {MAX_SPLIT:,}] (0: none)")
    _seed("data.seed", cfg.data.seed)


def _finetune(cfg: Config) -> None:
    """`finetune:` samples, dtype (never float16), processes, sequence length."""
    finetune = cfg.finetune
    if finetune.max_samples is not None and finetune.max_samples < 1:
        raise ConfigError("finetune.max_samples: must be >= 1")
    if finetune.dtype == "float16":
        raise ConfigError(FP16_REFUSED)
    if finetune.processes is not None and finetune.processes < 1:
        raise ConfigError("finetune.processes: must be >= 1")
    if finetune.max_length < 8:
        raise ConfigError("finetune.max_length: must be >= 8")


def _aggregate(cfg: Config) -> None:
    """`aggregate:` the seed, report_k, resamples, threshold, alpha, each benchmark's metric and chance level."""
    aggregate, benchmarks = cfg.aggregate, cfg.evals.benchmarks
    _seed("aggregate.seed", aggregate.seed)
    if aggregate.report_k is not None and aggregate.report_k not in cfg.settings.k_values:
        raise ConfigError(f"aggregate.report_k: {aggregate.report_k} is not one of settings.k_values")
    if not 0 <= aggregate.bootstrap <= MAX_BOOTSTRAP:  # 1e12 resamples would fill memory at the last stage
        raise ConfigError(f"aggregate.bootstrap: {shown(aggregate.bootstrap)} must lie in [0, {MAX_BOOTSTRAP:,}]")
    if aggregate.threshold < 0:
        raise ConfigError(f"aggregate.threshold: {aggregate.threshold} must be >= 0 (the AIS that draws a ribbon)")
    if not 0.0 < aggregate.alpha < 1.0:
        raise ConfigError(f"aggregate.alpha: {aggregate.alpha} must lie in (0, 1)")
    for name, metric in aggregate.metrics.items():
        if not metric.strip():  # an empty override would silently fall back to the default metric
            raise ConfigError(f"aggregate.metrics.{name}: an empty metric name")
        if name not in benchmarks:  # the metric of each benchmark's task: preflight.preflight
            raise ConfigError(f"aggregate.metrics.{name}: not one of evals.benchmarks")
    for name, level in aggregate.chance.items():
        if name not in benchmarks:  # it would be ignored in silence
            raise ConfigError(f"aggregate.chance.{name}: not one of evals.benchmarks")
        if not 0.0 <= level < 1.0:
            raise ConfigError(f"aggregate.chance.{name}: {level} must lie in [0, 1)")
    if aggregate.min_correct < 1:
        raise ConfigError(f"aggregate.min_correct: {aggregate.min_correct} must be at least 1")
