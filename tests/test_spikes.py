"""Spiked benchmarks (lab/spikes.py), built for real on a profile whose answer is known: ability A's region
removes every A document and touches nothing else. B spiked with half A documents must then be claimed to draw on A
by the rule itself (profile_scores.load_scores, claims.benchmark_claims); B unspiked, and B spiked with another
ability's documents, must not. The spiked files hold exactly B's rows and the same drawn A rows in every variant."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import yaml

from benchprof import BenchprofError
from benchprof.core.layout import Layout, Variant
from benchprof.core.loader import load_config
from benchprof.lab.spikes import claimed, plant_effect, spike_benchmark
from benchprof.profile.spikes import PLANTED, PLANTED_EVERYWHERE, SpikeRow, no_claim_reach, reach_lines
from benchprof.stages.profile_scores import load_scores, rescore_benchmark

K = 0.01
QUANT, TEMPORAL = "Quantitative_Reasoning", "Temporal_Reasoning"
N = 60  # documents per benchmark


def write(cfg, variant: Variant, benchmark: str, correct: list[int]) -> None:
    layout = Layout(cfg.output_root, "t")
    path = layout.eval_file(variant, benchmark)
    path.parent.mkdir(parents=True, exist_ok=True)
    mean = sum(correct) / len(correct)
    results = {benchmark: {"acc_norm,none": mean, "acc,none": mean}}
    payload = {"benchmark": benchmark, "primary_task": benchmark, "results": results, "n_samples": len(correct)}
    path.write_text(json.dumps(payload | {"limit": None, "num_fewshot": 0}))
    rows = [  # four options, the right one first: at chance 0.25, so above chance
        {"task": benchmark, "doc_id": i, "filter": "none", "acc_norm": float(c), "acc": float(c),
         "loglikelihoods": [0.0, -1.0, -2.0, -3.0] if c else [-3.0, 0.0, -1.0, -2.0], "target": 0,
         "option_lengths": [1, 1, 1, 1]}
        for i, c in enumerate(correct)
    ]  # fmt: skip
    layout.samples_file(variant, benchmark).write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def profile_config(tmp_path):
    """arc_easy and two ability splits; Quantitative's top region zeroes its own split, nothing else moves."""
    raw = {
        "settings": {"k_values": [K], "output_dir": "out"},
        "models": [{"name": "x", "tag": "t"}],
        "datasets": [{"name": QUANT}, {"name": TEMPORAL}],
        "evals": {"benchmarks": ["arc_easy", QUANT, TEMPORAL]},
        "extract": {"regions": ["top", "random"], "random_draws": 2},
        "aggregate": {"bootstrap": 200, "seed": 3, "min_correct": 1},
    }
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump(raw))
    cfg = load_config(path)
    variants = [Variant()] + [Variant(a, K, r) for a in (QUANT, TEMPORAL) for r in ("top", "random", "random2")]
    for v, variant in enumerate(variants):
        for b, benchmark in enumerate(("arc_easy", QUANT, TEMPORAL)):
            # every ablation loses a few documents of its own choosing (random regions differ from each other)
            correct = [int(v == 0 or (7 * i + 5 * v + 3 * b) % 13 != 0) for i in range(N)]
            hit = variant == Variant(QUANT, K, "top") and benchmark == QUANT
            write(cfg, variant, benchmark, [0] * N if hit else correct)
    return cfg


