"""Every figure of a profile: AIS heatmap, ability -> benchmark ribbons, per-benchmark profile, k sweep,
the overlap heatmap and layer plot of the abilities' regions, the benchmark similarity heatmap, and the
profiles of several models side by side (outputs/compare/).

matplotlib's object API (Figure, no pyplot state, no display needed); each figure is written atomically
to the path given (layout.py names them) and the path returned.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchprof.core.layout import Layout, format_k
from benchprof.core.results import split_key
from benchprof.core.storage import atomic_path
from benchprof.profile.formatting import MISSING_CELL, UNDEFINED_CELL, fmt_ais
from benchprof.profile.rows import ADJUSTED, SAME_MIXTURE, Comparison, Profile

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from numpy.typing import ArrayLike


def _figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=110, layout="constrained")


def _save(fig: Figure, path: Path) -> Path:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    return path


def _short(metric_key: str) -> str:
    metric, filter_name = split_key(metric_key)
    return metric if filter_name == "none" else f"{metric} ({filter_name})"


def _metric_title(profile: Profile) -> str:
    metrics = {profile.metrics[b] for b in profile.benchmarks if b in profile.metrics}
    return f"metric {_short(metrics.pop())}" if len(metrics) == 1 else "metric per benchmark (axis labels)"


def _symmetric_limit(values: list[float], floor: float = 0.05) -> float:
    finite = [abs(v) for v in values if not math.isnan(v)]
    return max([floor] + finite)


def plot_heatmap(profile: Profile, path: Path, region: str = "top") -> Path:
    """Ability x benchmark AIS at the report k, diverging colours centred at 0, values annotated."""
    import numpy as np
    from matplotlib.colors import Normalize

    abilities, benchmarks = profile.abilities, profile.headline_benchmarks
    if not benchmarks:  # every benchmark at chance: nothing to read, and ais.md lists them
        fig = _figure(6.5, 2.0)
        fig.text(0.5, 0.5, f"{profile.model}: no benchmark above chance (see ais.md, Statistics)", ha="center")
        return _save(fig, path)
    values = np.full((len(abilities), len(benchmarks)), np.nan)
    cells = [[profile.row(a, b, region=region) for b in benchmarks] for a in abilities]
    for i, line in enumerate(cells):
        for j, row in enumerate(line):
            if row is not None:
                values[i, j] = row.ais
    limit = _symmetric_limit(list(values.ravel()))
    norm = Normalize(-limit, limit)
    fig = _figure(max(6.5, 2.6 + 1.05 * len(benchmarks)), 2.2 + 0.42 * len(abilities))
    ax = fig.add_subplot()
    ax.set_facecolor("#e6e6e6")  # missing or undefined cells
    image = ax.imshow(np.ma.masked_invalid(values), cmap="RdBu_r", norm=norm, aspect="auto")
    for i, line in enumerate(cells):
        for j, row in enumerate(line):
            text = fmt_ais(row)
            dark = row is not None and not math.isnan(row.ais) and abs(row.ais) > 0.6 * limit
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color="white" if dark else "black")
    ax.set_xticks(
        range(len(benchmarks)),
        [f"{b}: {_short(profile.metrics[b])}" if b in profile.metrics else b for b in benchmarks],
        rotation=30,
        ha="right",
        rotation_mode="anchor",
        fontsize=8,
    )
    ax.set_yticks(range(len(abilities)), [a.replace("_", " ") for a in abilities], fontsize=8)
    ax.set_xlabel("benchmark: primary metric")
    fig.colorbar(image, ax=ax, shrink=0.85, label="AIS (> 0: ablation hurts)")
    what = "top region" if region == "top" else region
    ax.set_title(
        f"{profile.model}: AIS at k = {format_k(profile.report_k)} ({what})\n{_metric_title(profile)}; "
        f"* adjusted p < {profile.alpha:g} in its family (Statistics in ais.md); {MISSING_CELL} not evaluated",
        fontsize=9,
    )
    return _save(fig, path)


def plot_benchmark_profile(profile: Profile, benchmark: str, path: Path) -> Path:
    """One benchmark's AIS over the abilities at the report k (top region), with 95% intervals,
    beside the random control."""
    import numpy as np

    abilities = profile.abilities
    y = np.arange(len(abilities))
    fig = _figure(7.0, 1.4 + 0.38 * len(abilities))
    ax = fig.add_subplot()
    shown = [r for r in ("top", "random") if r in profile.regions]
    height = 0.8 / len(shown)
    colours = {"top": "#c0392b", "random": "#9a9a9a"}
    for n, region in enumerate(shown):
        rows = [profile.row(a, benchmark, region=region) for a in abilities]
        ais = np.array([r.ais if r else np.nan for r in rows])
        low = np.array([r.ci_low if r else np.nan for r in rows])
        high = np.array([r.ci_high if r else np.nan for r in rows])
        err = np.vstack([np.where(np.isnan(low), 0, ais - low), np.where(np.isnan(high), 0, high - ais)])
        offset = (n - (len(shown) - 1) / 2) * height
        ax.barh(
            y + offset,
            np.nan_to_num(ais),
            height=height * 0.9,
            color=colours[region],
            xerr=np.nan_to_num(err),
            error_kw={"elinewidth": 1, "capsize": 2, "ecolor": "#333333"},
            label=f"{region} region" + (" (control)" if region == "random" else ""),
        )
        for yi, row in zip(y + offset, rows):
            if row is None or math.isnan(row.ais):
                ax.text(0, yi, f" {MISSING_CELL if row is None else UNDEFINED_CELL}", va="center", fontsize=7)
    if benchmark in profile.original_scores and profile.original_scores[benchmark] == 0:
        ax.text(
            0.5,
            0.5,
            "original score is 0: AIS undefined",
            transform=ax.transAxes,
            ha="center",
            va="center",
            color="#666666",
        )
    ax.axvline(0, color="black", linewidth=0.8)
    ax.axvline(
        profile.threshold, color="#555555", linewidth=0.8, linestyle="--", label=f"threshold {profile.threshold:g}"
    )
    ax.set_yticks(y, [a.replace("_", " ") for a in abilities], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("AIS (bars: point estimate, whiskers: 95% paired bootstrap CI)")
    ax.legend(fontsize=7, loc="best")
    metric = _short(profile.metrics[benchmark]) if benchmark in profile.metrics else "no original score"
    ax.set_title(
        f"{profile.model}: profile of {benchmark} ({metric}{profile.chance_mark(benchmark)}) "
        f"at k = {format_k(profile.report_k)}",
        fontsize=9,
    )
    return _save(fig, path)


def plot_ribbons(profile: Profile, path: Path) -> Path:
    """Ability -> benchmark links where the top-region AIS at the report k exceeds the threshold;
    line width proportional to AIS (the paper's profile figure)."""
    import matplotlib
    from matplotlib.patches import PathPatch
    from matplotlib.path import Path as CurvePath

    abilities, benchmarks = profile.abilities, profile.headline_benchmarks
    links = [
        (i, j, row)
        for i, a in enumerate(abilities)
        for j, b in enumerate(benchmarks)
        if (row := profile.row(a, b)) is not None and not math.isnan(row.ais) and row.ais > profile.threshold
    ]
    rows = max(len(abilities), len(benchmarks))
    fig = _figure(8.5, 1.6 + 0.45 * rows)
    ax = fig.add_subplot()

    def ys(count: int) -> list[float]:
        return [1.0 - (i + 0.5) / count for i in range(count)]

    ya, yb = ys(len(abilities)), ys(len(benchmarks))
    colours = matplotlib.colormaps["tab10"]
    widest = max([row.ais for _, _, row in links], default=1.0)
    for i, j, row in sorted(links, key=lambda link: link[2].ais):
        curve = CurvePath(
            [(0.0, ya[i]), (0.5, ya[i]), (0.5, yb[j]), (1.0, yb[j])],
            [CurvePath.MOVETO, CurvePath.CURVE4, CurvePath.CURVE4, CurvePath.CURVE4],
        )
        ax.add_patch(
            PathPatch(
                curve,
                facecolor="none",
                edgecolor=colours(i % 10),
                alpha=0.55,
                linewidth=1.0 + 9.0 * row.ais / widest,
                capstyle="butt",
            )
        )
    for i, a in enumerate(abilities):
        ax.plot(0, ya[i], "o", color=colours(i % 10), markersize=6)
        ax.text(-0.03, ya[i], a.replace("_", " "), ha="right", va="center", fontsize=8)
    for j, b in enumerate(benchmarks):
        ax.plot(1, yb[j], "s", color="#444444", markersize=6)
        ax.text(1.03, yb[j], b, ha="left", va="center", fontsize=8)
    if not links:
        ax.text(0.5, 0.5, f"no AIS above {profile.threshold:g}", ha="center", va="center", fontsize=10, color="#666666")
    ax.set_xlim(-0.75, 1.75)
    ax.set_ylim(0, 1)
    ax.axis("off")
    ax.set_title(
        f"{profile.model}: ability → benchmark links with AIS > {profile.threshold:g} "
        f"(top region, k = {format_k(profile.report_k)}; width ∝ AIS, widest {widest:.3f})",
        fontsize=9,
    )
    return _save(fig, path)


def plot_k_sweep(profile: Profile, benchmark: str, path: Path) -> Path:
    """AIS versus k (log axis) for one benchmark: a panel per ability, a line per region with its
    95% interval as a band."""
    import matplotlib.ticker
    import numpy as np

    abilities = profile.abilities
    columns = min(5, len(abilities))
    panels = math.ceil(len(abilities) / columns)
    fig = _figure(2.3 * columns + 0.6, 2.0 * panels + 0.8)
    axes = np.atleast_1d(fig.subplots(panels, columns, sharex=True, sharey=True, squeeze=False)).ravel()
    colours = {"top": "#c0392b", "bottom": "#2e6fb7", "random": "#8a8a8a"}
    ks = np.array(profile.k_values)
    shown = [r for r in profile.regions_with_adjusted if r != ADJUSTED]  # the first random draw stands for all
    for ax, ability in zip(axes, abilities):
        for region in shown:
            rows = [profile.row(ability, benchmark, k, region) for k in profile.k_values]
            ais = np.array([r.ais if r else np.nan for r in rows])
            low = np.array([r.ci_low if r else np.nan for r in rows])
            high = np.array([r.ci_high if r else np.nan for r in rows])
            colour = colours.get(region)
            if len(ks) > 1:
                ax.plot(ks, ais, marker="o", markersize=3, linewidth=1.2, color=colour, label=region)
                ax.fill_between(ks, low, high, color=colour, alpha=0.15, linewidth=0)
            else:  # one k: a band has no width; error bars, dodged so the regions do not hide each other
                dodge = 1.12 ** (shown.index(region) - (len(shown) - 1) / 2)
                ax.errorbar(
                    ks * dodge,
                    ais,
                    yerr=[np.nan_to_num(ais - low), np.nan_to_num(high - ais)],
                    fmt="o",
                    markersize=3,
                    color=colour,
                    elinewidth=1,
                    capsize=3,
                    label=region,
                )
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_xscale("log")
        ax.set_xlim(ks.min() / 2, ks.max() * 2)  # explicit: a panel with no finite AIS has no data limits
        # ticks at the k values only: log-axis minor labels overlap on a panel this narrow
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_xticks(ks, [f"{k:g}" for k in ks], rotation=45 if len(ks) > 2 else 0)
        ax.set_title(ability.replace("_", " "), fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in axes[len(abilities) :]:
        ax.set_visible(False)
    axes[0].legend(fontsize=7)
    fig.supxlabel("k (fraction of all parameters, log scale)", fontsize=8)
    fig.supylabel("AIS", fontsize=8)
    metric = _short(profile.metrics[benchmark]) if benchmark in profile.metrics else "no original score"
    fig.suptitle(
        f"{profile.model}: {benchmark} ({metric}{profile.chance_mark(benchmark)}), AIS vs k; "
        f"{'bands' if len(ks) > 1 else 'bars'}: 95% CI",
        fontsize=9,
    )
    return _save(fig, path)


def write_plots(profile: Profile, layout: Layout) -> list[Path]:
    """Every plot of one model's profile into its profile folder."""
    written = [plot_heatmap(profile, layout.heatmap_png), plot_ribbons(profile, layout.ribbons_png)]
    for benchmark in profile.benchmarks:
        if benchmark not in profile.metrics:
            continue  # no original score: nothing to draw, and it is listed as missing
        written.append(plot_benchmark_profile(profile, benchmark, layout.profile_png(benchmark)))
        written.append(plot_k_sweep(profile, benchmark, layout.ksweep_png(benchmark)))
    return written


def plot_overlap(rows: Sequence[Mapping[str, Any]], chance: float, path: Path) -> Path:
    """Ability x ability Jaccard heatmap, each cell annotated with Jaccard and its ratio to chance.

    rows: the overlap.csv rows of one (model, k, region), every ordered ability pair; chance: the Jaccard
    expected of two independent random regions of the largest region's size.
    """
    import numpy as np

    model, k, region = rows[0]["model"], rows[0]["k"], rows[0]["region"]
    abilities = list(dict.fromkeys(r["ability_a"] for r in rows))
    cells = {(r["ability_a"], r["ability_b"]): r for r in rows}
    values = np.array([[cells[(a, b)]["jaccard"] for b in abilities] for a in abilities])
    size = 2.4 + 0.9 * len(abilities)
    fig = _figure(size + 1.2, size)
    ax = fig.add_subplot()
    image = ax.imshow(values, cmap="viridis", vmin=0, vmax=1)
    for i, a in enumerate(abilities):
        for j, b in enumerate(abilities):
            row = cells[(a, b)]
            text = f"{row['jaccard']:.2f}" + ("" if i == j else f"\n×{row['jaccard_over_chance']:.1f}")
            ax.text(j, i, text, ha="center", va="center", fontsize=7, color="black" if values[i, j] > 0.6 else "white")
    labels = [a.replace("_", " ") for a in abilities]
    ax.set_xticks(range(len(abilities)), labels, rotation=30, ha="right", rotation_mode="anchor", fontsize=8)
    ax.set_yticks(range(len(abilities)), labels, fontsize=8)
    fig.colorbar(image, ax=ax, shrink=0.8, label="Jaccard")
    ax.set_title(
        f"{model}: overlap of {region} regions at k = {format_k(k)}\n"
        f"Jaccard (×: over chance); chance for random regions ≈ {chance:.3f}",
        fontsize=9,
    )
    return _save(fig, path)


def plot_layers(rows: Sequence[Mapping[str, Any]], model: str, k: float, path: Path) -> Path:
    """Fraction of each ability's region per layer (summed over modules), against the eligible share."""
    import matplotlib

    fig = _figure(7.0, 3.6)
    ax = fig.add_subplot()
    abilities = list(dict.fromkeys(r["ability"] for r in rows))
    colours = matplotlib.colormaps["tab10"]
    eligible_by_layer: dict[int, int] = {}
    for i, ability in enumerate(abilities):
        by_layer: dict[int, float] = {}
        for r in rows:
            if r["ability"] == ability:
                by_layer[r["layer"]] = by_layer.get(r["layer"], 0.0) + r["fraction_of_region"]
                if i == 0 and r["eligible"] != "":
                    eligible_by_layer[r["layer"]] = eligible_by_layer.get(r["layer"], 0) + r["eligible"]
        layers = sorted(by_layer)
        ax.plot(
            layers,
            [by_layer[layer] for layer in layers],
            marker="o",
            markersize=3,
            color=colours(i % 10),
            label=ability.replace("_", " "),
        )
    if eligible_by_layer:
        total = sum(eligible_by_layer.values())
        layers = sorted(eligible_by_layer)
        ax.plot(
            layers,
            [eligible_by_layer[layer] / total for layer in layers],
            linestyle="--",
            color="black",
            label="eligible share (uniform region)",
        )
    ax.set_xticks(sorted({r["layer"] for r in rows}))
    ax.set_xlabel("decoder layer")
    ax.set_ylabel("fraction of the region")
    ax.legend(fontsize=7)
    ax.set_title(f"{model}: where the top regions lie, k = {format_k(k)}", fontsize=9)
    return _save(fig, path)


def similarity_order(distance: ArrayLike) -> list[int]:
    """Leaf order of an average-linkage clustering (scipy.cluster.hierarchy) of a symmetric distance matrix, so
    that similar benchmarks sit next to each other; NaN distances count as the largest (2)."""
    import numpy as np
    from scipy.cluster.hierarchy import leaves_list, linkage
    from scipy.spatial.distance import squareform

    matrix = np.nan_to_num(np.asarray(distance, dtype=float), nan=2.0)
    if matrix.shape[0] < 3:
        return list(range(matrix.shape[0]))
    np.fill_diagonal(matrix, 0.0)
    condensed = squareform(np.clip((matrix + matrix.T) / 2, 0.0, None), checks=False)
    return [int(i) for i in leaves_list(linkage(condensed, method="average"))]


def plot_similarity(profile: Profile, path: Path) -> Path:
    """Benchmark x benchmark cosine and Spearman correlation of the top-region AIS profiles at the report k, in a
    clustered order (average linkage on 1 − cosine); `=` marks pairs whose cosine interval lies above SAME_MIXTURE,
    `≠` those below it."""
    import numpy as np

    pairs = [s for s in profile.similarity if math.isclose(s.k, profile.report_k)]
    benchmarks = list(dict.fromkeys([b for s in pairs for b in (s.benchmark_a, s.benchmark_b)]))
    if len(benchmarks) < 2:
        fig = _figure(6.5, 2.0)
        fig.text(0.5, 0.5, f"{profile.model}: fewer than two benchmarks above chance, no similarity", ha="center")
        return _save(fig, path)
    size = len(benchmarks)
    index = {b: i for i, b in enumerate(benchmarks)}
    cosine, rho = np.eye(size), np.eye(size)
    marks = np.full((size, size), "", dtype=object)
    for s in pairs:
        i, j = index[s.benchmark_a], index[s.benchmark_b]
        cosine[i, j] = cosine[j, i] = s.cosine
        rho[i, j] = rho[j, i] = s.spearman
        marks[i, j] = marks[j, i] = {"same mixture": "=", "differ": "≠"}.get(s.verdict, "")
    order = similarity_order(1.0 - cosine)
    labels = [benchmarks[i] for i in order]
    side = 2.0 + 0.75 * size
    fig = _figure(2 * side + 1.0, side)
    for ax, values, name in zip(fig.subplots(1, 2), (cosine, rho), ("cosine", "Spearman ρ")):
        shown = values[np.ix_(order, order)]
        image = ax.imshow(np.ma.masked_invalid(shown), cmap="RdBu_r", vmin=-1, vmax=1)
        ax.set_facecolor("#e6e6e6")
        for i in range(size):
            for j in range(size):
                if i != j and not math.isnan(shown[i, j]):
                    text = f"{shown[i, j]:.2f}" + (marks[order[i], order[j]] if name == "cosine" else "")
                    colour = "white" if abs(shown[i, j]) > 0.6 else "black"
                    ax.text(j, i, text, ha="center", va="center", fontsize=7, color=colour)
        ax.set_xticks(range(size), labels, rotation=35, ha="right", rotation_mode="anchor", fontsize=7)
        ax.set_yticks(range(size), labels, fontsize=7)
        ax.set_title(name, fontsize=9)
        fig.colorbar(image, ax=ax, shrink=0.8)
    fig.suptitle(
        f"{profile.model}: similarity of the benchmarks' ability profiles (top region, k = "
        f"{format_k(profile.report_k)})\n= cosine 95% CI above {SAME_MIXTURE:g}, ≠ below; order: average-linkage "
        "clustering on 1 − cosine",
        fontsize=9,
    )
    return _save(fig, path)


def plot_comparison(comparison: Comparison, path: Path) -> Path:
    """One panel per benchmark (above chance in every model): the top-region AIS over the abilities at the report
    k, one bar per model with its 95% interval, so a benchmark's profile in each model sits side by side."""
    import matplotlib
    import numpy as np

    benchmarks, profiles = comparison.benchmarks, comparison.profiles
    if not benchmarks:
        fig = _figure(6.5, 2.0)
        fig.text(0.5, 0.5, "no benchmark above chance in every model", ha="center")
        return _save(fig, path)
    abilities = profiles[0].abilities
    columns = min(4, len(benchmarks))
    panels = math.ceil(len(benchmarks) / columns)
    fig = _figure(3.2 * columns + 1.6, (0.9 + 0.32 * len(abilities) * max(1, len(profiles) / 2)) * panels + 0.6)
    axes = np.atleast_1d(fig.subplots(panels, columns, sharey=True, squeeze=False)).ravel()
    colours = matplotlib.colormaps["tab10"]
    y = np.arange(len(abilities))
    height = 0.8 / len(profiles)
    for ax, benchmark in zip(axes, benchmarks):
        for n, profile in enumerate(profiles):
            rows = [profile.row(a, benchmark, comparison.k_of(profile.model), "top") for a in abilities]
            ais = np.array([r.ais if r else np.nan for r in rows])
            low = np.array([r.ci_low if r else np.nan for r in rows])
            high = np.array([r.ci_high if r else np.nan for r in rows])
            err = np.vstack([np.nan_to_num(ais - low), np.nan_to_num(high - ais)])
            ax.barh(
                y + (n - (len(profiles) - 1) / 2) * height,
                np.nan_to_num(ais),
                height=height * 0.9,
                color=colours(n % 10),
                xerr=err,
                error_kw={"elinewidth": 0.8, "capsize": 1.5, "ecolor": "#333333"},
                label=profile.model + (f", k = {format_k(comparison.k_of(profile.model))}" if comparison.own_k else ""),
            )
        ax.axvline(0, color="black", linewidth=0.6)
        ax.set_title(benchmark, fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0].set_yticks(y, [a.replace("_", " ") for a in abilities], fontsize=7)
    axes[0].invert_yaxis()
    for ax in axes[len(benchmarks) :]:
        ax.set_visible(False)
    axes[0].legend(fontsize=7)
    fig.supxlabel("AIS (bars: point estimate, whiskers: 95% paired bootstrap CI)", fontsize=8)
    ks = ", ".join(dict.fromkeys(format_k(comparison.k_of(p.model)) for p in profiles))
    fig.suptitle(f"Profiles per model: top region, k = {ks}", fontsize=9)
    return _save(fig, path)


def frontier_plot(summary: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """The effectiveness–specificity frontier (lab/frontier.py): per option, the mean own-split AIS against the
    mean AIS on the other splits over region sizes, and the random regions' AIS at each size. Up and left is
    effective and specific; the diagonal is "hurts everything alike"."""
    fig = _figure(6.0, 5.0)
    ax = fig.subplots()
    options = sorted({str(s["option"]) for s in summary})
    values = [0.0]
    for option in options:
        points = sorted((s for s in summary if s["option"] == option), key=lambda s: s["size"])
        xs, ys = [float(s["other"]) for s in points], [float(s["own"]) for s in points]
        ax.plot(xs, ys, marker="o", label=option)
        for s, x, y in zip(points, xs, ys, strict=True):
            ax.annotate(str(s["size"]), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
        values += xs + ys
    sizes = sorted({(int(s["size"]), float(s["random"])) for s in summary})
    random_by_size = dict(sizes)
    ax.plot(
        list(random_by_size.values()), list(random_by_size.values()), marker="x", linestyle="none", color="grey",
        label="random regions (own = other)",
    )  # fmt: skip
    values += list(random_by_size.values())
    low, high = min(values) - 0.05, max(values) + 0.05
    ax.plot([low, high], [low, high], color="lightgrey", linewidth=1, zorder=0)
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    ax.set_xlabel("mean AIS on the other abilities' splits")
    ax.set_ylabel("AIS on the ability's own split (mean over abilities)")
    ax.set_title("Effectiveness against specificity (labels: neurons zeroed)")
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, path)
