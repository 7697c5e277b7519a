"""evaluate: jobs and shards, one model load per worker, output contract, reruns, saved checkpoints."""

import contextlib
import io
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from test_damage import ABILITY, write_project

from benchprof import BenchprofError
from benchprof.core.layout import Layout, Variant
from benchprof.core.loader import load_config
from benchprof.core.storage import read_json
from benchprof.stages import evaluate as evaluate_module
from benchprof.stages.damage import damage
from benchprof.stages.evaluate import Job, evaluate, job_list, parse_shard, shard_jobs, worker_commands

LIMIT = 6
TOP = Variant(ABILITY, 0.2, "top")


def read_samples(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def eval_files(root: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in sorted(root.rglob("eval/**/*")) if p.is_file()}


@pytest.fixture(scope="module")
def project(tiny_model_dir, tmp_path_factory):
    """One full evaluation (original + 2 k x 3 regions on one benchmark), shared by the tests below."""
    tmp = tmp_path_factory.mktemp("evaluate")
    config = write_project(tmp, tiny_model_dir, ks=(0.01, 0.2), limit=LIMIT)
    return config, Layout(tmp / "outputs", "tiny"), run_evaluate(config)[0]


def run_evaluate(config: Path, **options) -> tuple[int, str]:
    """Run evaluate; (the model loads its one-line summary reports, what it printed)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        evaluate(load_config(config), **options)
    return int(re.search(r"(\d+) model load\(s\)", out.getvalue()).group(1)), out.getvalue()


def test_job_order_and_shards_partition_the_jobs(tmp_path, tiny_model_dir):
    cfg = load_config(write_project(tmp_path, tiny_model_dir, ks=(0.01, 0.2, 0.3)))
    cfg.evals.benchmarks = [ABILITY, "arc_easy"]
    jobs = job_list(cfg)
    assert len(jobs) == (1 + 3 * 3) * 2
    assert jobs[:2] == [Job(Variant(), ABILITY), Job(Variant(), "arc_easy")]
    assert jobs[2].variant == Variant(ABILITY, 0.01, "top") and jobs[-1].variant == Variant(ABILITY, 0.3, "random")
    for n in (2, 3, 7):
        shards = [shard_jobs(jobs, i, n) for i in range(n)]
        assert sorted(map(repr, sum(shards, []))) == sorted(map(repr, jobs))
        assert sum(len(s) for s in shards) == len(jobs)  # disjoint
    assert job_list(cfg) == jobs  # deterministic
    assert [j.variant for j in job_list(cfg, k="0.2", region="top", benchmark="arc_easy")] == [Variant(), TOP]
    assert Variant() not in [j.variant for j in job_list(cfg, original=False)]
    assert parse_shard("1/2") == (1, 2)
    for bad in ("2/2", "x", "1-2"):
        with pytest.raises(BenchprofError, match="--shard"):
            parse_shard(bad)


def test_one_model_load_for_all_variants(project):
    _, layout, loads = project
    assert loads == 1
    for k in (0.01, 0.2):
        for region in ("top", "bottom", "random"):
            assert layout.eval_file(Variant(ABILITY, k, region), ABILITY).is_file()
    assert layout.eval_file(Variant(), ABILITY) == layout.model_dir / "original" / "eval" / f"{ABILITY}.json"


def test_outputs_follow_the_contract(project):
    _, layout, _ = project
    payload = read_json(layout.eval_file(TOP, ABILITY))
    assert payload["benchmark"] == ABILITY and payload["primary_task"] == "benchprof_spatial_reasoning"
    assert set(payload["results"]["benchprof_spatial_reasoning"]) >= {"acc,none", "acc_stderr,none"}
    assert payload["n_samples"] == LIMIT and payload["limit"] == LIMIT and payload["num_fewshot"] == 0
    assert payload["variant"] == {"ability": ABILITY, "k": 0.2, "region": "top"}
    assert payload["model"] == "tiny" and payload["wall_seconds"] > 0
    assert read_json(layout.eval_file(Variant(), ABILITY))["variant"] == {"ability": None, "k": None, "region": None}
    rows = read_samples(layout.samples_file(TOP, ABILITY))
    assert [r["doc_id"] for r in rows] == list(range(LIMIT))
    for r in rows:
        assert r["task"] == "benchprof_spatial_reasoning" and r["filter"] == "none"
        assert r["acc"] in (0.0, 1.0) and len(r["loglikelihoods"]) == 4
    acc = payload["results"]["benchprof_spatial_reasoning"]["acc,none"]
    assert acc == pytest.approx(sum(r["acc"] for r in rows) / LIMIT)


def test_ablation_changes_scores_and_restore_brings_them_back(project):
    config, layout, _ = project
    original = read_samples(layout.samples_file(Variant(), ABILITY))
    top = read_samples(layout.samples_file(TOP, ABILITY))
    assert all(a["loglikelihoods"] != b["loglikelihoods"] for a, b in zip(original, top))
    # the bottom region of the largest k ran after the top one: had restore failed, the later
    # variants would carry the top region's damage; each variant differs from every other one
    lls = {
        r: [s["loglikelihoods"] for s in read_samples(layout.samples_file(Variant(ABILITY, 0.2, r), ABILITY))]
        for r in ("top", "bottom", "random")
    }
    assert lls["top"] != lls["bottom"] != lls["random"] != lls["top"]
    # the last variant, scored alone on a fresh load, matches its score after five others
    late = Variant(ABILITY, 0.2, "random")
    after_others = read_samples(layout.samples_file(late, ABILITY))
    evaluate(load_config(config), k=0.2, region="random", original=False, force=True)
    assert read_samples(layout.samples_file(late, ABILITY)) == after_others


def test_saved_checkpoint_from_disk_scores_the_same(project, tmp_path):
    config, layout, _ = project
    damage(load_config(config), k=0.2, region="top", save=True)
    saved_dir = layout.damaged_dir(ABILITY, 0.2, "top")
    raw = yaml.safe_load(Path(config).read_text())
    raw["models"] = [{"name": str(saved_dir), "tag": "saved", "dtype": "float32"}]
    raw["settings"]["output_dir"] = str(tmp_path / "outputs")
    (tmp_path / "config.yml").write_text(yaml.safe_dump(raw))
    evaluate(load_config(tmp_path / "config.yml"), ability=ABILITY, k=[], region=[])  # the original only
    from_disk = Layout(tmp_path / "outputs", "saved")
    assert read_samples(from_disk.samples_file(Variant(), ABILITY)) == read_samples(layout.samples_file(TOP, ABILITY))
    assert (
        read_json(from_disk.eval_file(Variant(), ABILITY))["results"]
        == read_json(layout.eval_file(TOP, ABILITY))["results"]
    )


def test_rerun_skips_finished_jobs_and_force_or_a_new_mask_reruns(project, capsys):
    config, layout, _ = project
    before = eval_files(layout.model_dir)
    loads, printed = run_evaluate(config)
    assert eval_files(layout.model_dir) == before  # nothing rewritten
    assert loads == 0  # and no model loaded
    assert "0 jobs run, 7 skipped" in printed

    evaluate(load_config(config), k=0.01, region="top", force=True)
    after = eval_files(layout.model_dir)
    changed = {p for p in before if after[p] != before[p]}
    assert changed == {
        layout.eval_file(Variant(ABILITY, 0.01, "top"), ABILITY),
        layout.samples_file(Variant(ABILITY, 0.01, "top"), ABILITY),
        layout.eval_file(Variant(), ABILITY),
        layout.samples_file(Variant(), ABILITY),
    }

    # a mask that changes (here: replaced by another region's) makes its jobs stale
    shutil.copy(layout.mask_file(ABILITY, 0.01, "bottom"), layout.mask_file(ABILITY, 0.01, "random"))
    evaluate(load_config(config))
    assert "1 jobs run, 6 skipped" in capsys.readouterr().out


def test_mask_of_another_model_fails_before_scoring(project, tmp_path):
    from benchprof.lab.tinymodel import make_tiny_model

    config, layout, _ = project
    raw = yaml.safe_load(Path(config).read_text())
    other = make_tiny_model(tmp_path / "other", seed=1)
    raw["models"] = [{"name": str(other), "tag": "tiny", "dtype": "float32"}]  # same tag, other weights
    shutil.copytree(layout.model_dir.parent, tmp_path / "outputs")
    raw["settings"]["output_dir"] = str(tmp_path / "outputs")
    (tmp_path / "config.yml").write_text(yaml.safe_dump(raw))
    with pytest.raises(BenchprofError, match="masks from another model"):
        evaluate(load_config(tmp_path / "config.yml"), k=0.01, region="top", original=False)


def test_missing_masks_and_vllm_fail_clearly(tmp_path, tiny_model_dir):
    import importlib.util

    config = write_project(tmp_path, tiny_model_dir, ks=(0.01,), regions=("top",))
    raw = yaml.safe_load(config.read_text())
    raw["settings"]["k_values"] = [0.01, 0.05]
    config.write_text(yaml.safe_dump(raw))
    with pytest.raises(BenchprofError, match="mask file"):
        evaluate(load_config(config))
    if importlib.util.find_spec("vllm") is None:
        with pytest.raises(BenchprofError, match="vllm is not installed"):
            evaluate(load_config(config), backend="vllm", k=0.01)


def test_several_gpus_spawn_one_worker_each(tmp_path, tiny_model_dir, monkeypatch, capsys):
    config = write_project(tmp_path, tiny_model_dir, ks=(0.01,), regions=("top",))
    raw = yaml.safe_load(config.read_text())
    raw["settings"]["cuda_visible_devices"] = "2,5"
    config.write_text(yaml.safe_dump(raw))
    spawned = []
    monkeypatch.setattr(evaluate_module, "cuda_available", lambda: True)
    monkeypatch.setattr(evaluate_module, "spawn_workers", lambda commands, **_: spawned.extend(commands))
    evaluate(load_config(config), limit=3, force=True)
    assert "model load" not in capsys.readouterr().out  # the parent loads nothing: its workers do
    assert [env["CUDA_VISIBLE_DEVICES"] for _, env in spawned] == ["2", "5"]
    for i, (argv, _) in enumerate(spawned):
        effective = load_config(argv[argv.index("evaluate") + 1])  # the config in hand, written for the workers
        assert effective.settings.devices() == ["2", "5"] and effective.output_root == load_config(config).output_root
        assert f"--shard={i}/2" in argv and "--limit=3" in argv and "--force" in argv
    spawned.clear()
    evaluate(load_config(config), original_only=True)  # its empty k list is no --k= for the workers
    assert all("--original_only" in argv and not any(a.startswith("--k") for a in argv) for argv, _ in spawned)
    tp = worker_commands("c.yml", ["0", "1", "2", "3"], 2, {"backend": "vllm"})
    assert [env["CUDA_VISIBLE_DEVICES"] for _, env in tp] == ["0,1", "2,3"]


def test_option_lengths_are_the_choices_after_the_delimiter():
    from benchprof.core.results import option_lengths

    assert option_lengths([("Q: x\nA:", " cat"), ("Q: x\nA:", " horses")], " ") == [3, 6]
    assert option_lengths([("Q", "\nyes"), ("Q", "\nno")], "\n") == [3, 2]
    assert option_lengths([("Q", "\nyes"), ("Q", "\nno")], " ") is None  # not this task's delimiter
    # acc_mutual_info: the options' unconditional requests follow as a second half
    assert option_lengths([("Q", " ab"), ("Q", " x"), ("", " ab"), ("", " x")], " ", mutual_info=True) == [2, 1]
    # a multiple-input task (winogrande) puts the options in the contexts: their lengths are not known here
    assert option_lengths([("The cat sat", " on it."), ("The dog sat", " on it.")], " ") is None
    assert option_lengths(None, " ") is None and option_lengths([], " ") is None


def test_samples_of_data_without_clusters_have_none(project):
    _, layout, _ = project
    for r in read_samples(layout.samples_file(TOP, ABILITY)):
        assert "cluster" not in r
        assert r["option_lengths"] == [len(o) for o in ("left", "right", "above", "below")]


def test_samples_carry_option_lengths_and_clusters_of_generated_items(tmp_path, tiny_model_dir):
    """A generated ability's rows: each option's length as acc_norm divides by it, and the item's cluster."""
    import numpy as np
    from test_damage import write_masks

    from benchprof.abilities import generate
    from benchprof.core.modeling import load_model

    ability, n = "Commonsense_Causal", 12
    folder = tmp_path / "causal"
    folder.mkdir()
    train, test = generate(ability, 4, n, seed=0)
    for split, records in (("train", train), ("test", test)):
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    config = tmp_path / "config.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "settings": {"k_values": [0.01], "eval_batch_size": 8, "output_dir": "outputs"},
                "models": [{"name": str(tiny_model_dir), "tag": "tiny", "dtype": "float32"}],
                "datasets": [{"name": ability, "path": str(folder)}],
                "extract": {"regions": ["top"]},
                "evals": {"benchmarks": [ability], "num_fewshot": [0], "device": "cpu"},
            }
        )
    )
    layout = Layout(tmp_path / "outputs", "tiny")
    write_masks(load_model(str(tiny_model_dir), dtype="float32")[0], layout, (0.01,), ("top",), ability)
    run_evaluate(config)
    for variant in (Variant(), Variant(ability, 0.01, "top")):
        rows = read_samples(layout.samples_file(variant, ability))
        assert [r["doc_id"] for r in rows] == list(range(n))
        for row, record in zip(rows, test):
            assert row["option_lengths"] == [len(o) for o in record["options"]]
            assert row["cluster"] == record["cluster"] and row["cluster"].startswith("everyday_cause_effect:")
            # lm-eval's acc_norm is the argmax of loglikelihood / length over these very lengths
            normalised = np.array(row["loglikelihoods"]) / np.array(row["option_lengths"])
            assert row["acc_norm"] == float(np.argmax(normalised) == record["label"])
        assert len({tuple(r["option_lengths"]) for r in rows}) == n  # lengths that tell the items apart


