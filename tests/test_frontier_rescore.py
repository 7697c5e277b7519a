"""lab/frontier_rescore.py on the demo model: a frontier scored by the current scorer held to a scorer-v1 folder of
the same plan, whose scores are computed here by hand (argmax of log-likelihood per character of ' option'); and
every committed frontier folder marked scorer v1 exactly where its records keep no log-likelihoods."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from benchprof import BenchprofError
from benchprof.cli import main
from benchprof.core.storage import append_record, read_records
from benchprof.lab.frontier_report import V1_NOTE, scored_by_v1
from benchprof.lab.frontier_rescore import rescore_check, rescore_line
from benchprof.stages.data import read_jsonl

ROOT = Path(__file__).resolve().parents[1]
ABILITIES = ["Commonsense_Causal", "Long_Term_Knowledge"]
pytestmark = pytest.mark.slow


def test_only_the_metric_moved_is_told_apart_from_other_scores_and_other_regions(tmp_path, demo_frontier_config):
    config = demo_frontier_config
    main(["frontier", str(config), "--options", "act_grad", "--sizes", "8", "--draws", "3", "--train_items", "12"])
    new = tmp_path / "out" / "demo" / "frontier"
    records = read_records(new / "evaluations.jsonl")
    items = {a: read_jsonl(tmp_path / "data" / a / "test.jsonl")[:30] for a in ABILITIES}

    def by_hand(logliks: list[list[float]], split: str) -> list[float]:
        return [
            float(int(np.argmax(np.array(ll) / [len(" " + o) for o in item["options"]])) == item["label"])
            for ll, item in zip(logliks, items[split], strict=True)
        ]

    old = tmp_path / "old"
    old.mkdir()
    v1 = [{**r, "acc_norm": {s: by_hand(ll, s) for s, ll in r["loglik"].items()}} for r in records]
    for r in v1:
        append_record(old / "evaluations.jsonl", {k: v for k, v in r.items() if k != "loglik"})
    moved = sum(
        a != b for r, o in zip(records, v1) for s in ABILITIES for a, b in zip(r["acc_norm"][s], o["acc_norm"][s])
    )
    counts = rescore_check(new, old, tmp_path / "data")
    assert counts == {"regions": len(records), "matched": len(records), "items": len(records) * 60, "v1_differs": 0,
                      "moved": moved, "v1_differs_by_split": {}, "moved_where_v1_agrees": moved,
                      "dropped": {}}  # fmt: skip
    # one item scored otherwise in the committed folder, and one region the committed folder lacks
    shutil.rmtree(old)
    old.mkdir()
    v1[0]["acc_norm"][ABILITIES[0]][0] = 1 - v1[0]["acc_norm"][ABILITIES[0]][0]
    for r in v1[:-1]:
        append_record(old / "evaluations.jsonl", {k: v for k, v in r.items() if k != "loglik"})
    counts = rescore_check(new, old, tmp_path / "data")
    assert counts["matched"] == len(records) - 1 and counts["v1_differs"] == 1
    assert counts["v1_differs_by_split"] == {ABILITIES[0]: 1}
    moved_other = sum(
        a != b
        for r, o in zip(records, v1[:-1])
        for a, b in zip(r["acc_norm"][ABILITIES[1]], o["acc_norm"][ABILITIES[1]])
    )
    assert counts["moved_where_v1_agrees"] == moved_other
    assert f"differs from the committed on 1 ({ABILITIES[0]} 1)," in rescore_line(counts)
    # a folder that does not exist, a records file cut in its last line, the records of two runs in one file
    with pytest.raises(BenchprofError, match=r"evaluations.jsonl: not found \(not a frontier folder\)"):
        rescore_check(new, tmp_path / "nowhere", tmp_path / "data")
    text = (old / "evaluations.jsonl").read_text()
    (old / "evaluations.jsonl").write_text(text[: len(text) - 40])
    counts = rescore_check(new, old, tmp_path / "data")
    assert counts["dropped"] == {str(old): 1} and f"; 1 unreadable line(s) of {old} dropped" in rescore_line(counts)
    (old / "evaluations.jsonl").write_text(text)
    append_record(old / "evaluations.jsonl", {**{k: v for k, v in v1[0].items() if k != "loglik"}, "inputs": "other"})
    with pytest.raises(BenchprofError, match=r"holds region .* twice, scored with other inputs"):
        rescore_check(new, old, tmp_path / "data")


COMMITTED = sorted(p.parent for p in (ROOT / "docs" / "results").glob("frontier-*/evaluations.jsonl"))


@pytest.mark.parametrize("folder", COMMITTED, ids=lambda p: p.name)
def test_a_committed_frontier_says_scorer_v1_exactly_when_its_records_keep_no_log_likelihoods(folder: Path):
    """A folder rendered before the v1 banner existed, or re-scored without being rendered again, is caught here."""
    v1 = scored_by_v1(read_records(folder / "evaluations.jsonl"))
    assert (V1_NOTE in (folder / "frontier.md").read_text()) == v1