def test_a_spike_is_the_benchmark_plus_the_same_drawn_documents_in_every_variant(profile_config):
    model_dir = Layout(profile_config.output_root, "t").model_dir
    before = {p: p.read_text() for p in model_dir.glob("**/arc_easy.samples.jsonl")}
    assert spike_benchmark(model_dir, "arc_easy", QUANT, 0.25, seed=1) == 20  # 20 of 80: a quarter
    drawn = set()
    for path, text in before.items():
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        assert [json.dumps(r) for r in rows[:N]] == [json.dumps(json.loads(x)) for x in text.splitlines()]
        assert {r["task"] for r in rows[N:]} == {QUANT} and len(rows) == N + 20
        drawn.add(tuple(r["doc_id"] for r in rows[N:]))
        assert "files" not in json.loads(path.with_name("arc_easy.json").read_text())
    assert len(drawn) == 1  # the same documents in every variant
    spike_benchmark(model_dir, "arc_easy", QUANT, 0.25, seed=2)  # spiked again: from B's own rows, not B''s
    assert all(len(p.read_text().splitlines()) == N + 20 for p in before)
    with pytest.raises(BenchprofError, match=r"needs 540 of its documents; it has 60"):
        spike_benchmark(model_dir, "arc_easy", QUANT, 0.9, seed=1)


def test_the_rule_claims_a_strong_spike_and_not_a_null_one(profile_config):
    model_dir = Layout(profile_config.output_root, "t").model_dir
    assert claimed(load_scores(profile_config, "t", progress=False), QUANT, QUANT)  # the known answer
    assert not claimed(load_scores(profile_config, "t", progress=False), "arc_easy", QUANT)  # unspiked
    spike_benchmark(model_dir, "arc_easy", TEMPORAL, 0.5, seed=0)  # another ability's documents: the null side
    profile = load_scores(profile_config, "t", progress=False)
    assert not claimed(profile, "arc_easy", QUANT) and not claimed(profile, "arc_easy", QUANT, "conjunction")
    assert not claimed(profile, "arc_easy", QUANT, "p_correct")
    spike_benchmark(model_dir, "arc_easy", QUANT, 0.5, seed=0)
    profile = load_scores(profile_config, "t", progress=False)
    assert claimed(profile, "arc_easy", QUANT) and claimed(profile, "arc_easy", QUANT, "conjunction")
    # the spiked documents carry their own log-likelihoods in each variant: the rule on p_correct claims B' too
    assert claimed(profile, "arc_easy", QUANT, "p_correct") and not claimed(profile, "arc_easy", TEMPORAL, "p_correct")


def test_one_benchmark_scored_again_equals_the_whole_profile_scored_again(profile_config):
    """The spikes' fast path (rescore_benchmark: the spiked benchmark read again, the others' rows kept, the tests
    over the profile applied again) gives every row what load_scores gives from scratch; the run it starts from is
    left as it was."""
    model_dir = Layout(profile_config.output_root, "t").model_dir
    runs = []
    before = load_scores(profile_config, "t", progress=False, run_out=runs)
    kept = [(r.benchmark, r.region, r.ais, r.q_value) for r in before.rows]
    notes = list(before.notes)
    spike_benchmark(model_dir, "arc_easy", QUANT, 0.5, seed=0)
    fast = rescore_benchmark(runs[0], "arc_easy")
    whole = load_scores(profile_config, "t", progress=False)
    fields = ("ability", "benchmark", "k", "region", "metric", "ais", "ci_low", "ci_high", "p_value", "q_value",
              "family", "breadth", "breadth_p", "claim_p", "claim_q", "selections_agree", "n_docs")  # fmt: skip

    def key(row):
        return tuple(getattr(row, f) for f in fields)

    assert sorted(map(key, fast.rows), key=str) == sorted(map(key, whole.rows), key=str)
    assert claimed(fast, "arc_easy", QUANT) and fast.at_chance == whole.at_chance
    assert [(r.benchmark, r.region, r.ais, r.q_value) for r in runs[0].profile.rows] == kept
    assert runs[0].profile.notes == notes and sorted(fast.notes) == sorted(whole.notes)
    with pytest.raises(BenchprofError, match=r"^Quantitative_Reasoning: an ability split cannot be scored again"):
        rescore_benchmark(runs[0], QUANT)


