"""The outputs/ tree (docs/outputs.md). Every path a stage reads or writes comes from here.

outputs/<model-tag>/
  original/eval/<benchmark>.json                         evaluate: unablated scores
  <ability>/importance/importance.safetensors + manifest.json      finetune
  <ability>/attribution/attribution.safetensors + manifest.json  extract, with a neuron score (stages/neurons.py)
  <ability>/activity/activity.safetensors + manifest.json        extract, with act_contrast
  <ability>/masks/k<k>/{top,bottom,random}.safetensors + stats.csv + manifest.json   extract
  <ability>/damaged/k<k>/<region>/                       damage --save: a full HF checkpoint
  <ability>/eval/k<k>/<region>/<benchmark>.json (+ .samples.jsonl)   evaluate
  profile/ais.csv, ais.md, ais.json, benchmarks.csv, similarity.csv, *.png   aggregate
  .lock                                                  the command writing here (storage.folder_lock)
  model_files.json, fingerprints.json                    the checkpoint's file records and fingerprint (modeling)
outputs/compare/profiles.csv, correlation.csv, compare.md, profiles.png   aggregate, with several models
outputs/tasks/<task>.yaml (+ <task>.jsonl)               evaluate: generated lm-eval tasks (tasks.py)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path


def format_k(k: float) -> str:
    """k as a plain decimal with no exponent, for folder names: 1e-05 -> '0.00001'."""
    text = format(Decimal(repr(float(k))), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def parse_k(name: str) -> float:
    """Inverse of the folder name k<k>: 'k0.00001' -> 1e-05."""
    return float(name[1:] if name.startswith("k") else name)


def shown_path(path: Path) -> str:
    """A path as a summary line shows it: relative to the working folder where it lies under it."""
    path = Path(path)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def model_folders(output_root: Path, tags: Sequence[str]) -> str:
    """The model folders a stage wrote under, as its summary line names them: outputs/demo, or outputs/{a,b}."""
    names = list(dict.fromkeys(tags))
    inside = names[0] if len(names) == 1 else "{" + ",".join(names) + "}"
    return f"{shown_path(output_root)}/{inside}"


@dataclass(frozen=True)
class Variant:
    """One ablated model: ability a's `region` at fraction k. `ability=None` is the original."""

    ability: str | None = None
    k: float | None = None
    region: str | None = None

    @property
    def is_original(self) -> bool:
        return self.ability is None

    def parts(self) -> tuple[str, float, str]:
        """(ability, k, region) of an ablated variant; the original has none."""
        if self.ability is None or self.k is None or self.region is None:
            raise ValueError("the original model has no region")
        return self.ability, self.k, self.region

    def label(self) -> str:
        if self.is_original:
            return "original"
        ability, k, region = self.parts()
        return f"{ability}/k{format_k(k)}/{region}"


@dataclass(frozen=True)
class Output:
    """One unit of a stage's work as it lies on disk: the files it produces and the manifest that
    vouches for them (a manifest.json, or a result JSON that records its own `inputs`).

    The stage's skip check and `benchprof status` both judge an Output (storage.is_current, storage.judge),
    so neither needs to know how the other stage works.
    """

    stage: str  # data, importance, masks, checkpoint, eval, profile
    label: str  # what `benchprof status` shows, e.g. "Spatial_Reasoning k0.05"
    manifest: Path
    files: tuple[Path, ...]


def manifest_path(directory: Path) -> Path:
    """Each stage output folder records what produced it here."""
    return Path(directory) / "manifest.json"


def lock_path(folder: Path) -> Path:
    """The lock of a model's outputs folder, naming the command that writes there (storage.folder_lock)."""
    return Path(folder) / ".lock"


DATA_SPLITS = ("train", "test")
TASKS_FOLDER, COMPARE_FOLDER = "tasks", "compare"
# the folders of outputs/ that belong to no model: a model's tag may not be one of them
SHARED_FOLDERS = (TASKS_FOLDER, COMPARE_FOLDER)


MAX_NAME = 200  # characters of a name that becomes one file or folder name


