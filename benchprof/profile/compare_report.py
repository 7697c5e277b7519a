"""Tables out for several models (outputs/compare/): profiles.csv, correlation.csv, differences.csv, claims.csv
and compare.md, from the comparison analyses.py computes and each profile's Claims (claims.py), cells written as
formatting.py says."""

from __future__ import annotations

import math
from dataclasses import asdict, fields
from pathlib import Path

from benchprof.core.layout import CompareLayout, format_k
from benchprof.core.storage import write_csv, write_text
from benchprof.profile.claims import Claim, benchmark_claims, claim_line, claim_rows, gate_line, p_correct_lines
from benchprof.profile.formatting import MISSING_CELL, fmt_ais, fmt_interval, fmt_names, md_table
from benchprof.profile.rows import SAME_MIXTURE, AisRow, Comparison, Difference

CORRELATION_COLUMNS = (  # compare/correlation.csv: one benchmark's profile in two models
    "benchmark",
    "k",
    "k_b",
    "model_a",
    "model_b",
    "abilities",
    "cosine",
    "cosine_ci_low",
    "cosine_ci_high",
    "spearman",
    "spearman_ci_low",
    "spearman_ci_high",
    "verdict",
    "paired",
)
DIFFERENCE_COLUMNS = tuple(f.name for f in fields(Difference))  # compare/differences.csv
COMPARE_PROFILE_COLUMNS = ("benchmark", "k", "ability", "model", "ais", "ci_low", "ci_high", "q_value", "significant")
CLAIM_COLUMNS = (  # compare/claims.csv: the row each model's claim about a benchmark and an ability is read from
    "benchmark", "ability", "model", "k", "verdict", "claimed", "ais", "ci_low", "ci_high", "q_value", "significant",
    "selections", "selections_agree", "selections_ais", "selections_low", "selections_high",
)  # fmt: skip


def claim_entries(comparison: Comparison) -> list[tuple[str, Claim, AisRow]]:
    """Per model, benchmark and ability: the model, the benchmark's verdict (claims.Claim) and the tested top −
    random row at the model's report k on the benchmark's primary metric that its claims are read from."""
    return [
        (profile.model, claim, row)
        for profile in comparison.profiles
        for claim in benchmark_claims(profile)
        for row in claim_rows(profile, claim.benchmark)
    ]


def claim_table(comparison: Comparison) -> list[dict[str, object]]:
    """claims.csv: claim_entries, one line each: the row's AIS and test, under docs/claims.md's rule its figure over
    selections, the benchmark's verdict for the model (Claim.kind) and whether the ability is claimed."""
    return [
        {
            "benchmark": row.benchmark, "ability": row.ability, "model": model, "k": row.k, "verdict": claim.kind,
            "claimed": row in claim.draws_on, "ais": row.ais, "ci_low": row.ci_low, "ci_high": row.ci_high,
            "q_value": row.q_value, "significant": row.significant, "selections": row.selections,
            "selections_agree": row.selections_agree, "selections_ais": row.selections_ais,
            "selections_low": row.selections_low, "selections_high": row.selections_high,
        }
        for model, claim, row in claim_entries(comparison)
    ]  # fmt: skip