def test_the_reach_line_names_the_smallest_share_claimed_in_most_resamples():
    rows = [
        SpikeRow("m", "b", "A", "A", 0.1, 6, 5, 2),
        SpikeRow("m", "b", "A", "A", 0.2, 12, 5, 4),
        SpikeRow("m", "b", "A", "A", 0.3, 18, 5, 5),
        SpikeRow("m", "b", "A", "C", 0.3, 18, 5, 1),
        SpikeRow("m", "c", "A", "A", 0.1, 6, 5, 3),
    ]
    assert reach_lines(rows) == [
        "b <- A (the rule): claimed from f = 0.2 (4 of 5); spiked with C instead: claimed 1 of 5",
        "c <- A (the rule): not claimed in 80% of resamples up to f = 0.1 (3 of 5)",
    ]
    assert reach_lines(rows, unspiked=frozenset({("c", "A")}))[1].startswith("c <- A (the rule): claimed unspiked; not")
    assert reach_lines(rows, "conjunction")[1] == (
        "c <- A (the conjunction form): not claimed in 80% of resamples up to f = 0.1 (0 of 5)"
    )
    on_p = [replace(r, claimed_p_correct=n) for r, n in zip(rows, [4, 5, 5, 0, 1], strict=True)]
    on_p.append(SpikeRow("m", "b", "A", PLANTED, 0.05, 3, 5, 5, claimed_p_correct=5))  # a plant moves accuracy only
    assert reach_lines(on_p, "p_correct") == [
        "b <- A (the rule on p_correct): claimed from f = 0.1 (4 of 5); spiked with C instead: claimed 0 of 5",
        "c <- A (the rule on p_correct): not claimed in 80% of resamples up to f = 0.1 (1 of 5)",
    ]