def test_document_scores_match_the_in_process_scorer_per_document_and_unknown_benchmarks_are_named(tmp_path):
    """document_scores (lm-eval through SharedPrefixLM, the real-benchmark path of validate.py and the plant's
    benchmark check) gives each document the acc and acc_norm that benchprof's own in-process multiple-choice
    scorer (planted.item_scores) gives it, in the split's order; a benchmark the config lacks is named in one
    error with the config."""
    from benchprof.abilities import generate
    from benchprof.core.loader import parse_config
    from benchprof.core.modeling import load_model
    from benchprof.stages.choices import item_scores
    from benchprof.stages.data import write_jsonl
    from benchprof.stages.evaluate import document_scores
    from benchprof.stages.prefix_scorer import SharedPrefixLM
    from benchprof.stages.tasks import benchmark_tasks

    demo = Path(__file__).resolve().parents[1] / "benchprof" / "assets" / "demo-model"
    train, test = generate("Long_Term_Knowledge", 4, 24, 5)
    write_jsonl(tmp_path / "ltk" / "train.jsonl", train)
    write_jsonl(tmp_path / "ltk" / "test.jsonl", test)
    raw = {
        "settings": {"output_dir": str(tmp_path / "out")},
        "models": [{"name": str(demo)}],
        "datasets": [{"name": "Long_Term_Knowledge", "path": str(tmp_path / "ltk")}],
        "evals": {"benchmarks": ["Long_Term_Knowledge"]},
    }
    cfg = parse_config(raw, tmp_path / "config.yml")
    with pytest.raises(BenchprofError, match=r"config\.yml: evals\.benchmarks has no arc_easy"):
        benchmark_tasks(cfg, ["Long_Term_Knowledge", "arc_easy"], str(tmp_path / "config.yml"))
    tasks, manager = benchmark_tasks(cfg, ["Long_Term_Knowledge"], str(tmp_path / "config.yml"))
    model, tok = load_model(str(demo), dtype="float32")
    lm = SharedPrefixLM(pretrained=model, tokenizer=tok, batch_size=8)
    acc, acc_norm = item_scores(model, tok, test)
    got = document_scores(lm, tasks, None, manager, 0)["Long_Term_Knowledge"]
    got_norm = document_scores(lm, tasks, None, manager, 0, "acc_norm")["Long_Term_Knowledge"]
    assert 0 < acc.mean() < 1 and (acc != acc_norm).any()  # a test that could tell the two metrics and orders apart
    assert got.tolist() == acc.tolist()
    assert got_norm.tolist() == acc_norm.tolist()
    with pytest.raises(BenchprofError, match="no per-document 'f1'"):
        document_scores(lm, tasks, 3, manager, 0, "f1")


