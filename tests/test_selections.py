"""Three attribution samples per ability and placebo regions (docs/claims.md): each selection's region equals a
brute-force ranking of an independent attribution over its own disjoint train items, each placebo region one over
the same items with their answers drawn at random; selection 1 is the region a single selection gives; the
profile's top-placebo rows and selections_agree equal a computation by hand from the result files; bad settings
are one line."""

import csv
import json
import math
import os
import zlib
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_neuron_extract import demo_model, neurons_of
from test_neuron_extract import project as neuron_project

from benchprof import BenchprofError
from benchprof.abilities import generate
from benchprof.core.config import ConfigError
from benchprof.core.layout import Layout, Variant
from benchprof.core.loader import load_config, parse_config
from benchprof.core.regions import read_region
from benchprof.profile.rows import CONTROL, DAMAGE, OWN
from benchprof.stages.extract import extract, neuron_count
from benchprof.stages.neurons import model_neurons, neuron_attribution, neuron_scores
from benchprof.stages.statistic_files import placebo_items
from benchprof.stages.status import plan_status

ABILITIES = ("Long_Term_Knowledge", "Commonsense_Causal", "Semantic_Relationship")
K = 0.004
PER_SAMPLE = 4


def project(tmp_path: Path, selections: int = 3, regions=("top", "random", "placebo"), **evals) -> Path:
    """test_neuron_extract's project: 12 train items per ability, 8 test items, samples of PER_SAMPLE items."""
    return neuron_project(
        tmp_path,
        "act_grad_contrast_abs",
        test_items=8,
        max_samples=PER_SAMPLE,
        regions=regions,
        evals={"device": "cpu", **evals},
        selections=selections,
    )


def test_each_selection_and_placebo_region_ranks_its_own_items(tmp_path, capsys):
    cfg = load_config(project(tmp_path / "three"))
    extract(cfg)
    one = load_config(project(tmp_path / "one", selections=1, regions=("top", "random")))
    extract(one)
    model, tok = demo_model()
    shape = model_neurons(model)
    count = neuron_count(K, shape.total_params, shape.hidden)
    eligible = np.arange(shape.count) >= shape.intermediate  # front_removal: 1 layer
    train = {a: generate(a, 12, 8, seed=2)[0] for a in ABILITIES}
    # the placebo labels as PLACEBO_LABELS declares them, drawn here apart from placebo_items
    placebo = {}
    for a in ABILITIES:
        rng = np.random.default_rng(zlib.crc32(a.encode()))
        placebo[a] = [{**r, "label": int(rng.integers(len(r["options"])))} for r in train[a]]
    layout = Layout(tmp_path / "three" / "out", "demo")
    got: dict[tuple[str, str], set[int]] = {}
    for kind, items in (("top", train), ("placebo", placebo)):
        for s in (1, 2, 3):
            rows = slice((s - 1) * PER_SAMPLE, s * PER_SAMPLE)  # disjoint train items per selection
            attribution = {a: neuron_attribution(model, tok, items[a][rows]) for a in ABILITIES}
            for ability in ABILITIES:
                scores = neuron_scores(attribution, ability, "act_grad_contrast_abs")
                order = [int(i) for i in np.argsort(-scores, kind="stable") if eligible[i]]
                region = kind if s == 1 else f"{kind}{s}"
                indices, _ = read_region(layout.mask_file(ability, K, region))
                got[(ability, region)] = neurons_of(indices, shape.hidden, shape.intermediate)
                assert len(got[(ability, region)] & set(order[:count])) >= count - 1, (ability, region)
    for ability in ABILITIES:
        # selection 1 is the region one selection gives: a config that adds samples keeps its top region
        alone, _ = read_region(Layout(tmp_path / "one" / "out", "demo").mask_file(ability, K, "top"))
        assert neurons_of(alone, shape.hidden, shape.intermediate) == got[(ability, "top")]
        assert got[(ability, "top")] != got[(ability, "top2")] and got[(ability, "top")] != got[(ability, "placebo")]
    # overlap.csv's rows within one ability: each top region against its placebo region and the other selections
    from benchprof.stages.overlap import model_overlap, overlap_summary

    _, rows, _ = model_overlap(cfg, "demo", plots=False, strict=True)
    within = {(r["ability_a"], r["region"]): r for r in rows if "~" in r["region"]}
    pairs = [("top", "placebo"), ("top2", "placebo2"), ("top3", "placebo3"), ("top", "top2"), ("top", "top3")]
    assert set(within) == {(a, f"{x}~{y}") for a in ABILITIES for x, y in pairs}
    for ability in ABILITIES:
        for x, y in pairs:
            row = within[(ability, f"{x}~{y}")]
            assert row["ability_b"] == ability
            assert row["shared"] == len(got[(ability, x)] & got[(ability, y)]) * 3 * shape.hidden
    assert "within each ability, mean shared fraction: top~placebo" in overlap_summary(rows)
    capsys.readouterr()
    extract(cfg)
    assert "0 (ability, k) region set(s), 3 up to date" in capsys.readouterr().out
    states = {(i.stage, i.model + ": " + i.what): i.state for i in plan_status(cfg)}
    assert all(states[("attribution placebo", f"demo: {a}")] == "done" for a in ABILITIES)
    assert all(states[("masks", f"demo: {a} k{K}")] == "done" for a in ABILITIES)
    # a placebo file edited by hand under its current manifest: it is to redo, and it is written again as it was,
    # so the regions chosen from it are judged by what its manifest recorded and stay done (status.upstream_of)
    path = layout.attribution_file("Commonsense_Causal", placebo=True)
    path.write_bytes(path.read_bytes()[:-8] + b"\0" * 8)
    items = {(i.stage, i.model + ": " + i.what): i for i in plan_status(cfg)}
    damaged = items[("attribution placebo", "demo: Commonsense_Causal")]
    assert damaged.state == "stale" and damaged.why.startswith("damaged ")
    assert items[("attribution", "demo: Commonsense_Causal")].state == "done"
    assert all(items[("masks", f"demo: {a} k{K}")].state == "done" for a in ABILITIES)