def shown(value: object, limit: int = 40) -> str:
    """A value as an error message quotes it: repr, cut to a short prefix (a config value can be megabytes)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def name_problem(name: str) -> str | None:
    """Why `name` (a tag, benchmark, composite or task name) cannot be one file or folder name inside the outputs
    tree, or None when it can: it must stay in its folder (no / or \\, no NUL), not be a hidden or reserved name
    (., .., .configs, a job's .lock: no leading '.'), and be at most MAX_NAME characters."""
    if not name.strip():
        return "is empty"
    if len(name) > MAX_NAME:
        return f"is longer than {MAX_NAME} characters"
    if any(c in name for c in "/\\\0"):
        return "holds a path separator (/ or \\) or a NUL: it would leave its folder"
    if name.startswith("."):
        return "starts with '.': hidden and reserved names (., .., .configs, .lock files) are benchprof's"
    return None


def safe_name(name: str, what: str) -> str:
    """`name` itself where it can be a file name (name_problem), else one BenchprofError line naming `what`."""
    from benchprof import BenchprofError

    problem = name_problem(name)
    if problem:
        raise BenchprofError(f"{what} {shown(name)} {problem}")
    return name


def data_file(folder: Path, split: str) -> Path:
    """An ability's split in its data folder: <folder>/<split>.jsonl."""
    return Path(folder) / f"{split}.jsonl"


def data_output(folder: Path, ability: str, splits: Sequence[str] = DATA_SPLITS) -> Output:
    """Generated ability data: train.jsonl and test.jsonl (and transfer.jsonl, when made) in the ability's folder."""
    return Output("data", ability, manifest_path(folder), tuple(data_file(folder, s) for s in splits))


def tasks_dir(root: Path) -> Path:
    """Generated lm-eval task YAMLs and their data, beside the models' folders: <root>/tasks, one sub-folder
    per plan (tasks.plan_tasks)."""
    return Path(root) / TASKS_FOLDER


def task_yaml_file(folder: Path, task: str) -> Path:
    """A generated task's YAML in the tasks folder: <folder>/<task>.yaml."""
    return Path(folder) / f"{safe_name(task, 'task')}.yaml"


def task_data_file(folder: Path, task: str) -> Path:
    """A generated task's own data (a composite, or a hub dataset's test split in the ability schema):
    <folder>/<task>.jsonl."""
    return Path(folder) / f"{safe_name(task, 'task')}.jsonl"


@dataclass(frozen=True)
class Layout:
    """Paths under `<root>/<model_tag>/`."""

    root: Path
    model_tag: str

    def __post_init__(self) -> None:
        safe_name(self.model_tag, "models[].tag")

    @property
    def model_dir(self) -> Path:
        return Path(self.root) / self.model_tag

    # finetune
    def importance_dir(self, ability: str) -> Path:
        return self.model_dir / ability / "importance"

    def importance_file(self, ability: str) -> Path:
        return self.importance_dir(ability) / "importance.safetensors"

    # extract, with a neuron score: the statistic it reads over the ability's train items (attribution or activity);
    # placebo: over the same items with their answers drawn at random (statistic_files.placebo_items)
    def attribution_dir(self, ability: str, statistic: str = "attribution", placebo: bool = False) -> Path:
        return self.model_dir / ability / (f"{statistic}-placebo" if placebo else statistic)

    def attribution_file(self, ability: str, statistic: str = "attribution", placebo: bool = False) -> Path:
        return self.attribution_dir(ability, statistic, placebo) / f"{statistic}.safetensors"

    # extract
    def masks_dir(self, ability: str, k: float) -> Path:
        return self.model_dir / ability / "masks" / f"k{format_k(k)}"

    def mask_file(self, ability: str, k: float, region: str) -> Path:
        return self.masks_dir(ability, k) / f"{region}.safetensors"

    def mask_stats(self, ability: str, k: float) -> Path:
        return self.masks_dir(ability, k) / "stats.csv"

    # damage
    def damaged_dir(self, ability: str, k: float, region: str) -> Path:
        return self.model_dir / ability / "damaged" / f"k{format_k(k)}" / region

    # evaluate
    def eval_dir(self, variant: Variant) -> Path:
        if variant.is_original:
            return self.model_dir / "original" / "eval"
        ability, k, region = variant.parts()
        return self.model_dir / ability / "eval" / f"k{format_k(k)}" / region

    def eval_file(self, variant: Variant, benchmark: str) -> Path:
        return self.eval_dir(variant) / f"{safe_name(benchmark, 'benchmark')}.json"

    def samples_file(self, variant: Variant, benchmark: str) -> Path:
        return self.eval_dir(variant) / f"{safe_name(benchmark, 'benchmark')}.samples.jsonl"

    def job_lock(self, variant: Variant, benchmark: str) -> Path:
        """Held while one process scores this job (storage.job_lock): shards beside a run never run it twice."""
        return self.eval_dir(variant) / f".{safe_name(benchmark, 'benchmark')}.lock"

    # aggregate
    def log_file(self, stage: str) -> Path:
        """The log of one stage's run for this model (console.py): libraries' output and warnings."""
        return self.model_dir / "logs" / f"{stage}.log"

    @property
    def frontier_dir(self) -> Path:
        """lab/frontier.py's folder (FrontierLayout)."""
        return self.frontier_folder("frontier")

    def frontier_folder(self, name: str) -> Path:
        """A frontier's folder of another name beside it (another sample of train items measured apart)."""
        return self.model_dir / safe_name(name, "--folder")

    @property
    def profile_dir(self) -> Path:
        return self.model_dir / "profile"

    @property
    def spikes_dir(self) -> Path:
        """`benchprof spikes`: spikes.csv, the claim rule's reach on spiked benchmarks (lab/spikes.py)."""
        return self.model_dir / "spikes"

    @staticmethod
    def file_name(name: str) -> str:
        """A benchmark name or k made safe for a file name: every other character run becomes '_'."""
        import re

        return re.sub(r"[^A-Za-z0-9._-]+", "_", name)

    @property
    def ais_csv(self) -> Path:
        return self.profile_dir / "ais.csv"

    @property
    def ais_json(self) -> Path:
        return self.profile_dir / "ais.json"

    @property
    def ais_md(self) -> Path:
        return self.profile_dir / "ais.md"

    @property
    def heatmap_png(self) -> Path:
        return self.profile_dir / "heatmap.png"

    @property
    def ribbons_png(self) -> Path:
        return self.profile_dir / "ribbons.png"

    def profile_png(self, benchmark: str) -> Path:
        return self.profile_dir / f"profile_{self.file_name(benchmark)}.png"

    def ksweep_png(self, benchmark: str) -> Path:
        return self.profile_dir / f"ksweep_{self.file_name(benchmark)}.png"

    @property
    def benchmarks_csv(self) -> Path:
        """Each benchmark's breadth: how many abilities it draws on (analyses.py)."""
        return self.profile_dir / "benchmarks.csv"

    @property
    def similarity_csv(self) -> Path:
        """Every pair of benchmarks: how alike their ability profiles are (analyses.py)."""
        return self.profile_dir / "similarity.csv"

    @property
    def similarity_png(self) -> Path:
        return self.profile_dir / "similarity.png"

    @property
    def overlap_csv(self) -> Path:
        return self.profile_dir / "overlap.csv"

    @property
    def layers_csv(self) -> Path:
        return self.profile_dir / "layers.csv"

    def overlap_png(self, k: float) -> Path:
        return self.profile_dir / f"overlap_k{self.file_name(format_k(k))}.png"

    def layers_png(self, k: float) -> Path:
        return self.profile_dir / f"layers_k{self.file_name(format_k(k))}.png"

    def profile_output(self) -> Output:
        """The profile's tables; its plots and the overlap files are written beside them."""
        tables = (self.ais_csv, self.ais_json, self.ais_md, self.benchmarks_csv, self.similarity_csv)
        return Output("profile", "ais", manifest_path(self.profile_dir), tables)

    # the outputs contract: what each stage produces, judged the same way by the stage and by status
    def importance_output(self, ability: str) -> Output:
        return Output(
            "importance", ability, manifest_path(self.importance_dir(ability)), (self.importance_file(ability),)
        )

    def attribution_output(self, ability: str, statistic: str = "attribution", placebo: bool = False) -> Output:
        folder = self.attribution_dir(ability, statistic, placebo)
        stage = f"{statistic} placebo" if placebo else statistic
        return Output(stage, ability, manifest_path(folder), (self.attribution_file(ability, statistic, placebo),))

    def masks_output(self, ability: str, k: float, regions: Sequence[str]) -> Output:
        directory = self.masks_dir(ability, k)
        files = tuple(self.mask_file(ability, k, r) for r in regions) + (self.mask_stats(ability, k),)
        return Output("masks", f"{ability} k{format_k(k)}", manifest_path(directory), files)

    def checkpoint_output(self, ability: str, k: float, region: str) -> Output:
        directory = self.damaged_dir(ability, k, region)
        return Output("checkpoint", f"{ability}/k{format_k(k)}/{region}", manifest_path(directory), ())

    def eval_output(self, variant: Variant, benchmark: str) -> Output:
        """An evaluation's result JSON records its own inputs; the samples file sits beside it."""
        path = self.eval_file(variant, benchmark)
        return Output("eval", f"{variant.label()} {benchmark}", path, (path, self.samples_file(variant, benchmark)))


@dataclass(frozen=True)
class FrontierLayout:
    """Paths under a frontier's folder (`benchprof frontier`, lab/frontier.py). Each cache is a folder with its
    manifest (storage.write_manifest: the inputs it was computed from), or a JSON file that records its own."""

    folder: Path

    @property
    def plan_file(self) -> Path:
        """What the folder measures (options, sizes, ...) and a summary of its last run's inputs."""
        return self.folder / "plan.json"

    @property
    def records_file(self) -> Path:
        """One self-verifying line per region scored (storage.append_record), keyed by its inputs."""
        return self.folder / "evaluations.jsonl"

    def statistic_output(self, statistic: str, source: str) -> Output:
        """A statistic (attribution, activity) of one ability's train items or of general text: values.npy."""
        folder = self.folder / safe_name(statistic, "statistic") / safe_name(source, "ability")
        return Output("frontier", f"{statistic} {source}", manifest_path(folder), (folder / "values.npy",))

    def texts_output(self) -> Output:
        """The general text the model samples itself: texts.json."""
        folder = self.folder / "general"
        return Output("frontier", "general text", manifest_path(folder), (folder / "texts.json",))

    def selection_output(self, option: str, ability: str, size: int) -> Output:
        """A region chosen by a selection that is no fixed ranking (the iterative one): a JSON of its neurons
        and its inputs."""
        path = self.folder / safe_name(option, "option") / f"{safe_name(ability, 'ability')}-{int(size)}.json"
        return Output("frontier", f"{option} {ability} {size}", path, (path,))

    def report_files(self) -> tuple[Path, Path, Path]:
        """frontier.csv, frontier.md, frontier.png."""
        return self.folder / "frontier.csv", self.folder / "frontier.md", self.folder / "frontier.png"

    @property
    def goal_counts_file(self) -> Path:
        """Per option and size, the distribution of the abilities at the goal over item resamples."""
        return self.folder / "goal_counts.csv"


@dataclass(frozen=True)
class CompareLayout:
    """Paths under `<root>/compare/`: the comparison of several models' profiles (aggregate, when the config
    lists more than one model; `benchprof compare`, for models of several configs, in `<root>/<folder>/`). A model
    tagged "compare" would share the folder: aggregate refuses that."""

    root: Path
    folder: str = COMPARE_FOLDER

    @property
    def compare_dir(self) -> Path:
        return Path(self.root) / self.folder

    @property
    def profiles_csv(self) -> Path:
        """Every model's top-region AIS per benchmark, ability and k, one line per model."""
        return self.compare_dir / "profiles.csv"

    @property
    def differences_csv(self) -> Path:
        """Per benchmark, k, ability and pair of models: the paired test of the difference of the two AIS."""
        return self.compare_dir / "differences.csv"

    @property
    def correlation_csv(self) -> Path:
        """Per benchmark, k and pair of models: the similarity of the benchmark's profiles."""
        return self.compare_dir / "correlation.csv"

    @property
    def claims_csv(self) -> Path:
        """Per benchmark, ability and model: the claim row (top − random) the model's Claims are read from."""
        return self.compare_dir / "claims.csv"

    @property
    def compare_md(self) -> Path:
        return self.compare_dir / "compare.md"

    @property
    def profiles_png(self) -> Path:
        return self.compare_dir / "profiles.png"