def test_the_spikes_command_claims_the_known_answer_and_not_the_null_side(profile_config, capsys):
    """`benchprof spikes` on a profile aggregate wrote: arc_easy spiked with half Quantitative documents is claimed
    to draw on Quantitative in every resample, spiked with Temporal's (the null side) never; Temporal's region does
    nothing, so arc_easy is never claimed to draw on Temporal. An AIS of 0.3 planted in an ability's top region is
    claimed to be that ability's, planted in every region never; ais.md's no-claim line quotes that reach. Before
    aggregate, one line says what to run."""
    from benchprof.cli import main
    from benchprof.core.storage import read_csv

    config = str(profile_config.path)
    args = ["spikes", config, "--benchmark", "arc_easy", "--fractions", "0.5", "--resamples", "2", "--planted", "0.3"]
    with pytest.raises(SystemExit):
        main(args)
    assert "documents.tar.xz: no complete profile; run `benchprof aggregate" in capsys.readouterr().err
    main(["aggregate", config, "--noplots"])
    main(args)
    out = capsys.readouterr().out
    rows = {
        (r["ability"], r["source"]): r for r in read_csv(profile_config.output_root / "t" / "spikes" / "spikes.csv")
    }
    assert {key: int(r["claimed"]) for key, r in rows.items()} == {
        (QUANT, QUANT): 2,
        (QUANT, TEMPORAL): 0,
        (TEMPORAL, TEMPORAL): 0,
        (TEMPORAL, QUANT): 0,
        (QUANT, PLANTED): 2,
        (TEMPORAL, PLANTED): 2,
        (QUANT, PLANTED_EVERYWHERE): 0,
        (TEMPORAL, PLANTED_EVERYWHERE): 0,
    }
    mixed = [r for r in rows.values() if r["source"] in (QUANT, TEMPORAL)]
    planted = [r for r in rows.values() if r["source"] not in (QUANT, TEMPORAL)]
    assert {(r["benchmark"], r["fraction"], r["documents"]) for r in mixed} == {("arc_easy", "0.5", str(N))}
    assert {(r["benchmark"], r["fraction"], r["documents"]) for r in planted} == {("arc_easy", "0.3", "18")}
    assert {r["claimed_p_correct"] for r in planted} == {""} and {r["claimed_p_correct"] for r in mixed} == {"2", "0"}
    assert "t: arc_easy <- Quantitative_Reasoning (the rule): claimed from f = 0.5 (2 of 2)" in out
    assert "spikes: t: 8 rows ->" in out
    # ais.md quotes the reach while the profile is the one it was measured on, and not once its documents change
    ais = profile_config.output_root / "t" / "profile" / "ais.md"
    assert "Reach" not in ais.read_text()  # written before the spikes
    main(["aggregate", config, "--noplots"])
    reach = "- arc_easy <- Quantitative_Reasoning (the rule): claimed from f = 0.5 (2 of 2); spiked with"
    assert "**Reach**" in ais.read_text() and reach in ais.read_text()
    assert (
        "- arc_easy <- Quantitative_Reasoning (the rule on p_correct): claimed from f = 0.5 (2 of 2)" in ais.read_text()
    )
    main(["status", config])
    assert "done     spikes      t: spikes.csv" in capsys.readouterr().out
    line = next(x for x in ais.read_text().splitlines() if x.startswith("- arc_easy: no claim"))
    assert line.endswith(
        "Reach (`benchprof spikes`, claimed in 80% of resamples): mixed in as a share of it, the items of "
        "Quantitative_Reasoning from 0.5, so that ability takes no more than that share of it (80% power); of "
        "Temporal_Reasoning not up to 0.5. An AIS planted in the top regions from 0.3 for Quantitative_Reasoning, "
        "Temporal_Reasoning."
    )
    on_p = next(x for x in ais.read_text().splitlines() if x.startswith("- On p_correct: no claim on arc_easy"))
    assert on_p.endswith(
        "arc_easy: Reach (`benchprof spikes`, claimed in 80% of resamples): mixed in as a share of it, the items of "
        "Quantitative_Reasoning from 0.5, so that ability takes no more than that share of it (80% power); of "
        "Temporal_Reasoning not up to 0.5."
    )
    quoted = (profile_config.output_root / "t" / "spikes" / "spikes.csv").read_bytes()
    main([*args[:5], "", "--resamples", "1", "--planted", "0.3", "--documents", "120"])  # planning: beside, unquoted
    planned = read_csv(profile_config.output_root / "t" / "spikes" / "plan-120" / "spikes.csv")
    assert {r["size"] for r in planned} == {"120"} and {r["documents"] for r in planned} == {"36"}
    assert (profile_config.output_root / "t" / "spikes" / "spikes.csv").read_bytes() == quoted
    write(profile_config, Variant(), "arc_easy", [int(i % 7 != 0) for i in range(N)])  # another original score
    main(["aggregate", config, "--noplots"])
    assert "Reach" not in ais.read_text()
    capsys.readouterr()
    main(["status", config])
    assert "stale    spikes      t: spikes.csv  (measured on another profile; ais.md does not quote it" in (
        capsys.readouterr().out
    )


def test_spikes_measured_under_a_changed_rule_are_quoted_under_that_rule_only(profile_config, capsys):
    """A config whose claim rule changed after aggregate (here aggregate.alpha): spikes apply the changed rule, so
    ais.md quotes their reach only once the profile is aggregated under it, never under the rule it was before."""
    from benchprof.cli import main

    config = str(profile_config.path)
    ais = profile_config.output_root / "t" / "profile" / "ais.md"
    main(["aggregate", config, "--noplots"])
    original = profile_config.path.read_text()
    changed = yaml.safe_load(original)
    changed["aggregate"]["alpha"] = 0.01
    profile_config.path.write_text(yaml.safe_dump(changed))
    main(["spikes", config, "--benchmark", "arc_easy", "--fractions", "0.5", "--resamples", "1", "--planted", ""])
    profile_config.path.write_text(original)  # back to the rule the profile was aggregated under
    main(["aggregate", config, "--noplots"])
    assert "Reach" not in ais.read_text()
    capsys.readouterr()
    main(["status", config])
    assert "stale    spikes      t: spikes.csv" in capsys.readouterr().out
    profile_config.path.write_text(yaml.safe_dump(changed))
    main(["aggregate", config, "--noplots"])
    assert "- arc_easy <- Quantitative_Reasoning (the rule): claimed from f = 0.5 (1 of 1)" in ais.read_text()


