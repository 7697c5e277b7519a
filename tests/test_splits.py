"""abilities.generate(..., split_by="problem") and abilities.transfer_split: splits that measure the ability. No
test item asks a problem of the train split (names and wording masked), a problem decides its answer, and a
transfer item is written in a format its train split never uses and asks no train problem."""

from __future__ import annotations

import json
import random
from collections import defaultdict

import pytest

from benchprof.abilities import (
    MODULES,
    TRANSFER,
    draw_splits,
    generate,
    has_transfer,
    problem_of,
    split_of,
    transfer_benchmark,
    transfer_split,
)

PROFILED = (  # the eight abilities SmolLM2 is above chance on at the easy level, all with a transfer split
    "Analogical_Reasoning", "Commonsense_Causal", "Deductive_Reasoning", "Inductive_Reasoning",
    "Long_Term_Knowledge", "Quantitative_Reasoning", "Semantic_Relationship", "Temporal_Reasoning",
)  # fmt: skip


@pytest.mark.parametrize("ability", PROFILED)
def test_no_test_item_asks_a_train_problem(ability):
    train, test = generate(ability, 500, 300, seed=1234, difficulty="easy", split_by="problem")
    assert len(train) == 500 and len(test) == 300
    assert not {r["problem"] for r in train} & {r["problem"] for r in test}
    questions = {(r["context"], r["question"]) for r in train}
    assert not any((r["context"], r["question"]) in questions for r in test)
    again = generate(ability, 500, 300, seed=1234, difficulty="easy", split_by="problem")
    assert again == (train, test)  # deterministic
    assert generate(ability, 500, 300, seed=7, difficulty="easy", split_by="problem") != (train, test)


def test_the_question_split_repeats_problems_the_problem_split_does_not():
    """Temporal_Reasoning's easy items at the question split (every earlier version's rule): most test items ask a
    problem of the train split, with a name or a phrase changed; at the problem split none does."""
    train, test, _ = draw_splits("Temporal_Reasoning", 500, 300, 1234, "easy", "question")
    seen = {problem_of(i) for i in train}
    assert sum(problem_of(i) in seen for i in test) > 150
    train, test, _ = draw_splits("Temporal_Reasoning", 500, 300, 1234, "easy", "problem")
    assert not {problem_of(i) for i in train} & {problem_of(i) for i in test}


@pytest.mark.parametrize("ability", PROFILED)
def test_a_problem_decides_its_answer_whatever_the_names_and_wording(ability):
    """Items sharing a made-up problem's key are the same problem told with other names or words: they share the
    answer (up to the names in it, which the key masks). A key too coarse would join problems with other answers.
    (A table fact's key is its cluster, the fact in either direction, whose answers test_abilities checks.)"""
    from benchprof.abilities.common import masked_names

    module = MODULES[ability]
    draw = getattr(module, "draw_easy", module.draw)
    rng = random.Random(f"problems/{ability}")
    answers: dict[str, set[str]] = defaultdict(set)
    made_up: set[str] = set()
    for _ in range(3000):
        item = draw(rng)
        answers[problem_of(item)].add(masked_names(item.answer))
        if item.problem:
            made_up.add(item.problem)
    shared = [key for key, found in answers.items() if key in made_up and len(found) > 1]
    assert shared == [], (ability, shared[:3])
    assert len(answers) < 3000  # problems do repeat: the key masks something


def test_names_and_wording_are_masked_in_the_problem():
    from benchprof.abilities import quantitative, temporal

    rng = random.Random(3)
    by_problem: dict[str, set[str]] = defaultdict(set)
    for _ in range(4000):
        item = quantitative.draw_easy(rng)
        by_problem[item.problem].add(item.context)
    assert max(len(contexts) for contexts in by_problem.values()) > 5  # other names and things, one problem
    rng = random.Random(4)
    contexts = {temporal.draw_easy(rng) for _ in range(2000)}
    steps = defaultdict(set)
    for item in contexts:
        steps[item.problem].add(item.context)
    assert any("" in c and len(c) > 1 for c in steps.values())  # "", "born in ...", "it is ... now": one problem


