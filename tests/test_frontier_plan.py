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