def test_spikes_on_a_profile_whose_k_the_config_dropped_is_one_line_naming_the_key(profile_config, capsys):
    from benchprof.cli import main

    main(["aggregate", str(profile_config.path), "--noplots"])
    changed = yaml.safe_load(profile_config.path.read_text())
    changed["settings"]["k_values"] = [0.02]
    profile_config.path.write_text(yaml.safe_dump(changed))
    with pytest.raises(SystemExit):
        main(["spikes", str(profile_config.path), "--fractions", "0.5", "--planted", ""])
    err = capsys.readouterr().err
    assert "the profile is at k = 0.01, which settings.k_values of" in err and "benchprof aggregate" in err
    assert len(err.strip().splitlines()) == 1
    assert not (profile_config.output_root / "t" / "spikes").exists()


@pytest.mark.parametrize("fractions", ["abc", "0", "0.1,1.5"])
def test_shares_that_are_not_shares_are_one_line_before_any_work(profile_config, capsys, fractions):
    from benchprof.cli import main

    with pytest.raises(SystemExit):
        main(["spikes", str(profile_config.path), "--fractions", fractions])
    assert "--fractions: " in capsys.readouterr().err
    assert not (profile_config.output_root / "t" / "spikes").exists()


def read_rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_planted_effect_makes_that_share_of_the_original_score_wrong_in_the_planted_regions_only(profile_config):
    """An AIS of 0.2 planted in two top regions: each loses 12 of the original's 60 right documents on the primary
    metric (acc untouched), the same 12 where the two were right on the same documents; every other variant keeps
    its rows, and a later plant starts from B's own rows."""
    layout = Layout(profile_config.output_root, "t")
    tops = [Variant(QUANT, K, "top"), Variant(TEMPORAL, K, "top")]
    same = [int((7 * i + 5) % 13 != 0) for i in range(N)]
    for variant in tops:  # right on the same documents
        write(profile_config, variant, "arc_easy", same)
    before = {p: read_rows(p) for p in layout.model_dir.glob("**/arc_easy.samples.jsonl")}
    assert plant_effect(layout.model_dir, "arc_easy", "acc_norm,none", 0.2, 1, tops) == 12
    lost = []
    for path, rows in before.items():
        after = read_rows(path)
        changed = [a["doc_id"] for a, b in zip(after, rows, strict=True) if a != b]
        if path.parent in {layout.eval_dir(v) for v in tops}:
            assert len(changed) == 12 and all(after[d]["acc_norm"] == 0 and rows[d]["acc_norm"] == 1 for d in changed)
            assert [a["acc"] for a in after] == [b["acc"] for b in rows]
            lost.append(set(changed))
        else:
            assert not changed
    assert lost[0] == lost[1]
    plant_effect(layout.model_dir, "arc_easy", "acc_norm,none", 0.1, 2, tops[:1])
    counts = {p: sum(r["acc_norm"] == 0 for r in read_rows(p)) for p in before}
    assert counts[layout.samples_file(tops[0], "arc_easy")] == sum(1 - c for c in same) + 6
    assert counts[layout.samples_file(tops[1], "arc_easy")] == sum(1 - c for c in same)
    with pytest.raises(BenchprofError, match=r"an AIS of 0.95 needs 57 documents right in .*; it has 55"):
        plant_effect(layout.model_dir, "arc_easy", "acc_norm,none", 0.95, 1, tops)


