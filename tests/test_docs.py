"""The user guide (README.md and docs/ outside docs/research/): at most 1,500 lines, findings.md at most 150, no
dated result in it (a date outside a link target belongs to a research report), and every relative link and
anchor in README.md and docs/ (research reports included) resolves, as do the docs paths code and configs name."""

from __future__ import annotations

import re
from pathlib import Path

from test_options import anchors

ROOT = Path(__file__).resolve().parents[1]
GUIDE = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")


def prose(path: Path) -> str:
    """A page without its code blocks and link targets."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return re.sub(r"\]\([^)]*\)", "]()", text)


def test_the_user_guide_is_short_and_undated():
    lines = {p.name: len(p.read_text().splitlines()) for p in GUIDE}
    assert sum(lines.values()) <= 1500, lines
    assert lines["findings.md"] <= 150
    dated = [f"{p.name}: {m.group(0)}" for p in GUIDE for m in DATE.finditer(prose(p))]
    assert not dated, dated


def test_every_link_and_anchor_resolves():
    broken = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in anchors(dest)):
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    code = [*ROOT.glob("benchprof/**/*.py"), *ROOT.glob("tests/*.py"), *ROOT.glob("scripts/*"), *ROOT.glob("configs/*")]
    for path in [p for p in code if p.is_file()]:
        for match in re.finditer(r"(docs/[\w./-]+\.md)(#[\w-]+)?", path.read_text(errors="replace")):
            dest = ROOT / match.group(1)
            if not dest.exists() or (match.group(2) and match.group(2)[1:] not in anchors(dest)):
                broken.append(f"{path.relative_to(ROOT)}: {match.group(0)}")
    assert not broken, broken
