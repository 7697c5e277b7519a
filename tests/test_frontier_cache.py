"""lab/frontier_cache.py and frontier_plan.py on the demo model: the frontier's caches and records are tied to what
they were computed from. Each broken condition is made for real (data regenerated with another seed, weights
scaled in the checkpoint, a file truncated, a line cut, a link, a moved project), and the rerun's rows are held to
those of a fresh run on the same inputs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchprof.cli import main
from benchprof.core.storage import append_record, read_csv, read_records
from benchprof.stages.neurons import ITERATIVE

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "benchprof" / "assets" / "demo-model"
ABILITIES = ["Commonsense_Causal", "Long_Term_Knowledge"]
FLAGS = ["--options", "act_grad,act_grad_contrast", "--sizes", "2,16", "--draws", "2"]
FLAGS += ["--train_items", "12", "--test_items", "20"]
pytestmark = pytest.mark.slow


def project(folder: Path, model: Path = DEMO) -> Path:
    """A config in `folder` whose data and outputs lie beside it (relative paths), its data generated."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "demo.yml"
    config.write_text(
        json.dumps({
            "settings": {"output_dir": "out", "seed": 3},
            "models": [{"name": str(model), "tag": "demo"}],
            "datasets": [{"name": a} for a in ABILITIES],
            "data": {"dir": "data", "train_size": 12, "test_size": 20},
        })
    )  # fmt: skip
    main(["data", str(config)])
    return config


def frontier(config: Path, *extra: str) -> list[dict[str, str]]:
    main(["frontier", str(config), *FLAGS, *extra])
    return read_csv(config.parent / "out" / "demo" / "frontier" / "frontier.csv")


def fresh(config: Path, tmp_path: Path, name: str, *extra: str) -> list[dict[str, str]]:
    """The rows of a run in an empty outputs folder on the same data and model as `config`."""
    other = tmp_path / name
    other.mkdir()
    shutil.copytree(config.parent / "data", other / "data")
    (other / "demo.yml").write_text(config.read_text())
    return frontier(other / "demo.yml", *extra)


def test_changed_data_or_weights_give_the_rows_of_a_fresh_run(tmp_path, capsys):
    config = project(tmp_path / "p", model=shutil.copytree(DEMO, tmp_path / "model"))
    before = frontier(config)
    main(["data", str(config), "--seed", "99", "--force"])  # every split changes
    capsys.readouterr()
    after = frontier(config, "--sizes", "2,4,16")  # and a size is added on the new items
    assert "inputs changed since the last run: Commonsense_Causal train" in capsys.readouterr().out
    assert after == fresh(config, tmp_path, "fresh_data", "--sizes", "2,4,16") and after != before
    # two layers' down_proj scaled by 0.3 in the checkpoint itself
    from safetensors.torch import load_file, save_file

    weights_file = tmp_path / "model" / "model.safetensors"
    weights = load_file(weights_file)
    for layer in (1, 2):
        weights[f"model.layers.{layer}.mlp.down_proj.weight"] *= 0.3
    save_file(weights, weights_file, metadata={"format": "pt"})
    capsys.readouterr()
    scaled = frontier(config)
    assert "changed since the last run: model" in capsys.readouterr().out
    assert scaled == fresh(config, tmp_path, "fresh_weights", "--sizes", "2,4,16") and scaled != after


def test_one_abilitys_new_items_rescore_only_its_split_and_give_the_rows_of_a_fresh_run(tmp_path, capsys):
    """One ability's data drawn again (its train and test items): every region is scored again on that ability's
    split, and on the other split only where its neurons changed (its selection read the new train items); the
    rows equal a fresh run's. Records without the options' log-likelihoods are scored again."""
    from benchprof.core.storage import append_record

    config = project(tmp_path / "p")
    frontier(config)
    log = config.parent / "out" / "demo" / "frontier" / "evaluations.jsonl"
    before = {tuple(r["neurons"]) for r in read_records(log)}
    count = len(read_records(log))
    main(["data", str(config), "--ability", ABILITIES[1], "--seed", "99", "--force"])
    capsys.readouterr()
    after = frontier(config)
    out = capsys.readouterr().out
    assert after == fresh(config, tmp_path, "fresh") and "changed since the last run" in out
    scored = read_records(log)[count:]
    splits = sum(1 if tuple(r["neurons"]) in before else 2 for r in scored)
    assert any(tuple(r["neurons"]) in before for r in scored)  # the original and the random regions, at least
    assert f"{len(scored)} regions scored ({splits} of their {2 * len(scored)} splits)" in out
    # records without the options' log-likelihoods (the format before scorer v2) are scored again, never reused
    old = [{k: v for k, v in r.items() if k != "loglik"} for r in read_records(log)]
    log.unlink()
    for record in old:
        append_record(log, record)
    capsys.readouterr()
    assert frontier(config) == after and f"{len(scored)} regions scored" in capsys.readouterr().out


