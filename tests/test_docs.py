"""The README and docs/ guides cannot drift: every relative link resolves, every command named exists.

A link `[text](path#anchor)` must point to a file of the repository, and the anchor (when given) to a
heading of that file, slugged as GitHub does. Every `ark-trainer COMMAND` (or `ark-trainer-inner COMMAND`)
written in code, inline or in a fenced block, must be a subcommand of `ark_trainer.cli.build_parser()`.
The OpenClaw skill names the states ``status`` prints, and the README's prerequisites name npm; the skill and
the getting-started guide name every strategy.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from ark_trainer.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.M)
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
INLINE = re.compile(r"`([^`\n]+)`")
COMMAND = re.compile(r"(?<![\w/.$-])ark-trainer(?:-inner)?[ \t]+(?:\\\n\s*)?([a-z][\w-]*)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return {slug(m.group(1)) for m in HEADING.finditer(text)}


def links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every relative link outside code blocks."""
    text = path.read_text(encoding="utf-8")
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    out = []
    for m in LINK.finditer(text):
        target = m.group(1)
        if not re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: are not checked here
            out.append((text.count("\n", 0, m.start()) + 1, target))
    return out


def broken_links(path: Path) -> list[str]:
    problems = []
    for line, target in links(path):
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(ROOT)}:{line}: {target}"
        if not dest.exists():
            problems.append(f"{where}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{where}: no heading '#{anchor}' in {dest.relative_to(ROOT)}")
    return problems


def code_text(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    blocks = [m.group(0) for m in FENCE.finditer(text)]
    spans = [m.group(1) for m in INLINE.finditer(FENCE.sub("", text))]
    return "\n".join(blocks + spans)


def commands() -> set[str]:
    parser = build_parser()
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {name for action in subs for name in action.choices}


def test_docs_exist():
    names = {p.name for p in DOCS}
    for guide in ("getting-started.md", "data.md", "rewards.md", "openclaw.md", "long-runs.md", "scale.md"):
        assert guide in names, f"docs/{guide} missing"


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path):
    assert broken_links(path) == []


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_named_commands_exist(path):
    known = commands()
    named = {m.group(1) for m in COMMAND.finditer(code_text(path))}
    assert named - known == set(), f"{path.relative_to(ROOT)} names commands that do not exist"


def test_checks_catch_drift(tmp_path):
    """The checks themselves fail on a bad link, a bad anchor and an unknown command."""
    (tmp_path / "a.md").write_text("# Title\n\n## Sub part\n", encoding="utf-8")
    doc = tmp_path / "b.md"
    doc.write_text("[ok](a.md#sub-part) [bad](nope.md) [anchor](a.md#gone) `ark-trainer frobnicate X`\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        problems = broken_links(doc)
    finally:
        ROOT = saved
    assert [p.split(": ", 2)[1] for p in problems] == ["nope.md", "a.md#gone"]
    named = {m.group(1) for m in COMMAND.finditer(code_text(doc))}
    assert named - commands() == {"frobnicate"}
    assert slug("Train a reward model: `ark-trainer rm train`") == "train-a-reward-model-ark-trainer-rm-train"


def test_skill_names_the_states_status_prints_and_readme_lists_npm():
    from ark_trainer.core.runtime import monitor

    skill = (ROOT / "src/ark_trainer/services/openclaw/skill/SKILL.md").read_text()
    states_text = skill.split("## 4. Status")[1].split("## 5.")[0].split("ark-trainer diagnose")[0]
    named = set(re.findall(r"`(\w+)`", states_text))  # the states the skill names, before the diagnosis part
    states = set(re.findall(r'"(\w+)"', Path(monitor.__file__).read_text()))
    assert "stalled" in named and named - {"status"} <= states, named - states
    intro = (ROOT / "README.md").read_text().split("## Two commands")[1].split("## ")[0]
    assert re.search(r"On a fresh Linux machine[^:]*`npm`", intro), intro  # the prerequisites name npm


def test_the_skill_and_the_docs_name_every_strategy():
    from ark_trainer.base.strategies import STRATEGIES

    root = Path(__file__).resolve().parents[1]
    skill = (root / "src" / "ark_trainer" / "services" / "openclaw" / "skill" / "SKILL.md").read_text(
        encoding="utf-8"
    )
    guide = (root / "docs" / "getting-started.md").read_text(encoding="utf-8")
    for name in STRATEGIES:
        assert name in skill and f"`{name}`" in guide, name
    assert "PPO" in skill and "PPO" in guide
