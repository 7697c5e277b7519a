"""One judgement of "current" (stages/status.py): `aggregate` and `compare` read exactly the evaluations `status` calls
done. Each condition is built for real on a finished tiny project: the dtype changed after the run, one region
re-evaluated in the new dtype, a second model's stale copy given to compare."""

from __future__ import annotations

import shutil

import pytest
from test_reliability import ABILITY, K, copy_project, write_config

from benchprof import BenchprofError
from benchprof.core.layout import Layout, Variant
from benchprof.core.loader import load_config
from benchprof.stages.status import evaluation_states


@pytest.fixture(scope="module")
def finished(tiny_model_dir, tmp_path_factory):
    """A finished run of test_reliability's one-ability project (float32), in process."""
    from benchprof.stages.run import run

    folder = tmp_path_factory.mktemp("finished")
    run(load_config(write_config(folder, tiny_model_dir)))
    return folder


def not_done(config) -> set[tuple[str, str]]:
    cfg = load_config(config)
    states = evaluation_states(cfg, cfg.models[0])
    return {(benchmark, variant.label()) for (variant, benchmark), (state, _) in states.items() if state != "done"}


def test_a_changed_dtype_makes_every_evaluation_stale_and_aggregate_reads_none(finished, tiny_model_dir, tmp_path):
    """evals.dtype bfloat16 set on a finished float32 run: aggregate wrote an ais.md "scored in bfloat16" over the
    float32 scores. Now it reads none of them and leaves the profile on disk as it was."""
    from benchprof.stages.aggregate import aggregate

    copy_project(finished, tmp_path, tiny_model_dir)
    config = write_config(tmp_path, tiny_model_dir, evals__dtype="bfloat16")
    profile = tmp_path / "outputs" / "tiny" / "profile"
    before = {p.name: p.read_bytes() for p in profile.iterdir() if p.is_file()}
    assert len(not_done(config)) == 4  # the original and three regions, on the one benchmark
    with pytest.raises(BenchprofError, match="no current evaluation results for tiny"):
        aggregate(load_config(config), plots=False)
    assert {p.name: p.read_bytes() for p in profile.iterdir() if p.is_file()} == before


def test_aggregate_lists_as_missing_exactly_what_status_calls_not_done(finished, tiny_model_dir, tmp_path):
    """The dtype changed, then the original and the top region evaluated again in it: the profile reads those two,
    and its missing evaluations are the other regions, each with status's reason; ais.md says bfloat16 truly."""
    from benchprof.stages.aggregate import aggregate
    from benchprof.stages.evaluate import evaluate
    from benchprof.stages.profile_scores import load_scores

    copy_project(finished, tmp_path, tiny_model_dir)
    config = write_config(tmp_path, tiny_model_dir, evals__dtype="bfloat16")
    evaluate(load_config(config), region="top")
    stale = not_done(config)
    assert stale == {(ABILITY, f"{ABILITY}/k{K}/{region}") for region in ("bottom", "random")}
    cfg = load_config(config)
    profile = load_scores(cfg, progress=False, bootstrap=0, judged=evaluation_states(cfg, cfg.models[0]))
    assert {(m.benchmark, m.variant) for m in profile.missing} == stale
    assert all(m.reason.startswith("stale (changed: dtype") for m in profile.missing)
    assert {row.region for row in profile.rows} >= {"top"} and profile.dtype == "bfloat16"
    aggregate(cfg, plots=False)
    report = (tmp_path / "outputs" / "tiny" / "profile" / "ais.md").read_text()
    assert "bfloat16" in report and "stale (changed: dtype" in report