def write_comparison_tables(comparison: Comparison, layout: CompareLayout) -> list[Path]:
    """outputs/compare/: profiles.csv (every model's top-region AIS per benchmark, ability and k), correlation.csv
    (each benchmark's profile in two models), differences.csv (each AIS's difference between two models, tested),
    claims.csv (each model's claim rows, claim_table) and compare.md."""
    rows = []
    for benchmark in comparison.benchmarks:
        for profile in comparison.profiles:
            for k in profile.k_values:
                for ability in profile.abilities:
                    row = profile.row(ability, benchmark, k, "top")
                    if row is None:
                        continue
                    rows.append(
                        {
                            "benchmark": benchmark,
                            "k": k,
                            "ability": ability,
                            "model": profile.model,
                            "ais": row.ais,
                            "ci_low": row.ci_low,
                            "ci_high": row.ci_high,
                            "q_value": row.q_value,
                            "significant": row.significant,
                        }
                    )
    write_csv(layout.profiles_csv, COMPARE_PROFILE_COLUMNS, rows)
    write_csv(
        layout.correlation_csv,
        CORRELATION_COLUMNS,
        (
            {**asdict(line), "benchmark": line.benchmark_a, "model_a": line.model, "model_b": line.model_b}
            for line in comparison.correlations
        ),
    )
    write_csv(layout.differences_csv, DIFFERENCE_COLUMNS, (asdict(d) for d in comparison.differences))
    write_csv(layout.claims_csv, CLAIM_COLUMNS, claim_table(comparison))
    write_text(layout.compare_md, render_comparison(comparison))
    return [layout.profiles_csv, layout.correlation_csv, layout.differences_csv, layout.claims_csv, layout.compare_md]


def render_comparison(comparison: Comparison) -> str:
    """compare.md: each model's claims (_claims_section), each benchmark's profile side by side per model at the
    report k (each model's own, own_k), the similarity of the profiles between models, the differences, and which
    findings hold in every model."""
    k = comparison.report_k
    models = comparison.models
    at = f"k = {format_k(k)}"
    if comparison.own_k:
        each = ", ".join(f"{format_k(comparison.k_of(m))} ({m})" for m in models)
        at = (
            f"each model at its own report k (the same size rule is a different k in each model): k = {each}; "
            "every model's resamples drawn by one generator, so paired where the models scored the same items"
        )
    parts = [
        f"# Profiles across models: {', '.join(f'`{m}`' for m in models)}",
        "",
        f"At {at}.",
        "",
        *_claims_section(comparison),
        "## Each benchmark's profile per model",
        "",
        "Top region, primary metric, at the k above (every k in profiles.csv; profiles.png draws these). `*`: "
        f"q < alpha in that model's own profile. Benchmarks at chance in any model are left out here and below: "
        f"{fmt_names(comparison.at_chance)}.",
    ]
    abilities = comparison.profiles[0].abilities
    for benchmark in comparison.benchmarks:
        parts += [
            "",
            f"### {benchmark}",
            "",
            md_table(
                ["ability"] + models,
                [
                    [a] + [fmt_ais(p.row(a, benchmark, comparison.k_of(p.model), "top")) for p in comparison.profiles]
                    for a in abilities
                ],
            ),
        ]
    parts += [
        "",
        "## Does a benchmark's profile hold across models?",
        "",
        "Cosine and Spearman correlation of the benchmark's AIS vector over the abilities in two models, with 95% "
        "bootstrap intervals (both models' resamples drawn by one generator per benchmark and k: on the same items, "
        "paired, where both scored the same items). Same mixture: the cosine's interval lies above "
        f"{SAME_MIXTURE:g}; differ: below it; no profile: no significantly positive ability in one of the models.",
        "",
    ]
    lines = [c for c in comparison.correlations if math.isclose(c.k, comparison.k_of(c.model))]
    parts.append(
        md_table(
            ["benchmark", "models", "cosine", "Spearman", "abilities", "verdict", "paired"],
            [
                [
                    c.benchmark_a,
                    f"{c.model} ~ {c.model_b}",
                    fmt_interval(c.cosine, c.cosine_ci_low, c.cosine_ci_high),
                    fmt_interval(c.spearman, c.spearman_ci_low, c.spearman_ci_high),
                    str(c.abilities),
                    c.verdict or MISSING_CELL,
                    "yes" if c.paired else "no",
                ]
                for c in lines
            ],
        )
    )
    parts += [
        "",
        "## Did an ability's AIS change between models?",
        "",
        "The difference of each top-region AIS between two models, with its 95% interval and the test of the "
        "difference on the joint resamples (paired: the same items in both; docs/statistics.md). `*`: q < alpha, "
        "Benjamini-Hochberg over every difference in differences.csv. Read a change from this table, not from one "
        "model's star and the other's lack of one.",
        "",
    ]
    differences = [d for d in comparison.differences if math.isclose(d.k, comparison.k_of(d.model_a))]
    parts.append(
        md_table(
            ["benchmark", "ability", "models", "AIS", "difference", "q", "paired"],
            [
                [
                    d.benchmark,
                    d.ability,
                    f"{d.model_a} − {d.model_b}",
                    f"{d.ais_a:+.3f} / {d.ais_b:+.3f}",
                    fmt_interval(d.difference, d.ci_low, d.ci_high, 3, "+") + ("*" if d.significant else ""),
                    MISSING_CELL if math.isnan(d.q_value) else f"{d.q_value:.3g}",
                    "yes" if d.paired else "no",
                ]
                for d in differences
            ],
        )
        if differences
        else "No ability has an AIS in both models."
    )
    parts += ["", "## Findings in every model", ""]
    for entry in comparison.consensus:
        if not math.isclose(entry.k, k):
            continue
        each = "; ".join(f"{m}: {fmt_names(v)}" for m, v in entry.per_model.items())
        if entry.kind in ("breadth", "negative"):
            what = "significantly positive" if entry.kind == "breadth" else "significantly negative"
            same = " (the same set in every model)" if entry.identical and entry.common else ""
            parts.append(f"- {entry.benchmark}, {what} in every model: {fmt_names(entry.common)}{same} ({each})")
        else:
            parts.append(f"- benchmark pairs judged {entry.kind} in every model: {fmt_names(entry.common)} ({each})")
    return "\n".join(parts) + "\n"


