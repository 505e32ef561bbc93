"""The labelled corrections of ``tests/loop/data``: hostile ones (by category) and benign ones, each wrapped in
one of the ways a user says "that's wrong, it should have been: X", for the filter's measured recall."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).parent / "data"
PREFIXES = [
    "不对，应该回答：",
    "错了，应该是：",
    "不对，应该说：",
    "That's wrong, it should be: ",
    "no, should have said: ",
]


def read(name: str) -> list[tuple[str, str]]:
    """``(label, text)`` of each line of ``data/NAME``: LABEL<TAB>TEXT, ``\\n`` a line break, # a comment."""
    rows = []
    for line in (DATA / name).read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            label, text = line.split("\t", 1)
            rows.append((label, text.replace("\\n", "\n")))
    return rows


HOSTILE = read("hostile_corrections.txt")
BENIGN = read("benign_corrections.txt")


def as_message(i: int, text: str) -> str:
    """The user's correction message that hints ``text`` (the i-th prefix, in turn)."""
    return PREFIXES[i % len(PREFIXES)] + text
