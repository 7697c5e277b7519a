"""lab/frontier_plan.py: every flag of `benchprof frontier` bounded like its config key, refused in one line before
any work (no model loaded, no folder or plan.json written), and the plan record free of machine paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchprof.cli import main
from benchprof.lab.frontier_plan import FrontierPlan, neuron_count

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "benchprof" / "assets" / "demo-model"
ABILITIES = ["Commonsense_Causal", "Long_Term_Knowledge"]


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("plan")
    path = folder / "demo.yml"
    path.write_text(
        json.dumps({
            "settings": {"output_dir": "out"}, "models": [{"name": str(DEMO), "tag": "demo"}],
            "datasets": [{"name": a} for a in ABILITIES], "data": {"dir": "data", "train_size": 60, "test_size": 30},
        })
    )  # fmt: skip
    main(["data", str(path)])
    return path


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--sizes", "5000"], "--sizes: must be between 1 and 2752, got 5000"),
        (["--sizes", ""], "--sizes: an empty selection"),
        (["--sizes", "4,4"], "--sizes: 4 is given twice"),
        (["--sizes", "0"], "--sizes: must be between 1 and 2752, got 0"),
        (["--threads", "99999"], "--threads: must be between 1 and 4096, got 99999"),
        (["--ability", f"{ABILITIES[0]},{ABILITIES[0]}"], f"--ability: '{ABILITIES[0]}' is given twice"),
        (["--options", "act_grad,act_grad"], "--options: 'act_grad' is given twice"),
        (["--train_items", "500"], "--train_items: 500 is more than Commonsense_Causal's train split holds (60 items)"),
        (["--test_items", "1000"], "--test_items: 1000 is more than Commonsense_Causal's test split holds (30 items)"),
        (["--draws", "0"], "--draws: must be between 1 and 1000, got 0"),
        (["--draws", "x"], "--draws: 'x' is not a whole number"),
        (
            ["--train_from", "50", "--train_items", "20"],
            "--train_items: 20 is more than Commonsense_Causal's train split holds after the first 50 (10 items)",
        ),
        (["--train_from", "-1"], "--train_from: must be at least 0, got -1"),
        (["--folder", "../x"], "--folder"),
        (["--transfer_items", "5"], "--transfer_items"),
    ],
)
def test_a_bad_flag_is_one_line_before_any_work(config, capsys, flags, message):
    with pytest.raises(SystemExit) as code:
        main(["frontier", str(config), *flags])
    assert code.value.code != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not (config.parent / "out" / "demo" / "frontier").exists()  # no plan.json holds the bad value


def test_the_neuron_count_comes_from_the_config_alone():
    assert neuron_count(str(DEMO)) == 4 * 688  # 4 layers x intermediate 688, no weight read


def test_the_plan_record_names_the_model_and_data_as_the_config_does(tmp_path):
    plan = FrontierPlan(
        model=str(tmp_path / "model"), data_dir=tmp_path / "data", abilities=("A", "B"), out=tmp_path / "out",
        model_given="../real/model", data_given="../data", threads=7,
    )  # fmt: skip
    record = plan.record()
    assert record["model"] == "../real/model" and record["data_dir"] == "../data"
    assert str(tmp_path) not in json.dumps(record) and "threads" not in record and "out" not in record
    plan = FrontierPlan(model="m", data_dir=tmp_path, abilities=("A", "B"), out=tmp_path, options=("act_contrast",))
    grown = plan.grown({"options": ["act_grad", "magic"], "sizes": [8, 99999, "x"]}, neuron_count=2752)
    assert grown.options == ("act_grad", "act_contrast") and grown.sizes == (4, 8, 32, 256, 1024)


def test_every_committed_frontier_holds_a_record_of_each_region_of_its_plan():
    """plan_records accepts every frontier under docs/results as it is: a region per record, the plan's items each."""
    from benchprof.lab.frontier_plan import plan_records, plan_regions, recorded_plan

    folders = sorted(p.parent for p in (ROOT / "docs" / "results").glob("*/evaluations.jsonl"))
    assert folders
    for folder in folders:
        plan = recorded_plan(folder)[0]
        records = plan_records(plan, folder / "evaluations.jsonl")
        assert [(r["option"], r["region"], r["size"]) for r in records] == plan_regions(plan)


def cut_draw(folder: Path, draw: str = "draw4") -> None:
    """evaluations.jsonl with one random draw's line last and cut short, as a kill during its append leaves it."""
    path = folder / "evaluations.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    cut = next(line for line in lines if f'"region": "{draw}"'.encode() in line)
    path.write_bytes(b"".join(line for line in lines if line != cut) + cut[: len(cut) // 2])


def test_a_draw_cut_short_or_a_plan_that_disagrees_with_its_records_is_one_line(tmp_path):
    """The random baseline's draw whose line was cut short, a plan.json naming an ability its records never scored,
    more items than they hold, or no value of the plan: each one line naming the file and what is wrong."""
    import shutil

    from benchprof import BenchprofError
    from benchprof.lab.frontier_plan import plan_records, recorded_plan

    folder = tmp_path / "frontier"
    shutil.copytree(ROOT / "docs" / "results" / "frontier-demo-plant", folder)
    cut_draw(folder)
    plan = recorded_plan(folder)[0]
    with pytest.raises(BenchprofError) as refused:
        plan_records(plan, folder / "evaluations.jsonl")
    assert str(refused.value) == (
        f"{folder / 'evaluations.jsonl'}: no record of 1 of the plan's 69 regions (random draw4 at 72 neurons); "
        "1 line(s) of it cut short or edited were dropped; rerun `benchprof frontier` with this plan to score them"
    )
    shutil.copy(ROOT / "docs" / "results" / "frontier-demo-plant" / "evaluations.jsonl", folder)
    recorded = json.loads((folder / "plan.json").read_text())
    edits = [
        ({"abilities": ["Invented_Other", *recorded["abilities"][1:]]}, "has no scores for Invented_Other"),
        ({"test_items": 100}, "has 60 items for Invented_Facts, where plan.json names 100 items"),
        ({"transfer_items": 50}, "has no scores for Invented_Facts_transfer"),
    ]
    for edit, message in edits:
        (folder / "plan.json").write_text(json.dumps({**recorded, **edit}))
        with pytest.raises(BenchprofError, match="plan.json and its records disagree") as refused:
            plan_records(recorded_plan(folder)[0], folder / "evaluations.jsonl")
        assert message in str(refused.value) and "\n" not in str(refused.value)
    for key, message in [("draws", "'draws' is missing"), ("sizes", "'sizes' is not a list of region sizes")]:
        (folder / "plan.json").write_text(json.dumps({k: v for k, v in recorded.items() if k != key}))
        with pytest.raises(BenchprofError, match=message):
            recorded_plan(folder)
    (folder / "plan.json").write_text(json.dumps({**recorded, "abilities": "Invented_Facts"}))
    with pytest.raises(BenchprofError, match="'abilities' is not a list of names; not a plan"):
        recorded_plan(folder)