def test_the_rule_claims_an_effect_planted_in_the_top_region_and_not_one_planted_everywhere(profile_config):
    """Planted in Quantitative's top region, an AIS of 0.3 on arc_easy is claimed to be Quantitative's in every
    draw; planted in every region alike (what any region of the size does), or in Temporal's top region, it is
    never claimed to be Quantitative's, over 10 draws each. Each plant took 18 (0.3 of the original's 60 right)
    more documents from every region it names, and none from the others."""
    layout = Layout(profile_config.output_root, "t")
    runs = []
    load_scores(profile_config, "t", progress=False, run_out=runs)
    regions = ("top", "random", "random2")
    everywhere = [Variant(a, K, r) for a in (QUANT, TEMPORAL) for r in regions]
    own = {v: sum(r["acc_norm"] == 0 for r in read_rows(layout.samples_file(v, "arc_easy"))) for v in everywhere}
    hits = {"top": 0, "everywhere": 0, "other": 0}
    for seed in range(10):
        for name, planted in (("top", [Variant(QUANT, K, "top")]), ("everywhere", everywhere),
                              ("other", [Variant(TEMPORAL, K, "top")])):  # fmt: skip
            plant_effect(layout.model_dir, "arc_easy", "acc_norm,none", 0.3, seed, planted)
            for v in everywhere:
                wrong = sum(r["acc_norm"] == 0 for r in read_rows(layout.samples_file(v, "arc_easy")))
                assert wrong == own[v] + (18 if v in planted else 0)
            hits[name] += claimed(rescore_benchmark(runs[0], "arc_easy"), "arc_easy", QUANT)
    assert hits == {"top": 10, "everywhere": 0, "other": 0}
    with pytest.raises(BenchprofError, match=r"^arc_easy: no evaluation of it in Quantitative_Reasoning/k0.01/top2"):
        plant_effect(layout.model_dir, "arc_easy", "acc_norm,none", 0.3, 0, [Variant(QUANT, K, "top2")])


def test_a_no_claim_line_quotes_the_reach_by_ability():
    """Per benchmark, each ability at the smallest share of its own items and the smallest planted AIS claimed in 4
    of 5 (or not up to the largest tried), from the benchmark's own size only; where every ability tried is reached,
    none takes more than the largest of those shares. Under the rule on p_correct the shares only (a plant moves
    accuracy only). The Reach block's line names the planted and the everywhere rows."""
    rows = [
        SpikeRow("m", "b", "A", PLANTED, 0.05, 3, 5, 2),
        SpikeRow("m", "b", "A", PLANTED, 0.1, 6, 5, 5),
        SpikeRow("m", "b", "C", PLANTED, 0.05, 3, 5, 4),
        SpikeRow("m", "b", "D", PLANTED, 0.05, 3, 5, 0),
        SpikeRow("m", "b", "D", PLANTED, 0.1, 6, 5, 3),
        SpikeRow("m", "b", "A", PLANTED_EVERYWHERE, 0.1, 6, 5, 1),
        SpikeRow("m", "b", "A", "A", 0.05, 3, 5, 3, claimed_p_correct=4),
        SpikeRow("m", "b", "A", "A", 0.1, 6, 5, 4, claimed_p_correct=5),
        SpikeRow("m", "b", "A", "C", 0.1, 6, 5, 5, claimed_p_correct=5),  # the null side: never a reach
        SpikeRow("m", "b", "C", "C", 0.1, 6, 5, 1, claimed_p_correct=4),
        SpikeRow("m", "c", "A", "A", 0.1, 6, 5, 5),
        SpikeRow("m", "b", "D", PLANTED, 0.02, 6, 5, 5, size=2000),  # planned: never quoted as the reach
    ]
    assert reach_lines(rows)[-1] == (
        "b at 2000 documents (planned) <- D (the rule): an AIS planted in its top regions: claimed from 0.02 (5 of 5)"
    )
    assert no_claim_reach(rows) == {
        "b": "Reach (`benchprof spikes`, claimed in 80% of resamples): mixed in as a share of it, the items of A from "
        "0.1, so that ability takes no more than that share of it (80% power); of C not up to 0.1. An AIS planted in "
        "the top "
        "regions from 0.05 for C; from 0.1 for A; not up to 0.1 for D.",
        "c": "Reach (`benchprof spikes`, claimed in 80% of resamples): mixed in as a share of it, the items of A from "
        "0.1, so that ability takes no more than that share of it (80% power).",
    }
    assert "c" not in no_claim_reach(rows, "p_correct")  # not measured on p_correct: no reach, not "not up to"
    assert no_claim_reach(rows, "p_correct")["b"] == (
        "Reach (`benchprof spikes`, claimed in 80% of resamples): mixed in as a share of it, the items of A from "
        "0.05 and of C from 0.1, so each of these takes no more than the share it is reached from (80% power)."
    )
    assert reach_lines(rows)[0] == (
        "b <- A (the rule): claimed from f = 0.1 (4 of 5); spiked with C instead: claimed 5 of 5; an AIS planted in "
        "its top regions: claimed from 0.1 (5 of 5); planted in every region: claimed 1 of 5"
    )