def _claims_section(comparison: Comparison) -> list[str]:
    """compare.md's opening section: each benchmark's verdict in every model, in the words of its own ais.md
    (claims.claim_line, at the model's report k), each model's lines on p_correct and its gate, then each ability's
    figure per model (claims.csv: the primary metric's)."""
    verdicts = {p.model: {c.benchmark: claim_line(c) for c in benchmark_claims(p)} for p in comparison.profiles}
    benchmarks = list(dict.fromkeys(b for lines in verdicts.values() for b in lines))
    if not benchmarks:
        return []
    parts = [
        "## Each model's claims",
        "",
        "Each benchmark's verdict in every model at the k above, in the words ais.md uses (docs/claims.md's rule "
        "where the profile has selections or placebo regions), then the figure each verdict is read from: top − "
        "random on the primary metric, the mean over the selections with its interval where there are several "
        "(n/m: selections that meet the tests); **bold**: claimed (draws on), _italic_: lowers it less than random "
        "regions do. Intervals side by side are no test of a change between models: differences.csv is.",
        "",
    ]
    for benchmark in benchmarks:
        parts += [
            f"- {model} (k = {format_k(comparison.k_of(model))}): {lines.get(benchmark, f'{benchmark}: not profiled.')}"
            for model, lines in verdicts.items()
        ]
    parts += [  # the claims on p_correct and the gate's line, as each ais.md says them
        f"- {p.model} (k = {format_k(comparison.k_of(p.model))}): {line}"
        for p in comparison.profiles
        for line in (*p_correct_lines(p), gate_line(p))
        if line
    ]
    figures: dict[tuple[str, str], dict[str, str]] = {}
    for model, claim, row in claim_entries(comparison):
        text = fmt_interval(row.ais, row.ci_low, row.ci_high, 3, "+")
        if row.selections > 1:
            text = fmt_interval(row.selections_ais, row.selections_low, row.selections_high, 3, "+")
            text += f" {row.selections_agree}/{row.selections}"
        text = f"**{text}**" if row in claim.draws_on else f"_{text}_" if row in claim.less_than_random else text
        figures.setdefault((row.benchmark, row.ability), {})[model] = text
    if figures:
        models = comparison.models
        parts += [
            "",
            md_table(
                ["benchmark", "ability"] + models,
                [[b, a] + [cells.get(m, MISSING_CELL) for m in models] for (b, a), cells in figures.items()],
            ),
        ]
    return parts + [""]
