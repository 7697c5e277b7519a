"""The selection options' registry (benchprof/core/options.py): declared once, read by the config, the CLI's help,
the frontier's names and the docs, and one recommendation named the same everywhere."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from benchprof.core import options
from benchprof.core.config import ExtractSettings
from benchprof.core.loader import load_config
from benchprof.core.schema import ConfigError
from benchprof.core.selection import select

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "configs" / "demo.yml"


def test_one_default_and_one_recommendation():
    names = [o.name for o in options.OPTIONS]
    assert len(names) == len(set(names))
    assert [o.name for o in options.OPTIONS if o.status == "default"] == ["importance"] == [options.DEFAULT]
    assert [o.name for o in options.OPTIONS if o.status == "recommended"] == [options.RECOMMENDED]
    assert options.BY_NAME[options.RECOMMENDED].extract  # a user can put it in config.yml
    assert ExtractSettings().score == options.DEFAULT


def test_the_code_reads_the_registry():
    from benchprof.lab.validate_report import SCORES as VALIDATION_ROWS
    from benchprof.stages.neurons import FRONTIER_SCORES, SCORES, UNIONS, score_spec
    from benchprof.stages.weight_scores import FORMULAS, RATIO_EPSILON

    assert set(FRONTIER_SCORES) == set(options.FRONTIER_OPTIONS)
    assert set(UNIONS) == {o.name for o in options.OPTIONS if o.parts}
    for name in options.NEURON_SCORES:
        assert score_spec(name) == SCORES[name]
    assert set(FORMULAS) == set(options.WEIGHT_SCORES) == set(VALIDATION_ROWS)
    assert f"eps = {RATIO_EPSILON:g} x" in FORMULAS["ratio"]  # the manifest's formula states the code's constant
    assert set(options.SCORES) == set(options.WEIGHT_SCORES) | set(options.NEURON_SCORES)


def test_every_neuron_option_has_a_formula():
    """neuron_scores computes every non-union option the registry declares (no name without its branch)."""
    from benchprof.stages.neurons import GENERAL, neuron_scores, score_spec

    rng = np.random.default_rng(0)
    values = {name: rng.random((5, 7)).astype(np.float32) for name in ("a", "b", "c", GENERAL)}
    for option in options.OPTIONS:
        if option.unit == "neurons" and not option.parts:
            statistic, _ = score_spec(option.name)
            assert statistic == option.statistic
            assert neuron_scores(values, "a", option.name).shape == (7,)


def test_an_unknown_name_gets_a_did_you_mean():
    cfg = load_config(DEMO)
    wanted = r"--score: 'act_grad_contrast_ab' is not one of .*did you mean act_grad_contrast_abs\?"
    with pytest.raises(ConfigError, match=wanted):
        cfg.with_overrides(extract={"score": "act_grad_contrast_ab"})
    with pytest.raises(ConfigError, match=r"did you mean rank\?"):
        cfg.with_overrides(extract={"score": "rnak"})
    with pytest.raises(Exception, match=r"--options: 'act_unoin' is not one of .*did you mean act_union\?"):
        select("act_unoin", options.FRONTIER_OPTIONS, "--options")
    assert options.did_you_mean("zzzz", options.SCORES) == ""


def test_extract_and_frontier_help_list_every_option():
    from benchprof.cli import COMMANDS

    help_text = COMMANDS["extract"].__doc__ or ""
    for name in options.SCORES:
        assert re.search(rf"\b{name}\b", help_text), name
    assert f"{options.RECOMMENDED} (recommended for a real model)" in help_text
    frontier_help = COMMANDS["frontier"].__doc__ or ""
    for name in options.FRONTIER_OPTIONS:
        assert re.search(rf"\b{name}\b", frontier_help), name
    from fire.docstrings import parse

    score = next(arg for arg in parse(help_text).args if arg.name == "score")  # fire reads the list as one argument
    assert all(name in (score.description or "") for name in options.SCORES)


def table_block(text: str) -> str:
    start = text.index("<!-- options table: generated")
    end = text.index("<!-- end of options table -->")
    return text[text.index("\n", start) + 1 : end].strip()


def test_the_config_reference_lists_exactly_the_registry():
    """docs/config.md's options table is the registry's, row for row (regenerate: options.markdown_table())."""
    doc = (ROOT / "docs" / "config.md").read_text()
    assert table_block(doc) == options.markdown_table()
    listed = re.findall(r"^\| `([a-z_]+)` \|", table_block(doc), flags=re.M)
    assert listed == [o.name for o in options.OPTIONS]


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown page as GitHub makes them from its headings, and its explicit <a id> ones."""
    text = path.read_text()
    found = set(re.findall(r'<a id="([^"]+)"', text))
    for heading in re.findall(r"^#+ (.+)$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def test_each_option_links_to_a_section_that_exists():
    for option in options.OPTIONS:
        page, _, section = option.measured_in.partition("#")
        assert (ROOT / page).is_file(), option.name
        assert section in anchors(ROOT / page), option.measured_in


def test_one_recommendation_everywhere():
    """README, config.yml and the docs that measure options name the registry's recommended option, and README
    and config.yml recommend nothing else."""
    recommended = options.RECOMMENDED
    pages = ("README.md", "config.yml", "docs/config.md", "docs/research/frontier.md", "docs/research/real-model.md")
    for page in pages:
        text = (ROOT / page).read_text()
        assert re.search(rf"[Rr]ecommended[^.]*{recommended}|{recommended}[^.]*recommended", text), page
    others = [o.name for o in options.OPTIONS if o.name != recommended]
    for page in ("README.md", "config.yml"):
        for line in (ROOT / page).read_text().splitlines():
            if "recommend" in line.lower():
                named = [name for name in others if re.search(rf"`{name}`|score: {name}\b|\b{name},", line)]
                assert not named, f"{page}: {line}"