def test_compare_refuses_a_profile_with_a_stale_evaluation_in_one_line(finished, tiny_model_dir, tmp_path):
    """Two models' configs, the second's evaluations scored in float32 while its config now says bfloat16."""
    from benchprof.stages.compare import compare

    first = copy_project(finished, tmp_path / "a", tiny_model_dir)
    second_folder = tmp_path / "b"
    shutil.copytree(finished / "data", second_folder / "data")
    shutil.copytree(finished / "outputs" / "tiny", second_folder / "outputs" / "other")
    second = write_config(
        second_folder,
        tiny_model_dir,
        models=[{"name": str(tiny_model_dir), "tag": "other", "dtype": "float32"}],
        evals={"benchmarks": [ABILITY], "limit": 12, "device": "cpu", "dtype": "bfloat16"},
    )
    with pytest.raises(BenchprofError) as error:
        compare(load_config(first), against=str(second), out=str(tmp_path / "cmp"), plots=False)
    message = str(error.value)
    assert "\n" not in message and message.startswith("compare: other's profile lacks 4 evaluation(s) (first: ")
    assert "stale (changed: dtype" in message
    assert not (tmp_path / "cmp").exists() or not any((tmp_path / "cmp").iterdir())
    assert Layout(tmp_path / "a" / "outputs", "tiny").eval_file(Variant(), ABILITY).is_file()


def test_an_ability_removed_makes_the_contrast_regions_of_the_others_stale(tiny_model_dir, tmp_path, capsys):
    """With an ability-specific score (contrast_mean subtracts the other abilities' importance), removing an ability
    from the config changes every other ability's region: aggregate reported "0 missing" over them; now their
    evaluations are stale (upstream: masks), and aggregate reads none of them (it names the first, writes nothing)."""
    from benchprof.stages.aggregate import aggregate
    from benchprof.stages.run import run

    three = [{"name": ABILITY}, {"name": "Quantitative_Reasoning"}, {"name": "Temporal_Reasoning"}]
    config = write_config(tmp_path, tiny_model_dir, datasets=three, extract={"score": "contrast_mean"})
    run(load_config(config))
    assert not_done(config) == set()
    config = write_config(tmp_path, tiny_model_dir, datasets=three[:2], extract={"score": "contrast_mean"})
    cfg = load_config(config)
    states = evaluation_states(cfg, cfg.models[0])
    ablated = [judged for (variant, _), judged in states.items() if not variant.is_original]
    assert ablated and all(state == "stale" and why.startswith("masks stale") for state, why in ablated)
    capsys.readouterr()
    with pytest.raises(BenchprofError, match="no current evaluation results for tiny"):
        aggregate(cfg, plots=False)
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("aggregate: tiny:")]
    assert "stale (masks stale" in line


@pytest.mark.parametrize("damage", ["truncated", "deleted"])
def test_a_damaged_mask_is_to_redo_and_the_evaluations_on_it_are_kept(finished, tiny_model_dir, tmp_path, damage):
    """A mask file cut short or deleted under its manifest: extract writes it again as it was, so status calls the
    masks stale and the evaluations on it still done (it called them stale and counted them as jobs left), and a
    run redoes the mask alone: every result file keeps its bytes, and the mask comes back byte for byte."""
    from benchprof.stages.run import run
    from benchprof.stages.status import plan_status

    copy_project(finished, tmp_path, tiny_model_dir)
    config = write_config(tmp_path, tiny_model_dir)
    layout = Layout(tmp_path / "outputs", "tiny")
    mask = layout.mask_file(ABILITY, K, "top")
    kept = mask.read_bytes()
    if damage == "truncated":
        mask.write_bytes(kept[:2000])
    else:
        mask.unlink()
    [item] = [i for i in plan_status(load_config(config)) if i.state != "done"]
    assert (item.stage, item.state) == ("masks", "stale")
    assert item.why.startswith(f"{'damaged' if damage == 'truncated' else 'missing'} top.safetensors")
    assert not_done(config) == set()
    results = {p: p.read_bytes() for p in layout.model_dir.rglob("eval/**/*.json")}
    run(load_config(config))
    assert mask.read_bytes() == kept
    assert {p: p.read_bytes() for p in results} == results