def test_a_record_cut_short_or_invalid_is_redone_never_glued(tmp_path):
    """The append that crosses a real file-size limit (a child process under RLIMIT_FSIZE) stops the run in one
    line; the rerun drops the cut line and redoes its region. A line cut by hand and a `{}` line the same."""
    config = project(tmp_path / "p")
    rows = frontier(config)
    folder = config.parent / "out" / "demo" / "frontier"
    log = folder / "evaluations.jsonl"
    whole = log.read_bytes()
    count = len(read_records(log))
    log.unlink()
    child = (
        "import resource, sys\n"
        "from benchprof.cli import main\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({len(whole) // 2}, resource.RLIM_INFINITY))\n"
        f"main(['frontier', {str(config)!r}, *{FLAGS!r}])\n"
    )
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    assert done.returncode != 0 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"benchprof: error: {log}: cannot append (File too large)")
    assert 0 < len(read_records(log)) < count and not log.read_bytes().endswith(b"\n")
    assert frontier(config) == rows and len(read_records(log)) == count
    cut = log.read_bytes()
    log.write_bytes(cut[:-10] + b"\n{}\n")  # the last line cut by hand, and an empty record after it
    assert frontier(config) == rows and len(read_records(log)) == count
    assert log.read_bytes().startswith(cut[:-10] + b"\n{}\n")  # kept, and never read as records


def test_damaged_caches_are_recomputed_and_a_moved_project_reuses_everything(tmp_path, capsys):
    config = project(tmp_path / "p")
    rows = frontier(config, "--options", f"act_grad,{ITERATIVE}")
    folder = config.parent / "out" / "demo" / "frontier"
    values = folder / "attribution" / ABILITIES[0] / "values.npy"
    values.write_bytes(values.read_bytes()[:100])  # truncated
    (folder / "plan.json").write_text("{not json")
    selection = folder / ITERATIVE / f"{ABILITIES[0]}-16.json"
    kept = json.loads(selection.read_text())
    selection.write_text(json.dumps({**kept, "neurons": [*kept["neurons"][:-1], 10**6]}))  # an id out of range
    dangling = folder / ITERATIVE / f"{ABILITIES[1]}-2.json"
    dangling.unlink()
    dangling.symlink_to(tmp_path / "nowhere.json")
    capsys.readouterr()
    assert frontier(config, "--options", f"act_grad,{ITERATIVE}") == rows
    assert "0 regions scored" in capsys.readouterr().out  # the same selections, so the same records
    assert json.loads(selection.read_text()) == kept and not dangling.is_symlink()
    assert not (tmp_path / "nowhere.json").exists()
    plan = (folder / "plan.json").read_text()
    assert str(tmp_path) not in plan and json.loads(plan)["data_dir"] == "data"
    shutil.move(config.parent, tmp_path / "moved")  # the project elsewhere: every result still holds
    capsys.readouterr()
    assert frontier(tmp_path / "moved" / "demo.yml", "--options", f"act_grad,{ITERATIVE}") == rows
    out = capsys.readouterr().out
    assert "0 regions scored" in out and "changed" not in out


