"""Tables out: the CSV writer (ais.csv, overlap.csv, layers.csv, benchmarks.csv, similarity.csv), ais.json, ais.md
and the terminal table of one model (several models: compare_report.py; the text of a cell: formatting.py).

Cells: NaN and None are written empty in CSV and null in JSON; in Markdown `–` is a cell with no
evaluation and `n/a` one whose original score is 0 (AIS undefined); `*` marks a row whose adjusted p-value is
below aggregate.alpha within its family (Holm over the claim and the own families, Benjamini-Hochberg over the
others).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from benchprof.core.config import NEURON_SCORES
from benchprof.core.layout import Layout, format_k
from benchprof.core.storage import write_csv, write_json, write_text
from benchprof.profile.claims import claims_markdown
from benchprof.profile.formatting import (
    MISSING_CELL,
    UNDEFINED_CELL,
    counted,
    fmt_ais,
    fmt_interval,
    fmt_names,
    md_table,
)
from benchprof.profile.rows import (
    ADJUSTED,
    MEAN,
    P_CORRECT,
    SAME_MIXTURE,
    SPECIFICITY,
    AisRow,
    Breadth,
    Profile,
    Similarity,
    ability_benchmarks,
)

CSV_COLUMNS = tuple(f.name for f in fields(AisRow))  # ais.csv: one column per AisRow field, in order
BREADTH_COLUMNS = tuple(f.name for f in fields(Breadth))  # benchmarks.csv; lists of abilities joined by ";"
SIMILARITY_COLUMNS = tuple(f.name for f in fields(Similarity) if f.name not in ("model_b", "paired"))
READING = "## How to read the tables"  # the heading after ais.md's Claims


def _no_nan(record: dict[str, Any]) -> dict[str, Any]:
    return {key: None if isinstance(value, float) and math.isnan(value) else value for key, value in record.items()}


def profile_json(profile: Profile) -> dict[str, Any]:
    """ais.json: the Profile with NaN written as null."""
    out = asdict(profile)
    for key in ("rows", "breadth", "similarity", "k_steps", "null_calibration"):
        out[key] = [_no_nan(record) for record in out[key]]
    out["report_k"] = profile.report_k
    return out


def _joined(record: dict[str, Any]) -> dict[str, Any]:
    """Lists of names as one CSV cell, joined by ";"."""
    return {key: ";".join(value) if isinstance(value, list) else value for key, value in record.items()}


def write_analysis_tables(profile: Profile, layout: Layout) -> list[Path]:
    """benchmarks.csv (each benchmark's breadth) and similarity.csv (every benchmark pair) of one model."""
    write_csv(layout.benchmarks_csv, BREADTH_COLUMNS, (_joined(asdict(line)) for line in profile.breadth))
    write_csv(layout.similarity_csv, SIMILARITY_COLUMNS, (asdict(line) for line in profile.similarity))
    return [layout.benchmarks_csv, layout.similarity_csv]


def write_tables(profile: Profile, layout: Layout) -> list[Path]:
    """ais.csv, ais.json and ais.md of one model (atomic writes)."""
    write_csv(layout.ais_csv, CSV_COLUMNS, (asdict(row) for row in profile.rows))
    write_json(layout.ais_json, profile_json(profile))
    write_text(layout.ais_md, render_markdown(profile))
    return [layout.ais_csv, layout.ais_json, layout.ais_md]


def ais_table(profile: Profile, k: float | None = None, region: str = "top", p_correct: bool = False) -> str:
    """Markdown table abilities x headline benchmarks (not those at chance) of AIS at k ('*': q < alpha),
    on each benchmark's primary metric or, with `p_correct`, on p_correct."""
    return md_table(*ais_cells(profile, profile.report_k if k is None else k, region, p_correct))


def ais_cells(profile: Profile, k: float, region: str, p_correct: bool = False) -> tuple[list[str], list[list[str]]]:
    """The header and rows of ais_table."""
    benchmarks = profile.headline_benchmarks
    header = ["ability"] + benchmarks
    return header, [
        [a] + [fmt_ais(profile.row(a, b, k, region, p_correct)) for b in benchmarks] for a in profile.abilities
    ]


def known_answer_markdown(profile: Profile) -> list[str]:
    """The small pre-registered family: each profiled ability's top region on its own split, at each k
    (the region should hurt its own ability). One-sided (a region that helps never passes), Holm's step-down
    correction over just these rows; a split the original model solves at chance tests nothing and is left out."""
    from benchprof.stats.multitest import holm
    from benchprof.stats.paired import one_sided_p

    known = [
        (ability, k, row)
        for k in profile.k_values
        for ability in profile.abilities
        if (row := profile.row(ability, ability, k, "top")) is not None
        and not math.isnan(row.p_value)
        and not row.at_chance
    ]
    if not known:
        return []
    one_sided = [one_sided_p(row.p_value, row.ais) for _, _, row in known]
    adjusted = holm(one_sided)
    table = [
        [a, format_k(k), f"{row.ais:+.3f}", f"{p1:.3g}", f"{q:.3g}", "yes" if q < profile.alpha else "no"]
        for (a, k, row), p1, q in zip(known, one_sided, adjusted)
    ]
    at_chance = sorted({a for a in profile.abilities if a in profile.at_chance})
    return [
        "",
        f"Known answer: each ability's top region on its own split ({len(known)} rows, one-sided: does it hurt; "
        "Holm's correction over these alone, a family fixed before looking"
        + (f"; left out, at chance: {', '.join(at_chance)}" if at_chance else "")
        + "):",
        "",
        md_table(["ability", "k", "AIS", "one-sided p", "Holm p", f"hurts its own split at {profile.alpha:g}"], table),
    ]


def null_calibration_markdown(profile: Profile) -> list[str]:
    """The null calibration of the top-random test: each random draw tested, as a top region is, against
    the pool of the other draws at its k (the draws are exchangeable, so the share flagged estimates the
    test's false-positive rate; it should be near alpha or below)."""
    entries = profile.null_calibration
    if not entries:
        return []
    tested = sum(e.draws for e in entries)
    flagged = sum(e.flagged for e in entries)
    return [
        "",
        "Null calibration of the top-random test: each random draw at k tested, as if it were a top region, "
        f"against the distribution of the other draws (the predictive t test, raw p < {profile.alpha:g}). Random "
        f"draws do not differ in kind, so the share flagged is the test's false-positive rate on this pool: "
        f"{flagged} of {tested} ({flagged / tested:.1%}).",
        "",
        md_table(
            ["benchmark", "k", "random draws", "flagged", "share"],
            [[e.benchmark, format_k(e.k), str(e.draws), str(e.flagged), f"{e.share:.1%}"] for e in entries],
        ),
    ]


def statistics_markdown(profile: Profile) -> list[str]:
    """ais.md's statistics section: what a star means, the benchmarks at chance, and the items needed."""
    from benchprof.stats.power import items_needed

    parts = [
        "",
        "## Statistics",
        "",
        f"`*` marks a row whose adjusted p-value (column q_value) is below aggregate.alpha = {profile.alpha:g}, "
        "within its family, declared before any result (column `family`). **claim** "
        f"({profile.family_size} rows: each ability's top-random and top-placebo rows per real benchmark, k and "
        "selection): does the ability's region do more than random (placebo) regions of its size, tested against "
        "the draws at that k (predictive t); Holm, so the chance of any false claim star on the real benchmarks' "
        f"primary metric is at most {profile.alpha:g}. **own** ({profile.family_size_own} rows: the same on the "
        "ability splits, and each ability's top-random specificity): does a region do its own ability; Holm apart. "
        f"**damage** ({profile.family_size_damage} rows: top against the original): does "
        "zeroing it hurt at all; on a real LLM nearly every region of the paper's size does, so these rows say "
        "little about an ability; Benjamini-Hochberg. The other tested rows "
        f"({profile.family_size_secondary}: p_correct, other regions) are a secondary family (BH); the "
        f"{profile.family_size_p} claim rows on p_correct are claim_p_correct (Holm apart: the Claims lead). Random "
        "regions and the top region's specificity against 0 are controls: tested, never starred (a random region "
        "belongs to no ability; a region that hurts every split a little differs from 0 on one split by chance). "
        "p-values: exact McNemar on the documents that flipped (0/1 metrics; exact clustered sign-flip where "
        "documents share a fact), the sign-flip or t test of the mean difference (continuous metrics), the "
        "predictive comparison with the random draws (claim rows). ais.csv keeps the raw 95% interval (ci_low, "
        "ci_high), the p- and adjusted p-values, the flips, the chance level, AIS above chance and the minimum "
        f"detectable AIS (mde: 80% power at alpha / {profile.family_size_damage}).",
    ]
    at_chance = profile.at_chance
    parts += [
        "",
        "Chance levels (multiple choice: the mean of 1/#options; a one-sided test of the original score against it):",
        "",
    ]
    parts.append(
        md_table(
            ["benchmark", "original", "chance", "p (above chance)", "headline"],
            [
                [
                    b,
                    f"{profile.original_scores[b]:.4f}",
                    f"{profile.chance.get(b, float('nan')):.4f}",
                    f"{profile.chance_p[b]:.3g}" if b in profile.chance_p else MISSING_CELL,
                    "no: at chance" if b in at_chance else "yes",
                ]
                for b in profile.benchmarks
                if b in profile.original_scores
            ],
        )
    )
    if at_chance:
        parts += [
            "",
            f"Left out of the headline tables and plots (the model is not above chance there, so "
            f"their AIS measures noise): {', '.join(at_chance)}. Their rows stay in ais.csv.",
        ]
    parts += known_answer_markdown(profile)
    parts += null_calibration_markdown(profile)
    level = profile.alpha / max(1, profile.family_size_damage)
    rows = []
    for b, share in profile.discordance.items():
        s = profile.original_scores[b]
        if s > 0:
            needed = [str(items_needed(t, max(share, t * s), s, level)) for t in (0.05, 0.10)]
            rows.append([b, f"{share:.3f}", *needed])
    if rows:
        parts += [
            "",
            f"Items needed to detect AIS 0.05 and 0.10 at 80% power and alpha / {profile.family_size_damage} "
            f"(top regions at k = {format_k(profile.report_k)}; discordance: the median share of flipped "
            "items), for evals.limit and data.test_size:",
            "",
        ]
        parts.append(md_table(["benchmark", "discordance", "n for AIS 0.05", "n for AIS 0.10"], rows))
    return parts


def scored_in(dtype: str) -> str:
    """The dtype an ais.md says the evaluations were scored in ("auto": the checkpoint's own)."""
    return "the checkpoint's own dtype (`auto`)" if dtype == "auto" else f"`{dtype}`"


def reach_markdown(profile: Profile) -> list[str]:
    """The rule's reach under the claims, where a spikes.csv measured on this profile is current (profile.reach)."""
    if not profile.reach:
        return []
    return [
        "",
        "**Reach** (`benchprof spikes`, its spikes.csv): each benchmark B spiked with a share f of ability A's test "
        "documents, the rule applied unchanged; the smallest f claimed in 80% of resamples, and how often A is "
        "claimed when the next ability's documents are mixed in instead; then the smallest AIS planted in A's top "
        "regions claimed in 80%, and how often the same AIS planted in every region alike is. A null side's claim is "
        "false only where B neither is claimed unspiked nor draws on A (regions that lose the same documents make a "
        "difference already there easier to see):",
        "",
        *[f"- {line}" for line in profile.reach],
    ]


def render_markdown(profile: Profile) -> str:
    """ais.md: the claims in words (claims.py), headline tables at the report k, the k sweep per benchmark, region
    specificity, what is missing, and the notes, each said once."""
    k = format_k(profile.report_k)
    regions = profile.regions_with_adjusted
    parts = [
        f"# Benchmark profile: {profile.name} (`{profile.model}`)",
        "",
        *claims_markdown(profile),
        *reach_markdown(profile),
        "",
        READING,
        "",
        "AIS = (s_original - s_ablated) / s_original on each benchmark's primary metric, when the "
        "ability's region (a fraction k of all parameters) is zeroed. Positive: removing the region "
        f"hurt the benchmark. `*` on a top row: zeroing it changes the score (q < {profile.alpha:g}, the damage "
        "family; the tests are two-sided: a positive starred AIS hurts, a negative one helps); on a top-random row: "
        "it does more (positive) or less (negative) than random regions of its size (Holm over the claim family, or "
        "the own family on an ability split; see "
        f"Statistics); intervals: 95% paired bootstrap ({profile.bootstrap} resamples over documents). "
        f"`{UNDEFINED_CELL}`: the original score is 0. "
        f"`{MISSING_CELL}`: no evaluation (see Missing evaluations). "
        + (f"Evaluations scored in {scored_in(profile.dtype)}. " if profile.dtype else "")
        + "Regions ranked by extract.score = "
        f"`{profile.score}`"
        + (
            " (whole MLP neurons, docs/research/frontier.md)."
            if profile.score in NEURON_SCORES
            else (f" on importance with finetune.loss_on = `{profile.loss_on}`" if profile.loss_on else "")
            + " (docs/specificity.md)."
        ),
        "",
        "## Primary metrics",
        "",
        md_table(
            ["benchmark", "metric", "original score"],
            [
                [
                    b,
                    profile.metrics.get(b, MISSING_CELL),
                    f"{profile.original_scores[b]:.4f}" if b in profile.original_scores else MISSING_CELL,
                ]
                for b in profile.benchmarks
            ],
        ),
        "",
        f"## AIS at k = {k} (top region)",
        "",
        ais_table(profile, region="top"),
    ]
    if ADJUSTED in regions:
        parts += ["", f"## Control-adjusted AIS at k = {k} (top - random)", "", ais_table(profile, region=ADJUSTED)]
    if "placebo" in regions and "top" in regions:  # selection 1's; every selection's rows are in ais.csv
        parts += ["", f"## Top - placebo at k = {k}", "", ais_table(profile, None, "top-placebo")]
    for region in ("bottom", "random", "placebo"):
        if region in profile.regions:
            parts += ["", f"## Control: AIS at k = {k} ({region} region)", "", ais_table(profile, region=region)]
    if any(row.metric == P_CORRECT for row in profile.rows):
        parts += [
            "",
            f"## AIS on p_correct at k = {k}",
            "",
            "The same cells on each item's probability of the correct option (softmax over the options' "
            "log-likelihoods, length-normalised where the metric is acc_norm): a continuous per-item score "
            "with narrower intervals than 0/1 accuracy; its claim rows are the claim_p_correct family, the others "
            "secondary (docs/statistics.md).",
        ]
        for region in ("top", ADJUSTED) if ADJUSTED in regions else ("top",):
            parts += ["", f"{region}:", "", ais_table(profile, region=region, p_correct=True)]
    parts += statistics_markdown(profile)
    parts += analyses_markdown(profile)
    parts += ["", "## k sweep per benchmark"]
    for benchmark in profile.benchmarks:
        header = ["ability", "region"] + [f"k = {format_k(k_)}" for k_ in profile.k_values]
        rows = [
            [a, r] + [fmt_ais(profile.row(a, benchmark, k_, r)) for k_ in profile.k_values]
            for a in profile.abilities
            for r in regions
        ]
        parts += [
            "",
            f"### {benchmark} ({profile.metrics.get(benchmark, 'no original score')}{profile.chance_mark(benchmark)})",
            "",
            md_table(header, rows),
        ]
    parts += k_steps_markdown(profile)
    parts += specificity_markdown(profile)
    parts += ["", "## Missing evaluations", ""]
    if profile.missing:
        grouped: dict[tuple[str, str, str], list[str]] = {}
        for m in profile.missing:
            ability, _, rest = m.variant.partition("/")
            grouped.setdefault((m.benchmark, ability, m.reason), []).append(rest)
        parts.append(
            f"{counted(len(profile.missing), 'evaluation')} could not be used "
            "(every one is listed in ais.json under `missing`)."
        )
        parts.append("")
        parts.append(
            md_table(
                ["benchmark", "model variant", "k / region", "reason"],
                [[b, a, ", ".join(rest) if any(rest) else "", reason] for (b, a, reason), rest in grouped.items()],
            )
        )
    else:
        parts.append("None.")
    notes = merged_notes(profile.notes)
    if notes:
        shown = 30
        parts += ["", "## Notes", ""] + [f"- {note}" for note in notes[:shown]]
        if len(notes) > shown:
            parts.append(f"- ... and {len(notes) - shown} more (ais.json, `notes`)")
    return "\n".join(parts) + "\n"


SUBJECT_NOTE = re.compile(r"^(\S+) \(([^)]+)\): (.+)$")  # "<benchmark> (<what>): <the note>"


def merged_notes(notes: list[str]) -> list[str]:
    """Notes said once: those that differ only in the benchmark they open with ("arc_easy (p_correct): rows with
    ...", "piqa (p_correct): rows with ...") become one note listing the benchmarks, where the first stood."""
    merged: dict[tuple[str, str], list[str]] = {}  # (what, note) -> benchmarks; other notes keyed by themselves
    for note in dict.fromkeys(notes):
        match = SUBJECT_NOTE.match(note)
        key = (match.group(2), match.group(3)) if match else ("", note)
        merged.setdefault(key, []).append(match.group(1) if match else "")
    return [f"{', '.join(subjects)} ({what}): {note}" if what else note for (what, note), subjects in merged.items()]


def k_steps_markdown(profile: Profile) -> list[str]:
    """ais.md: whether each top region's AIS changes between neighbouring k, by the paired test of the two ablated
    runs (cells.k_steps), so that "grows with k" is read from a test and not from two cells' stars."""
    if not profile.k_steps:
        return []
    rows = [
        [
            s.benchmark,
            s.ability,
            f"{format_k(s.k_from)} → {format_k(s.k_to)}",
            f"{s.ais_from:+.3f} → {s.ais_to:+.3f}",
            f"{s.difference:+.3f}" + ("*" if s.significant else ""),
            MISSING_CELL if s.lost is None else f"{s.lost} / {s.gained}",
            MISSING_CELL if math.isnan(s.q_value) else f"{s.q_value:.3g}",
        ]
        for s in profile.k_steps
    ]
    return [
        "",
        "### Does the damage change with k?",
        "",
        "Top region, primary metric: the change of the AIS from one k to the next, tested by the paired test of the "
        "two ablated runs on the same documents (McNemar on the documents right at one k and wrong at the other, "
        "clustered where items share a fact; the test of the mean for continuous metrics). `*`: q < alpha, "
        "Benjamini-Hochberg over these rows (benchmarks at chance left out).",
        "",
        md_table(["benchmark", "ability", "k", "AIS", "change", "lost / gained", "q"], rows),
    ]


def specificity_markdown(profile: Profile) -> list[str]:
    """The ais.md section: overlap of the regions, specificity per ability and k (with the mean over
    the abilities), and diagonal dominance of the AIS matrix."""
    has_rows = any(r.benchmark == SPECIFICITY for r in profile.rows)
    if not has_rows and not profile.overlap:
        return []
    what = f"extract.score = `{profile.score}`"
    if profile.loss_on:
        what += f", finetune.loss_on = `{profile.loss_on}`"
    parts = ["", f"## Region specificity ({what})", ""]
    if profile.overlap:
        parts += (
            [
                "Overlap of the abilities' regions (mean over ability pairs; chance: independent random regions "
                "of the same sizes; every pair in overlap.csv, heatmap overlap_k<k>.png, where the regions lie "
                "in layers.csv and layers_k<k>.png):",
                "",
            ]
            + [f"- {line}" for line in profile.overlap]
            + [""]
        )
    if not has_rows:
        return parts
    splits = ability_benchmarks(profile.benchmarks, profile.abilities)
    parts += [
        f"spec = AIS on the ability's own split − mean AIS on the other abilities' splits ({', '.join(splits)}); "
        "`*`: q < alpha in the own family (Statistics), only on top-random, the claim that the region is specific "
        "beyond what random regions of its size show; the top and random columns are never starred (their test is "
        "against 0, and on a real LLM a region that hurts every split a little still differs from 0 on some split by "
        f"chance); `{MEAN}`: the mean over the abilities.",
        "",
    ]
    regions = [
        r
        for r in ("top", "top-random", "random")
        if any(row.benchmark == SPECIFICITY and row.region == r for row in profile.rows)
    ]
    header = ["ability"] + [f"{region}, k = {format_k(k)}" for k in profile.k_values for region in regions]

    def cell(ability: str, k: float, region: str) -> str:
        row = profile.row(ability, SPECIFICITY, k, region)
        text = fmt_ais(row)
        if row is not None and not math.isnan(row.ci_low):
            text += f" [{row.ci_low:+.3f}, {row.ci_high:+.3f}]"
        return text

    table = [
        [a] + [cell(a, k, region) for k in profile.k_values for region in regions]
        for a in list(profile.abilities) + [MEAN]
        if any(profile.row(a, SPECIFICITY, k, region) for k in profile.k_values for region in regions)
    ]
    parts.append(md_table(header, table))
    parts += ["", "Diagonal dominance (the ability's own split has the largest AIS in its row, top region):", ""]
    for k in profile.k_values:
        dominance = profile.diagonal_dominance(k)
        known = {a: v for a, v in dominance.items() if v is not None}
        yes = [a for a, v in known.items() if v]
        parts.append(f"- k = {format_k(k)}: {len(yes)} of {len(known)}" + (f" ({', '.join(yes)})" if yes else ""))
    return parts


def _pair_line(line: Similarity) -> str:
    first = f"{line.benchmark_a} ~ {line.benchmark_b}" if not line.model_b else f"{line.model} ~ {line.model_b}"
    return (
        f"- {first}: cosine {fmt_interval(line.cosine, line.cosine_ci_low, line.cosine_ci_high)}, "
        f"Spearman {fmt_interval(line.spearman, line.spearman_ci_low, line.spearman_ci_high)} "
        f"({line.abilities} abilities)"
    )


def analyses_markdown(profile: Profile) -> list[str]:
    """ais.md's section on the paper's findings: each benchmark's breadth (significantly positive and negative
    abilities, the spread of the positive AIS mass) and which benchmark pairs measure the same mixture."""
    if not profile.breadth:
        return []
    parts = [
        "",
        "## Breadth and similarity of the benchmarks",
        "",
        f"Top region, primary metric. Positive / negative: abilities whose AIS is significantly above / below 0 "
        f"(q < {profile.alpha:g}, the profile's Benjamini-Hochberg family). Normalised entropy of the positive AIS "
        "mass over the abilities (0: one ability holds it all, 1: spread evenly), the effective number of "
        f"abilities (its exponential) and the number of abilities with AIS > {profile.threshold:g} (the paper's "
        "ribbons), with 95% intervals from one joint resample of the items for every ability "
        "(docs/analyses.md). Every k in benchmarks.csv.",
        "",
    ]
    headline = [line for line in profile.breadth if line.headline]
    parts.append(
        md_table(
            [
                "benchmark",
                "k",
                "positive",
                "negative",
                f"AIS > {profile.threshold:g}",
                "normalised entropy",
                "effective abilities",
            ],
            [
                [
                    line.benchmark,
                    format_k(line.k),
                    f"{line.n_positive}: {fmt_names(line.positive)}",
                    f"{line.n_negative}: {fmt_names(line.negative)}",
                    fmt_interval(line.n_above, line.above_ci_low, line.above_ci_high, digits=0),
                    fmt_interval(line.normalised_entropy, line.entropy_ci_low, line.entropy_ci_high),
                    fmt_interval(line.effective_abilities, line.effective_ci_low, line.effective_ci_high),
                ]
                for line in headline
                if math.isclose(line.k, profile.report_k)
            ],
        )
    )
    at_chance = sorted({line.benchmark for line in profile.breadth if not line.headline})
    if at_chance:
        parts += ["", f"At chance (no breadth, left out of the similarity): {', '.join(at_chance)}."]
    pairs = [s for s in profile.similarity if math.isclose(s.k, profile.report_k)]
    if pairs:
        same = [s for s in pairs if s.verdict == "same mixture"]
        differ = [s for s in pairs if s.verdict == "differ"]
        parts += [
            "",
            f"Benchmark similarity at k = {format_k(profile.report_k)}: cosine and Spearman correlation of two "
            f"benchmarks' AIS vectors over the abilities, 95% intervals (similarity.csv, similarity.png). Same "
            f"mixture: the cosine's interval lies above {SAME_MIXTURE:g}; differ: below it; judged only where both "
            "benchmarks have a significantly positive ability.",
            "",
            f"Same mixture ({len(same)} of {len(pairs)} pairs):",
            "",
        ]
        parts += [_pair_line(s) for s in same] or ["- none"]
        parts += ["", f"Differ ({len(differ)} of {len(pairs)} pairs):", ""]
        parts += [_pair_line(s) for s in differ] or ["- none"]
        undecided = [s for s in pairs if s.verdict in ("undecided", "")]
        no_profile = len(pairs) - len(same) - len(differ) - len(undecided)
        if undecided:
            parts += ["", f"Undecided (the interval holds {SAME_MIXTURE:g}, or no interval; {len(undecided)}):", ""]
            parts += [_pair_line(s) for s in undecided]
        if no_profile:
            parts += [
                "",
                f"Not judged (a benchmark with no significantly positive ability, whose profile is noise): "
                f"{counted(no_profile, 'pair')}.",
            ]
    return parts