def test_placebo_labels_carry_no_skill():
    records = generate("Commonsense_Causal", 3000, 1, seed=5)[0]
    labels = [r["label"] for r in placebo_items(records, "Commonsense_Causal")]
    assert labels == [r["label"] for r in placebo_items(records, "Commonsense_Causal")]  # the same on every run
    assert [r["options"] for r in placebo_items(records, "X")] == [r["options"] for r in records]
    options = len(records[0]["options"])
    assert all(len(r["options"]) == options for r in records)
    # the label agrees with the answer as often as chance (binomial, 4 sd), and every position is as likely
    agree = sum(p == r["label"] for p, r in zip(labels, records, strict=True))
    expected, sd = len(records) / options, math.sqrt(len(records) * (1 / options) * (1 - 1 / options))
    assert abs(agree - expected) < 4 * sd
    from scipy.stats import chisquare

    assert chisquare(np.bincount(labels, minlength=options)).pvalue > 1e-3


@pytest.mark.parametrize(
    "extract_settings, finetune, match",
    [
        ({"selections": 3}, {"max_samples": 10}, r"^extract.selections needs a neuron score"),
        ({"regions": ["top", "random", "placebo"]}, {}, r"^extract.regions: placebo needs a neuron score"),
        ({"selections": 3, "score": "act_grad_contrast_abs"}, {}, r"^extract.selections: 3 samples .*max_samples"),
        ({"selections": 0, "score": "act_grad_contrast_abs"}, {}, r"^extract.selections: 0 must be at least 1"),
        (
            {"selections": 3, "score": "act_grad_contrast_abs"},
            {"max_samples": 800},
            r"^data.train_size: 2000 train items cannot hold .* = 2400",
        ),
    ],
)
def test_settings_that_cannot_give_disjoint_samples_are_one_line(extract_settings, finetune, match):
    raw = {"models": [{"name": "m"}], "datasets": [{"name": a} for a in ABILITIES], "extract": extract_settings}
    raw["finetune"] = finetune
    with pytest.raises(ConfigError, match=match):
        parse_config(raw)


def test_a_train_split_too_short_for_the_samples_is_refused_naming_the_ability(tmp_path):
    path = project(tmp_path)
    raw = yaml.safe_load(path.read_text())
    raw["finetune"]["max_samples"] = 5  # 3 x 5 > the 12 train items each
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(BenchprofError, match=r"^Long_Term_Knowledge: 12 train items cannot hold .* = 15"):
        extract(load_config(path))


