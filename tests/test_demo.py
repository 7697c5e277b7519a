"""Known-answer test on the shipped demo model: the method must find a learned ability's weights.

The demo model was trained on the ability data (scripts/train_demo_model.py), so its quantitative
ability is really in its weights. Zeroing that ability's top region must lower its own test split
more than zeroing a random region of the same size. Runs the real stages end to end.
"""

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DEMO_MODEL = ROOT / "benchprof" / "assets" / "demo-model"
ABILITY = "Quantitative_Reasoning"


@pytest.mark.slow
def test_top_region_hurts_own_ability_more_than_random(tmp_path):
    from benchprof.core.loader import load_config
    from benchprof.stages.aggregate import load_scores
    from benchprof.stages.data import data
    from benchprof.stages.evaluate import evaluate
    from benchprof.stages.extract import extract
    from benchprof.stages.finetune import finetune

    demo = yaml.safe_load((ROOT / "configs" / "demo.yml").read_text())
    demo["settings"]["output_dir"] = str(tmp_path / "outputs")
    demo["models"][0]["name"] = str(DEMO_MODEL)
    demo["data"]["dir"] = str(tmp_path / "data")
    demo["data"]["test_size"] = 100
    demo["datasets"] = [{"name": ABILITY}]
    demo["evals"] = {"benchmarks": [ABILITY], "num_fewshot": [0], "device": "cpu"}
    demo["extract"]["regions"] = ["top", "random"]
    demo["aggregate"]["bootstrap"] = 200
    k = demo["aggregate"]["report_k"]  # the k the demo's known answer is read at
    demo["settings"]["k_values"] = [k]
    config = tmp_path / "demo.yml"
    config.write_text(yaml.safe_dump(demo))

    data(load_config(config))
    finetune(load_config(config))
    extract(load_config(config))
    evaluate(load_config(config))
    profile = load_scores(load_config(config), progress=False)
    top = profile.row(ABILITY, ABILITY, k=k, region="top")
    random = profile.row(ABILITY, ABILITY, k=k, region="random")
    assert top.score_original > 0.4, "the demo model should have learned this ability (chance 0.25)"
    assert top.ais > random.ais + 0.1, (top, random)