def test_a_planned_size_draws_the_same_documents_in_every_variant_before_planting(profile_config):
    """Planning: arc_easy resampled to 150 documents (with replacement) from its 60, the same draw in every variant,
    each copy keeping its variant's own scores of the document it copies; the planted region then loses 15 (a
    tenth of the original's 150 right) beyond its copies' own losses."""
    layout = Layout(profile_config.output_root, "t")
    top = Variant(QUANT, K, "top")
    before = {p: {r["doc_id"]: r for r in read_rows(p)} for p in layout.model_dir.glob("**/arc_easy.samples.jsonl")}
    assert plant_effect(layout.model_dir, "arc_easy", "acc_norm,none", 0.1, 3, [top], size=150) == 15
    drawn = set()
    for path, own in before.items():
        rows = read_rows(path)
        assert [r["doc_id"].split("~")[1] for r in rows] == [str(j) for j in range(150)]
        drawn.add(tuple(r["doc_id"] for r in rows))
        copies = [own[int(r["doc_id"].split("~")[0])] | {"doc_id": r["doc_id"]} for r in rows]
        changed = [(c, r) for c, r in zip(copies, rows, strict=True) if c != r]
        assert all(c == r | {"acc_norm": 1.0} and r["acc_norm"] == 0 for c, r in changed)  # only right -> wrong
        assert len(changed) == (15 if path == layout.samples_file(top, "arc_easy") else 0)
    assert len(drawn) == 1 and len({d.split("~")[0] for d in next(iter(drawn))}) < 60


@pytest.mark.parametrize(("option", "value"), [("--planted", "0.1,2"), ("--documents", "-5"), ("--documents", "x")])
def test_planted_effects_and_planned_sizes_that_are_not_are_one_line_before_any_work(profile_config, capsys, option,
                                                                                     value):  # fmt: skip
    from benchprof.cli import main

    with pytest.raises(SystemExit):
        main(["spikes", str(profile_config.path), option, value])
    assert f"{option}: " in capsys.readouterr().err
    assert not (profile_config.output_root / "t" / "spikes").exists()


def test_the_lenient_bound_sees_the_known_spike_and_not_the_null_one(profile_config):
    """The lenient test (lab/spike_bound.py) on the profile folder aggregate wrote: arc_easy spiked with half
    Quantitative documents (its region zeroes them) passes in every resample; spiked with Temporal's own documents,
    whose region does nothing, in none."""
    import shutil

    from benchprof.cli import main
    from benchprof.lab.spike_bound import bound_rows

    main(["aggregate", str(profile_config.path), "--noplots"])
    folder = profile_config.path.parent / "folder"
    folder.mkdir()
    shutil.copyfile(profile_config.path, folder / "config.yml")
    shutil.copyfile(profile_config.output_root / "t" / "profile" / "documents.tar.xz", folder / "documents.tar.xz")
    rows, skipped = bound_rows(folder, [("arc_easy", QUANT), ("arc_easy", TEMPORAL)], [0.5], 4)
    assert skipped == []
    assert {(r.ability, r.metric): (r.passed, r.documents) for r in rows} == {
        (QUANT, "accuracy"): (4, N),
        (QUANT, "p_correct"): (4, N),
        (TEMPORAL, "accuracy"): (0, N),
        (TEMPORAL, "p_correct"): (0, N),
    }