def test_top_placebo_and_selections_agree_equal_a_hand_computation(tmp_path):
    from benchprof.stages.run import run

    config = project(tmp_path, limit=8)
    cfg = load_config(config)
    run(cfg)
    layout = Layout(tmp_path / "out", "demo")
    with (tmp_path / "out" / "demo" / "profile" / "ais.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))

    def score(variant: Variant, benchmark: str) -> float:
        result = json.loads(layout.eval_file(variant, benchmark).read_text())
        return float(result["results"][result["primary_task"]]["acc_norm,none"])

    checked = claims = figures = 0
    pairs = {}
    for benchmark in ABILITIES:
        s = score(Variant(), benchmark)
        placebos = [
            (s - score(Variant(a, K, r), benchmark)) / s for a in ABILITIES for r in ("placebo", "placebo2", "placebo3")
        ]
        for ability in ABILITIES:
            cell = {
                r["region"]: r
                for r in rows
                if r["benchmark"] == benchmark and r["ability"] == ability and r["metric"] == "acc_norm,none"
            }
            for top in ("top", "top2", "top3"):
                own = (s - score(Variant(ability, K, top), benchmark)) / s
                assert float(cell[f"{top}-placebo"]["ais"]) == pytest.approx(own - np.mean(placebos), abs=1e-12)
                assert int(cell[f"{top}-placebo"]["control_draws"]) == 9
                families = {  # the benchmarks are the ability splits: the own family
                    f"{top}-placebo": OWN,
                    f"{top}-random": OWN,
                    top: DAMAGE,
                    top.replace("top", "placebo"): CONTROL,
                }
                for name, family in families.items():  # untested at chance or without a p-value
                    tested = cell[name]["at_chance"] != "true" and cell[name]["p_value"] != ""
                    assert cell[name]["family"] == (family if tested else ""), name
                    claims += tested and family == OWN
                checked += 1

            measured = any(r["breadth_p"] != "" for r in rows)  # breadth in the profile: a row without it fails
            p_selections = []
            for top in ("top", "top2", "top3"):
                # one-sided: half the two-sided p where the row is above its control
                one_sided = [
                    1.0 if r["p_value"] == "" else float(r["p_value"]) / 2 if float(r["ais"]) > 0 else
                    1 - float(r["p_value"]) / 2
                    for r in (cell[f"{top}-random"], cell[f"{top}-placebo"])
                ]  # fmt: skip
                beyond = cell[f"{top}-random"]
                broad = not measured or (
                    beyond["breadth_p"] != ""
                    and float(beyond["breadth_residual"]) > 0
                    and float(beyond["breadth_p"]) < 0.05
                )
                passes = cell[top]["below_chance"] != "true" and broad
                p_selections.append(max(one_sided) if passes else 1.0)
            if cell["top-random"]["family"]:
                pairs[(benchmark, ability)] = (min(1.0, 2 * sorted(p_selections)[1]), p_selections)
            assert int(cell["top-random"]["selections"]) == 3
            # the claim's figure: the mean over the three selections of top − random, inside its interval
            mean_top = np.mean([(s - score(Variant(ability, K, t), benchmark)) / s for t in ("top", "top2", "top3")])
            randoms = [(s - score(Variant(a, K, r), benchmark)) / s for a in ABILITIES for r in ("random", "random2")]
            row = cell["top-random"]
            if row["selections_ais"] != "":
                assert float(row["selections_ais"]) == pytest.approx(mean_top - np.mean(randoms), abs=1e-12)
                figures += 1
    assert checked == 27 and claims >= 12 and figures >= 3, figures
    # one p per (benchmark, ability) pair: 2 x the second smallest selection's p; Holm over the pairs, by hand
    order = sorted(pairs, key=lambda key: pairs[key][0])
    held, n = 0.0, len(order)
    for step, key in enumerate(order):
        held = max(held, min(1.0, (n - step) * pairs[key][0]))
        row = next(r for r in rows if (r["benchmark"], r["ability"], r["region"]) == (*key, "top-random")
                   and r["metric"] == "acc_norm,none")  # fmt: skip
        assert float(row["claim_p"]) == pytest.approx(pairs[key][0], rel=1e-12)
        assert float(row["claim_q"]) == pytest.approx(held, rel=1e-12)
        factor = held / pairs[key][0] if pairs[key][0] > 0 else n  # Holm's factor, monotone steps included
        assert int(row["selections_agree"]) == sum(p < 0.05 / (2 * factor) for p in pairs[key][1])
        assert (int(row["selections_agree"]) >= 2) == (held < 0.05)  # a majority passes exactly when claimed
    # a selection without its per-document results: no figure over the selections there (not a mean over two)
    figured = next(
        r for r in rows if r["region"] == "top-random" and r["selections_ais"] != "" and r["metric"] == "acc_norm,none"
    )
    variant = Variant(figured["ability"], K, "top3")
    layout.samples_file(variant, figured["benchmark"]).unlink()
    from benchprof.stages.aggregate import aggregate

    aggregate(cfg, plots=False)
    with (tmp_path / "out" / "demo" / "profile" / "ais.csv").open(encoding="utf-8") as handle:
        again = {(r["ability"], r["benchmark"], r["region"], r["metric"]): r for r in csv.DictReader(handle)}
    key = (figured["ability"], figured["benchmark"], "top-random", "acc_norm,none")
    assert again[key]["selections_ais"] == "" and again[key]["selections_low"] == ""
    # breadth: a region's mean top − random AIS on the ability splits that are neither its own nor the benchmark, on
    # their p_correct (every split here has it)
    key = {(r["ability"], r["benchmark"], r["region"]): r for r in rows if r["metric"] == "acc_norm,none"}
    p_key = {(r["ability"], r["benchmark"], r["region"]): r for r in rows if r["metric"] == "p_correct"}
    for ability in ABILITIES:
        for benchmark in ABILITIES:
            row = key[(ability, benchmark, "top2-random")]
            elsewhere = [b for b in ABILITIES if b not in (ability, benchmark)]
            others = [float(p_key[(ability, b, "top2-random")]["ais"]) for b in elsewhere]
            if row["at_chance"] != "true":
                checked += 1
                assert float(row["breadth"]) == pytest.approx(np.mean(others), abs=1e-12)
    assert checked > 27


def test_a_committed_profile_folder_re_derives_its_ais_csv_from_its_documents_alone(tmp_path, capsys):
    """The profile folder copied elsewhere with its config, every output, mask and model file gone: ais.csv is
    computed again from documents.tar.xz and equals the one aggregate wrote; a changed document shows."""
    import shutil
    import tarfile

    from benchprof.lab.rederive import main
    from benchprof.profile.documents import DOCUMENTS
    from benchprof.stages.run import run

    config = project(tmp_path / "run", selections=1, regions=("top", "random"), limit=8)
    run(load_config(config))
    # the same evaluations give the same archive bytes, whatever the files' times
    written = tmp_path / "run" / "out" / "demo" / "profile" / DOCUMENTS
    first = written.read_bytes()
    for path in (tmp_path / "run" / "out" / "demo").rglob("*.samples.jsonl"):
        os.utime(path, (1e9, 1e9))
    from benchprof.stages.aggregate import aggregate

    written.unlink()
    aggregate(load_config(config), plots=False)
    assert written.read_bytes() == first
    committed = tmp_path / "committed"
    shutil.copytree(tmp_path / "run" / "out" / "demo" / "profile", committed)
    shutil.copy(config, committed / "config.yml")
    shutil.rmtree(tmp_path / "run")
    with tarfile.open(committed / DOCUMENTS) as archive:
        names = archive.getnames()
    assert len(names) == 2 * 3 * (1 + 3 * 3)  # result and samples file: 3 benchmarks, original + 3 x 3 variants
    capsys.readouterr()
    main(str(committed))
    assert "identical" in capsys.readouterr().out
    main(str(committed), claims=True)  # the re-analysis form: the Claims as this benchprof states them
    printed = capsys.readouterr().out.splitlines()
    ais_md = (committed / "ais.md").read_text().splitlines()
    assert printed[0] == f"{committed}:" and len(printed) > 2 and all(line in ais_md for line in printed[1:])
    # one document's score changed in the archive: the re-derived table differs, said in one line
    member = next(n for n in names if n.endswith("top/Commonsense_Causal.samples.jsonl"))
    with tarfile.open(committed / DOCUMENTS) as archive:
        lines = archive.extractfile(member).read().decode().splitlines()
    first = json.loads(lines[0])
    first["acc_norm"] = 1.0 - first["acc_norm"]
    lines[0] = json.dumps(first)
    rebuilt = tmp_path / "rebuilt"
    with tarfile.open(committed / DOCUMENTS) as archive:
        archive.extractall(rebuilt, filter="data")
    (rebuilt / member).write_text("\n".join(lines) + "\n")
    with tarfile.open(committed / DOCUMENTS, "w:xz") as archive:
        for name in names:
            archive.add(rebuilt / name, arcname=name)
    with pytest.raises(BenchprofError, match="ais.csv not re-derived identically"):
        main(str(committed))


def test_placebo_stars_equal_a_predictive_t_and_holm_by_hand():
    """Each placebo row on a real benchmark against the random draws at its k: t = (a − m) / (s √(1 + 1/D)) on D − 1
    degrees of freedom, Holm over all of them; an ability split's rows and a benchmark at chance are left out."""
    from scipy import stats

    from benchprof.profile.controls import placebo_stars
    from benchprof.profile.rows import AisRow, Profile

    randoms = {"arc_like": [0.01, 0.03, -0.02, 0.02], "piqa_like": [0.0, 0.01, 0.02, -0.01]}
    placebos = {"arc_like": [0.30, 0.02, 0.05], "piqa_like": [0.015, -0.2, 0.04]}
    rows = []
    for benchmark in (*randoms, "Commonsense_Causal", "coin"):
        for i, ais in enumerate(randoms.get(benchmark, [0.0, 0.01, 0.02])):
            rows.append(AisRow("m", f"A{i}", benchmark, K, "random", "acc,none", 0.6, 0.5, ais))
        for i, ais in enumerate(placebos.get(benchmark, [0.9, 0.9])):
            rows.append(AisRow("m", f"A{i}", benchmark, K, "placebo", "acc,none", 0.6, 0.5, ais))
    benchmarks = [*randoms, "Commonsense_Causal", "coin"]
    profile = Profile("m", "m", ["A0"], benchmarks, [K], ["top", "random", "placebo"], K, 0.05, 0, rows=rows)
    profile.metrics = {b: "acc,none" for b in benchmarks}
    profile.chance_p = {"arc_like": 1e-9, "piqa_like": 1e-9, "Commonsense_Causal": 1e-9, "coin": 0.5}
    p_values, signs = [], []
    for benchmark, pool in randoms.items():
        m, s, d = np.mean(pool), np.std(pool, ddof=1), len(pool)
        for a in placebos[benchmark]:
            t = (a - m) / (s * math.sqrt(1 + 1 / d))
            p_values.append(2 * stats.t.sf(abs(t), d - 1))
            signs.append(a > m)
    order = np.argsort(p_values)
    holm, running = np.empty(len(p_values)), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        holm[i] = running
    expected = sum(q < 0.05 and up for q, up in zip(holm, signs, strict=True))
    assert placebo_stars(profile) == (expected, 6)
    assert expected == 1  # the arc_like placebo at 0.30 alone: piqa_like's −0.2 is far, but below


def test_a_selection_whose_rows_are_missing_fails_the_rule():
    """selections counts the configured selections, not the rows loaded: a selection not yet evaluated (or whose
    placebo control is missing) counts as failing, so an aggregate taken part-way through a run cannot claim on one
    selection as if it were all of them."""
    from benchprof.profile.claim_tests import apply_claim_rule
    from benchprof.profile.rows import ADJUSTED, PRIMARY, AisRow, Profile

    def row(region, ais, **fields):
        return AisRow("m", "A", "arc_like", K, region, "acc,none", 0.6, None if "-" in region else 0.5, ais, **fields)

    tested = {"family": PRIMARY, "p_value": 0.001}
    rows = [row("top", 0.3), row(ADJUSTED, 0.2, **tested), row("top2", 0.3)]
    rows += [row("top2-random", 0.2, **tested), row("top-placebo", 0.1, **tested)]
    regions = ["top", "top2", "top3", "random"]
    profile = Profile("m", "m", ["A"], ["arc_like"], [K], regions, K, 0.05, 0, rows=rows)
    apply_claim_rule(profile)
    assert (rows[1].selections, rows[1].selections_agree) == (3, 2)  # top3 not evaluated: it fails
    assert rows[1].claim_p == pytest.approx(
        2 * 0.0005
    )  # (S - m + 1) x the 2nd smallest one-sided p of 0.0005, 0.0005, 1
    profile.regions = [*regions, "placebo"]  # with placebo regions, top2 lacks its top-placebo row: it fails too
    apply_claim_rule(profile)
    assert (rows[1].selections, rows[1].selections_agree, rows[1].claim_p) == (3, 1, 1.0)


def test_one_selection_reads_every_row_of_every_ability(tmp_path):
    """With one selection each ability's statistic is read whole, whatever its length (a user's abilities may have
    train splits of different sizes and no finetune.max_samples), as before selections existed."""
    from benchprof.stages.statistic_files import selection_rows

    cfg = load_config(project(tmp_path, selections=1, regions=("top", "random")))
    assert selection_rows(cfg, 1, 10) == slice(None)