def test_lean_lm_eval_renders_every_template_as_lm_eval_and_restores_it():
    """lean_lm_eval's template renderer gives lm-eval's own text (benchprof's prompt with and without a context,
    a filter of lm-eval's environment, a choice list), and lm-eval's functions are back after the block, even
    when it raises."""
    import lm_eval.evaluator
    import lm_eval.utils

    from benchprof.stages.evaluate import lean_lm_eval, render_template
    from benchprof.stages.tasks import DOC_TO_TEXT

    original = lm_eval.utils.apply_template
    docs = [
        {"context": "Ann has two cats.", "question": "How many cats?", "options": ["1", "2"]},
        {"context": "", "question": "Capital of France?", "options": ["Paris", "Rome"]},
    ]
    templates = [DOC_TO_TEXT, "{{question | regex_replace('[?]', '!')}}", "{{options}}", "{{options[1]}}"]
    for template in templates:
        for doc in docs:
            assert render_template(template, doc) == original(template, doc)
    env_info = lm_eval.evaluator.add_env_info
    with pytest.raises(RuntimeError), lean_lm_eval():
        assert lm_eval.utils.apply_template is render_template
        raise RuntimeError("a failing job")
    assert lm_eval.utils.apply_template is original and lm_eval.evaluator.add_env_info is env_info