def test_data_refuses_an_outputs_folder_it_cannot_write_before_writing_anything(tmp_path, capsys):
    config = tmp_path / "demo.yml"
    (tmp_path / "out").write_text("a file where the outputs folder should be")
    config.write_text(
        json.dumps({
            "settings": {"output_dir": "out"}, "models": [{"name": str(DEMO), "tag": "demo"}],
            "datasets": [{"name": ABILITIES[0]}], "data": {"dir": "data", "train_size": 4, "test_size": 4},
        })
    )  # fmt: skip
    with pytest.raises(SystemExit) as code:
        main(["data", str(config)])
    assert code.value.code != 0 and not (tmp_path / "data").exists()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a file, not a folder" in err


def test_a_bfloat16_frontier_is_its_own_result_and_scores_as_a_bfloat16_model(tmp_path, capsys):
    """--dtype bfloat16 scores every region in bfloat16 (the original model's per-item acc_norm equals item_scores on
    the model cast to bfloat16) after float32 selections (its regions equal the float32 run's), reuses none of a
    float32 run's scores in the same folder, and records its dtype in plan.json and frontier.md; --dtype float16 is
    refused in one line."""
    import torch

    from benchprof.core.modeling import load_model
    from benchprof.stages.choices import item_scores
    from benchprof.stages.data import read_jsonl

    config = project(tmp_path / "p")
    frontier(config)
    folder = config.parent / "out" / "demo" / "frontier"
    count = len(read_records(folder / "evaluations.jsonl"))
    capsys.readouterr()
    frontier(config, "--dtype", "bfloat16")
    assert ", 0 reused" in capsys.readouterr().out
    records = read_records(folder / "evaluations.jsonl")
    single, halves = records[:count], records[count:]
    assert {tuple(r["neurons"]) for r in halves} == {tuple(r["neurons"]) for r in single}  # float32 selections
    assert json.loads((folder / "plan.json").read_text())["dtype"] == "bfloat16"
    assert "scored in bfloat16" in (folder / "frontier.md").read_text()
    assert "scorer v1" not in (folder / "frontier.md").read_text()  # every record keeps its log-likelihoods
    rows = [r for r in read_csv(folder / "frontier.csv") if r["option"] != "random"]
    assert rows and all(r["own_to_chance"] != "" for r in rows)  # the chance level read from the log-likelihoods
    model, tok = load_model(str(DEMO), dtype="float32")
    model = model.to(torch.bfloat16)
    for ability in ABILITIES:
        items = read_jsonl(config.parent / "data" / ability / "test.jsonl")[:20]
        original = next(r for r in halves if r["option"] == "original")
        assert original["acc_norm"][ability] == item_scores(model, tok, items)[1].tolist()
    with pytest.raises(SystemExit):
        main(["frontier", str(config), *FLAGS, "--dtype", "float16"])
    assert "--dtype: 'float16' is not one of float32, bfloat16" in capsys.readouterr().err


def test_a_frontier_scored_by_scorer_v1_says_so_when_rendered(tmp_path):
    """A frontier whose records keep no log-likelihoods (scorer v1, the space before each option counted in
    acc_norm's divisor) is rendered with a note saying its figures are on that other metric, and so are its planted
    effects."""
    from benchprof.lab.frontier import render
    from benchprof.lab.frontier_planted import write_planted_effects
    from benchprof.lab.frontier_report import V1_NOTE

    rescored = tmp_path / "v2"  # the first frontier, scored again by v2: no note
    shutil.copytree(ROOT / "docs" / "results" / "frontier-smollm2", rescored)
    folder = tmp_path / "f"  # the same records as v1 wrote them: without the options' log-likelihoods
    folder.mkdir()
    shutil.copy(rescored / "plan.json", folder)
    records = read_records(rescored / "evaluations.jsonl")
    assert records and all("loglik" in r for r in records)
    for r in records:
        append_record(folder / "evaluations.jsonl", {k: v for k, v in r.items() if k != "loglik"})
    render(folder)
    assert (folder / "frontier.md").read_text().splitlines()[2] == V1_NOTE
    write_planted_effects(folder, ["Long_Term_Knowledge", "Commonsense_Causal", "Semantic_Relationship"])
    assert (folder / "planted_effects.md").read_text().splitlines()[2] == V1_NOTE
    render(rescored)
    assert V1_NOTE not in (rescored / "frontier.md").read_text()
