"""A request being parsed: the text with consumed spans blanked out, and what the rules made of it.

The parser's rules (``services/nl/parse.py``, ``services/nl/paths.py``) each take the words they understood out of a
:class:`RequestText` and write flags, assumptions and objectives into a :class:`Parsed`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Parsed:
    """What the request said (flags), what was assumed, and what was not understood."""

    flags: dict[str, Any] = field(default_factory=dict)
    assumptions: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    objectives: list[str] = field(default_factory=list)
    agent: str | None = None  # "current" or an agent id: the request names an OpenClaw agent


class RequestText:
    """The request with consumed spans blanked out, so no two rules read the same words."""

    def __init__(self, text: str) -> None:
        self.original = text
        self.rest = text

    def find(self, pattern: str) -> re.Match | None:
        return re.search(pattern, self.rest, flags=re.IGNORECASE)

    def finditer(self, pattern: str) -> list[re.Match]:
        return list(re.finditer(pattern, self.rest, flags=re.IGNORECASE))

    def take(self, pattern: str) -> re.Match | None:
        m = self.find(pattern)
        if m:
            self.consume(m)
        return m

    def consume(self, m: re.Match) -> None:
        self.rest = self.rest[: m.start()] + " " * (m.end() - m.start()) + self.rest[m.end() :]
