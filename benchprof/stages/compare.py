"""Command `compare`: the profiles of models profiled in different configs, side by side.

`aggregate` compares the models of one config (outputs/compare/). Two models profiled apart, each with its own
config (its own model folder, benchmarks, documents, k), are compared here from their evaluations, with the same
statistics: profile/analyses.compare_models, written by profile/compare_report.py.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from benchprof import BenchprofError
from benchprof.core.config import Config
from benchprof.core.layout import CompareLayout, format_k
from benchprof.core.loader import load_config
from benchprof.profile.analyses import JointCell, JointDraws, compare_models, joint_draws, write_comparison
from benchprof.profile.rows import Profile
from benchprof.stages.profile_scores import default_report_k, load_scores, never_evaluated

# aggregate settings every compared config must share: the joint resamples are drawn alike (one generator per
# benchmark from aggregate.seed, aggregate.bootstrap of them) so that two models that scored the same items are
# compared on the same resamples, and one alpha stars the differences.
# So must what decides a benchmark's metric and whether a model is above chance on it.
SHARED_AGGREGATE = ("bootstrap", "seed", "alpha", "clusters", "metrics", "chance", "min_correct")


def compared_configs(cfg: Config, against: str) -> list[Config]:
    """`cfg` and the configs named in `against` (comma-separated paths), checked to be comparable: the same
    aggregate settings of SHARED_AGGREGATE and no model tag twice. Refused in one line otherwise."""
    paths = [p.strip() for p in str(against).split(",") if p.strip()]
    if not paths:
        raise BenchprofError("compare: --against needs the config of at least one other model (comma-separated)")
    configs = [cfg, *(load_config(p) for p in paths)]
    for other in configs[1:]:
        for key in SHARED_AGGREGATE:
            mine, theirs = getattr(cfg.aggregate, key), getattr(other.aggregate, key)
            if mine != theirs:
                raise BenchprofError(
                    f"compare: aggregate.{key} is {mine!r} in {cfg.path} but {theirs!r} in {other.path}; "
                    "compared profiles must be resampled alike"
                )
    seen: dict[str, Path] = {}
    for c in configs:
        for spec in c.models:
            if spec.tag in seen:
                raise BenchprofError(
                    f"compare: the model tag {spec.tag!r} is in {seen[spec.tag]} and in {c.path}; "
                    "give one of them another tag"
                )
            seen[spec.tag] = c.path
    return configs


def headline_ks(configs: list[Config], report_k: float | None) -> list[float]:
    """The k each config's models are compared at: `report_k`, which every config must have (refused in one line
    otherwise); without it each config's headline k (aggregate.report_k, else its largest k). Those may differ, as a
    size rule ("0.5% of the MLP neurons") gives each model its own k; then each model is compared at its own."""
    if report_k is None:
        return [default_report_k(c) for c in configs]
    k = default_report_k(configs[0], report_k)
    for c in configs[1:]:
        try:
            default_report_k(c, k)
        except BenchprofError as error:
            raise BenchprofError(f"compare: {c.path}: {error}; the headline k must be in every config") from None
    return [k] * len(configs)


def compare(
    cfg: Config, against: str = "", out: str | None = None, report_k: float | None = None, plots: bool = True
) -> None:
    """The profiles of this config's models and of the models of the configs in --against, side by side.

    Per benchmark above chance in every model, ability and k (see report_k): each model's top-region AIS,
    the difference between each pair of models with its 95% interval and test (on the same resamples of the items
    where both models scored the same items, `paired`; independent resamples where they scored different ones),
    Benjamini-Hochberg over every difference; the similarity of each benchmark's profiles; the mean specificity's
    difference; the findings that hold in every model (docs/analyses.md, "Across models"). Reads the evaluations
    only, as `aggregate` does: run `benchprof evaluate` with each config first.

    Writes profiles.csv, differences.csv, correlation.csv, claims.csv (each model's claim rows), compare.md (each
    model's claims first) and (with plots) profiles.png into `out`.
    A profile with an evaluation missing, stale or changed since written is refused, in one line naming the first.
    Its manifest.json, written last, records each file's size and sha256 and the evaluations compared.

    Arguments:
        cfg: the config (on the command line: the path of config.yml).
        against: the other models' configs, comma-separated paths.
        out: the folder to write; default <output_dir>/compare-<every tag, joined by "-"> of this config.
        report_k: k of the headline tables, one of every config's settings.k_values; default each config's own
            aggregate.report_k (or its largest k). Where those differ, each model is compared at its own k (a size
            rule such as 0.5% of the MLP neurons is a different k in each model; their resamples are drawn by one
            generator, so paired where they scored the same items),
            said in compare.md and on the terminal.
        plots: also draw profiles.png.
    """
    configs = compared_configs(cfg, against)
    # not outputs/compare/, which aggregate writes for this config's own models
    default = "compare-" + "-".join(spec.tag for c in configs for spec in c.models)
    layout = CompareLayout(cfg.output_root, default) if out is None else CompareLayout(Path(out).parent, Path(out).name)
    compare_profiles(configs, layout, report_k, plots, judged=True)


COMPARE_INPUTS = {"models", "report_k", "plots"}  # a compare manifest's inputs, before manifests named their command


def refuse_foreign_folder(folder: Path) -> None:
    """compare writes only into a folder that is absent, empty or compare's own (its manifest says so): never into a
    profile folder or another command's, whose manifest and files it would replace. One line otherwise."""
    from benchprof.core.ownership import owned_by
    from benchprof.core.storage import read_manifest

    if not folder.is_dir() or not any(p for p in folder.iterdir() if not p.name.startswith(".")):
        return
    record = read_manifest(folder) or {}
    inputs = record.get("inputs")
    legacy = "command" not in record and isinstance(inputs, dict) and set(inputs) == COMPARE_INPUTS
    owner = owned_by(folder)
    if owner == "compare" or legacy:
        return
    whose = f"{owner}'s outputs" if owner else "files no compare manifest lists"
    raise BenchprofError(f"compare: --out {folder} holds {whose}; name an empty folder or an earlier compare's")


def compare_profiles(
    configs: list[Config], layout: CompareLayout, report_k: float | None, plots: bool, judged: bool
) -> None:
    """`compare`'s work on checked configs, into `layout`'s folder. `judged`: read only the evaluations `status`
    calls done (an archive of documents, compared by scripts/rederive_profile.py, has no model to judge them by)."""
    from benchprof.core.layout import Layout
    from benchprof.core.ownership import recorded_files, remove_unwritten
    from benchprof.core.results import evaluation_hashes
    from benchprof.core.storage import clear_manifest, writable_folder, write_manifest
    from benchprof.stages.status import evaluation_states

    started = time.time()
    writable_folder(layout.compare_dir)  # a file named by --out: one line now, not an error after the work
    refuse_foreign_folder(layout.compare_dir)
    previous = recorded_files(layout.compare_dir)
    ks = headline_ks(configs, report_k)
    profiles: list[Profile] = []
    draws: list[JointDraws] = []
    own = len({format_k(k) for k in ks}) > 1  # each model at its own k: a size rule
    for c, k in zip(configs, ks, strict=True):
        for spec in c.models:
            joint: JointDraws = {}
            cells: list[JointCell] = []
            states = evaluation_states(c, spec) if judged else None
            profile = load_scores(c, spec.tag, report_k=k, joint_out=joint, cells_out=cells, judged=states)
            if not profile.rows and never_evaluated(profile):
                raise BenchprofError(
                    f"compare: no AIS for {spec.tag} under {c.output_root} (run `benchprof evaluate {c.path}` first)"
                )
            if profile.missing:  # a partial or stale profile: its cells would drop out of the comparison unsaid
                first, count = profile.missing[0], len(profile.missing)
                raise BenchprofError(
                    f"compare: {spec.tag}'s profile lacks {count} evaluation(s) (first: {first.benchmark} "
                    f"{first.variant}: {first.reason}); run `benchprof evaluate {c.path}` to finish it "
                    f"(`benchprof status {c.path}` lists each)"
                )
            if own:  # drawn again under the first model's k: the same generator, so paired on the same items
                at_k = [cell for cell in cells if math.isclose(cell.k, k)]
                joint = joint_draws(at_k, c.aggregate.bootstrap, c.aggregate.seed, key_k=ks[0])
            profiles.append(profile)
            draws.append(joint)
    model_ks = [k for c, k in zip(configs, ks, strict=True) for _ in c.models]
    comparison = compare_models(profiles, draws, own_k=own)
    clear_manifest(layout.compare_dir)  # written last: a folder killed halfway has none to vouch for a mix
    written = write_comparison(comparison, layout, plots=plots)
    remove_unwritten(layout.compare_dir, previous, written)  # e.g. profiles.png of an earlier run with plots
    evaluations = {spec.tag: evaluation_hashes(Layout(c.output_root, spec.tag).model_dir)
                   for c in configs for spec in c.models}  # fmt: skip
    headline = model_ks if own else ks[0]
    inputs = {"models": [p.model for p in profiles], "report_k": headline, "plots": plots}
    extra = {"evaluations": evaluations, "command": "compare"}  # the folder's owner (ownership.owned_by)
    write_manifest(layout.compare_dir, inputs, extra=extra, started=started, files=written)
    starred = sum(bool(d.significant) for d in comparison.differences)
    print(
        f"compare: {len(profiles)} models"
        + (f" each at its own k ({', '.join(format_k(k) for k in model_ks)})" if own else "")
        + f", {len(comparison.benchmarks)} benchmarks above chance in all, "
        f"{starred} of {len(comparison.differences)} differences starred -> {layout.compare_dir} "
        f"({len(written)} files) in {time.time() - started:.1f} s"
    )
