"""lab/dtype_agreement.py on the demo model: a float32 and a bfloat16 frontier of one plan compared item by item,
held to a count by hand from the two records files; plans that differ in more than the dtype refused in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchprof import BenchprofError
from benchprof.cli import main
from benchprof.core.storage import read_csv, read_records

ROOT = Path(__file__).resolve().parents[1]
ABILITIES = ["Commonsense_Causal", "Long_Term_Knowledge"]
FLAGS = ["--options", "act_grad_contrast", "--sizes", "8", "--draws", "3", "--train_items", "12", "--test_items", "30"]
pytestmark = pytest.mark.slow


def test_flips_and_cells_equal_a_count_by_hand_and_other_plans_are_refused(tmp_path, demo_frontier_config):
    config = demo_frontier_config
    main(["frontier", str(config), *FLAGS, "--folder", "f32"])
    main(["frontier", str(config), *FLAGS, "--folder", "bf16", "--dtype", "bfloat16"])
    main(["frontier", str(config), *FLAGS, "--folder", "other", "--dtype", "bfloat16", "--test_items", "20"])
    out = tmp_path / "out" / "demo"
    script = [sys.executable, str(ROOT / "scripts" / "dtype_agreement.py")]
    done = subprocess.run([*script, str(out / "f32"), str(out / "bf16")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    a, b = (read_records(out / f / "evaluations.jsonl") for f in ("f32", "bf16"))
    by_region = {(r["option"], r["region"]): r["acc_norm"] for r in b}
    by_hand = sum(
        x != y
        for r in a
        for split, xs in r["acc_norm"].items()
        for x, y in zip(xs, by_region[(r["option"], r["region"])][split])
    )
    text = (out / "bf16" / "dtype_agreement.md").read_text()
    assert f"Items scored differently: {by_hand} of {len(a) * 2 * 30} " in text
    rows = read_csv(out / "bf16" / "dtype_agreement.csv")
    f32 = {r["ability"]: r for r in read_csv(out / "f32" / "frontier.csv")}
    for row in rows:
        if row["ability"] in f32 and row["option"] == "act_grad_contrast":
            assert float(row["own_float32"]) == pytest.approx(float(f32[row["ability"]]["own_ais"]))
    refused = subprocess.run([*script, str(out / "f32"), str(out / "other")], capture_output=True, text=True)
    assert refused.returncode == 1 and refused.stderr.strip().endswith("they differ in test_items)")
    assert len(refused.stderr.strip().splitlines()) == 1


def test_two_profiles_of_one_config_compare_item_by_item_as_counted_by_hand(tmp_path):
    """The demo model profiled with evals.dtype float32 and bfloat16 (one config otherwise): the flips equal a
    count by hand over both documents archives, each row's AIS both ais.csv files; a config that differs in more
    than the dtype is refused in one line."""
    import json
    import shutil
    import tarfile

    import yaml
    from test_selections import project

    from benchprof.core.loader import load_config
    from benchprof.lab.dtype_agreement import main as compare
    from benchprof.stages.run import run

    config = project(tmp_path / "run", selections=1, regions=("top", "random"), limit=8, dtype="float32")
    raw = yaml.safe_load(config.read_text())
    folders = {}
    for dtype, tag in (("float32", "demo"), ("bfloat16", "demo-bf16")):
        raw["evals"]["dtype"] = dtype
        raw["models"][0]["tag"] = tag
        path = tmp_path / f"{tag}.yml"
        path.write_text(yaml.safe_dump(raw))
        run(load_config(path))
        folders[tag] = tmp_path / "committed" / tag
        shutil.copytree(tmp_path / "run" / "out" / tag / "profile", folders[tag])
        shutil.copy(path, folders[tag] / "config.yml")
    # the bfloat16 profile under a config that differs in one more key
    folders["demo-other"] = tmp_path / "committed" / "demo-other"
    shutil.copytree(folders["demo-bf16"], folders["demo-other"])
    raw["evals"]["limit"] = 6
    (folders["demo-other"] / "config.yml").write_text(yaml.safe_dump(raw))
    compare(str(folders["demo"]), str(folders["demo-bf16"]), str(tmp_path / "agree"))

    primary = {
        r["benchmark"]: r["metric"].split(",")[0]
        for r in read_csv(folders["demo"] / "ais.csv")
        if r["region"] == "top" and r["metric"] != "p_correct"  # one benchmark is at chance: no test, no family
    }

    def values(folder):
        out = {}
        with tarfile.open(folder / "documents.tar.xz") as archive:
            for member in archive.getmembers():
                if member.name.endswith(".samples.jsonl"):
                    metric = primary[member.name.rsplit("/", 1)[1].removesuffix(".samples.jsonl")]
                    for line in archive.extractfile(member).read().decode().splitlines():
                        sample = json.loads(line)
                        out[(member.name, sample["doc_id"])] = sample[metric]
        return out

    a, b = values(folders["demo"]), values(folders["demo-bf16"])
    assert set(a) == set(b) and len(a) == 3 * (1 + 3 * 3) * 8  # 3 benchmarks: original, 3 abilities x 3 regions
    by_hand = sum(a[key] != b[key] for key in a)
    text = (tmp_path / "agree" / "dtype_agreement.md").read_text()
    assert f"Documents scored differently: {by_hand} of {len(a)} " in text
    f32, bf16 = (
        {(r["ability"], r["benchmark"], r["region"], r["metric"]): r for r in read_csv(folders[t] / "ais.csv")}
        for t in ("demo", "demo-bf16")
    )
    rows = read_csv(tmp_path / "agree" / "dtype_agreement.csv")
    assert {r["region"] for r in rows} >= {"top", "top-random"}
    for row in rows:
        key = (row["ability"], row["benchmark"], row["region"], row["metric"])
        assert float(row["ais_float32"]) == pytest.approx(float(f32[key]["ais"]), abs=1e-6)  # 6 digits
        assert float(row["ais_bfloat16"]) == pytest.approx(float(bf16[key]["ais"]), abs=1e-6)
        assert (row["star_float32"] == "true") == (f32[key]["significant"] == "true")
    with pytest.raises(BenchprofError, match=r"config.yml differs in evals.limit\)$"):
        compare(str(folders["demo"]), str(folders["demo-other"]), str(tmp_path / "refused"))
    assert not (tmp_path / "refused").exists()