def test_the_lenient_bound_tests_the_documents_spikes_mix_in(tmp_path):
    """On a committed profile, for each of several draws and on both metrics, the lenient test's verdict equals one
    computed by hand from the samples files `spike_benchmark` writes for the same draw: per document, the random
    regions' mean score minus the top regions', the benchmark's own documents centred, scipy's one-sided t test at
    0.05 (the package's mean test takes its t path here: more than EXACT_UNITS documents differ)."""
    from pathlib import Path

    import numpy as np
    from scipy.stats import ttest_1samp

    from benchprof.core.results import read_p_correct, read_samples
    from benchprof.lab.rederive import folder_config
    from benchprof.lab.spike_bound import bound_rows
    from benchprof.lab.spikes import spike_benchmark
    from benchprof.profile.documents import DOCUMENTS, unpack_documents
    from benchprof.stats.paired import EXACT_UNITS

    folder = Path(__file__).resolve().parents[1] / "docs" / "results" / "profile-qwen2.5-1.5b-mmlu"
    benchmark, ability, fraction, draws = "copa", "Commonsense_Causal", 0.1, 8
    verdicts: dict[str, list[int]] = {"accuracy": [], "p_correct": []}
    for seed in range(draws):
        for row in bound_rows(folder, [(benchmark, ability)], [fraction], 1, seed)[0]:
            verdicts[row.metric].append(row.passed)
    cfg = folder_config(folder, tmp_path)
    model_dir = tmp_path / cfg.models[0].tag
    unpack_documents(folder / DOCUMENTS, model_dir)
    evals = sorted(model_dir.glob("*/eval/k*"))
    tops = [p / benchmark for e in evals if e.parent.parent.name == ability for p in sorted(e.glob("top*"))]
    randoms = [p / benchmark for e in evals for p in sorted(e.glob("random*"))]

    def scores(stem: Path, metric: str) -> dict:
        path = stem.with_name(stem.name + ".samples.jsonl")
        return (read_p_correct if metric == "p_correct" else read_samples)(path, "acc,none")[0]

    unspiked = set(scores(tops[0], "accuracy"))  # the benchmark's own documents
    by_hand: dict[str, list[int]] = {"accuracy": [], "p_correct": []}
    for seed in range(draws):
        spike_benchmark(model_dir, benchmark, ability, fraction, seed)
        for metric, found in by_hand.items():
            top, rand = [scores(s, metric) for s in tops], [scores(s, metric) for s in randoms]
            d = {key: np.mean([r[key] for r in rand]) - np.mean([t[key] for t in top]) for key in top[0]}
            own = [v for key, v in d.items() if key in unspiked]
            assert len(own) == 100 and len(d) == 111
            mixed = [v - np.mean(own) for v in own] + [v for key, v in d.items() if key not in unspiked]
            assert np.count_nonzero(mixed) > EXACT_UNITS
            found.append(int(ttest_1samp(mixed, 0.0, alternative="greater").pvalue < 0.05))
    assert verdicts == by_hand and len(by_hand["accuracy"]) == draws
    assert 0 < sum(by_hand["accuracy"]) < draws  # a draw-dependent verdict: the comparison can tell a wrong draw


def test_the_lenient_bound_says_in_one_line_what_is_wrong_with_its_spikes_csv(tmp_path):
    from pathlib import Path

    from benchprof.lab.spike_bound import main

    folder = Path(__file__).resolve().parents[1] / "docs" / "results" / "profile-qwen2.5-1.5b-mmlu"
    with pytest.raises(BenchprofError, match=r"nope\.csv: no such spikes\.csv$"):
        main(str(folder), str(tmp_path / "nope.csv"))
    (tmp_path / "bad.csv").write_text("model,benchmark\nm,b\n")
    with pytest.raises(BenchprofError, match=r"bad\.csv: not a spikes\.csv \("):
        main(str(folder), str(tmp_path / "bad.csv"))