@pytest.mark.parametrize("ability", PROFILED)
def test_a_transfer_item_asks_no_train_problem_in_a_format_the_train_split_never_uses(ability):
    assert has_transfer(ability)
    for split_by, train_size in (("problem", 500), ("question", 60)):  # a question split's train asks most problems
        train_items, _, _ = draw_splits(ability, train_size, 300, 1234, "easy", split_by)
        records = transfer_split(ability, 200, train_size, 300, 1234, "easy", split_by)
        assert len(records) == 200 and all(r["id"].startswith(f"{ability}-{TRANSFER}-") for r in records)
        asked = {r["problem"].split(":", 1)[1] for r in records if "problem" in r}  # the split's records name them
        assert not {problem_of(i) for i in train_items} & asked
        train_templates = {i.cluster.split(":")[0] for i in train_items}
        assert not {r["cluster"].split(":")[1] for r in records} & train_templates, ability
        train_questions = {(i.context, i.question) for i in train_items}
        assert not any((r["context"], r["question"]) in train_questions for r in records)
        assert {r["label"] for r in records} == {0, 1, 2, 3}


def test_a_transfer_benchmark_names_its_ability_and_split():
    assert transfer_benchmark("Temporal_Reasoning") == "Temporal_Reasoning_transfer"
    assert split_of("Temporal_Reasoning_transfer") == ("Temporal_Reasoning", TRANSFER)
    assert split_of("Temporal_Reasoning") == ("Temporal_Reasoning", "test")
    assert split_of("Spatial_Reasoning_transfer") is None  # no transfer split: not a generated benchmark
    assert split_of("arc_easy") is None


def test_the_data_stage_writes_the_transfer_split_and_refuses_one_not_asked_for(tmp_path):
    from benchprof.cli import main
    from benchprof.core.loader import load_config
    from benchprof.stages.data import load_split

    config = tmp_path / "config.yml"
    raw = {
        "models": [{"name": "m", "tag": "t"}],
        "datasets": [{"name": "Quantitative_Reasoning"}],
        "evals": {"benchmarks": ["Quantitative_Reasoning", "Quantitative_Reasoning_transfer"]},
        "data": {"dir": "data", "train_size": 40, "test_size": 20, "difficulty": "easy", "split_by": "problem",
                 "transfer_size": 30},
    }  # fmt: skip
    config.write_text(json.dumps(raw))
    main(["data", str(config)])
    cfg = load_config(config)
    transfer = load_split(cfg, "Quantitative_Reasoning", TRANSFER)
    train = load_split(cfg, "Quantitative_Reasoning", "train")
    assert len(transfer) == 30 and not {r["problem"] for r in train} & {r["problem"] for r in transfer}
    assert transfer == transfer_split("Quantitative_Reasoning", 30, 40, 20, 1234, "easy", "problem")
    raw["data"]["transfer_size"] = 0
    config.write_text(json.dumps(raw))
    with pytest.raises(SystemExit):
        main(["data", str(config)])  # the benchmark list names a transfer split the config does not make


@pytest.mark.slow
def test_a_transfer_split_is_a_benchmark_lm_eval_scores(tmp_path):
    """`<Ability>_transfer` through the pipeline: a local lm-eval task on transfer.jsonl, scored for the original
    model document by document (the demo model, 12 items)."""
    from pathlib import Path

    from benchprof.cli import main
    from benchprof.core.layout import Layout, Variant
    from benchprof.core.loader import load_config
    from benchprof.core.results import iter_samples

    demo = Path(__file__).resolve().parents[1] / "benchprof" / "assets" / "demo-model"
    config = tmp_path / "config.yml"
    config.write_text(
        json.dumps({
            "settings": {"output_dir": "out"}, "models": [{"name": str(demo), "tag": "demo"}],
            "datasets": [{"name": "Temporal_Reasoning"}],
            "evals": {"benchmarks": ["Temporal_Reasoning_transfer"], "device": "cpu"},
            "data": {"dir": "data", "train_size": 40, "test_size": 20, "difficulty": "easy", "split_by": "problem",
                     "transfer_size": 12},
        })
    )  # fmt: skip
    main(["data", str(config)])
    main(["evaluate", str(config), "--original_only"])
    layout = Layout(tmp_path / "out", "demo")
    samples = list(iter_samples(layout.samples_file(Variant(), "Temporal_Reasoning_transfer")))
    transfer = [json.loads(line) for line in (tmp_path / "data" / "Temporal_Reasoning" / "transfer.jsonl").open()]
    assert len(samples) == 12 == len(transfer)
    assert load_config(config).evals.benchmarks == ["Temporal_Reasoning_transfer"]
