"""Text that is not text: blank strings that look filled, and lone surrogates that cannot be encoded.

``is_blank`` is ``str.isspace`` widened to what a reader cannot see either: format characters (Unicode
category Cf: zero-width space, joiners, the BOM, bidi marks, soft hyphen, tags), other control characters,
and the fillers and selectors that render as nothing (Hangul fillers, the braille blank, variation
selectors, the combining grapheme joiner). A prompt or an answer made only of these is empty.

A lone surrogate (``"\\ud800"`` in JSON) is a valid JSON escape but not a character: UTF-8 cannot encode
it, so the tokenizer, the length check and every writer would fail on it later. The loader refuses it
with ``file:line``; text recorded from a live server has it replaced by U+FFFD instead (a user's turn is
not refused, and one bad character must not lose it).

    is_blank("\\u200b\\ufeff")  # True
    lone_surrogate("a\\ud800")  # 1
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

_INVISIBLE_CATEGORIES = {"Cc", "Cf", "Cs", "Zs", "Zl", "Zp"}
_INVISIBLE = {
    "\u034f",  # combining grapheme joiner
    "\u115f",
    "\u1160",
    "\u3164",
    "\uffa0",  # Hangul fillers
    "\u2800",  # braille pattern blank
    *map(chr, range(0xFE00, 0xFE10)),  # variation selectors
    *map(chr, range(0xE0100, 0xE01F0)),  # variation selectors supplement
}
_SURROGATE = re.compile("[\ud800-\udfff]")


def is_blank(text: str) -> bool:
    """True when ``text`` has no visible character (only whitespace, format and control characters)."""
    return all(
        c.isspace() or c in _INVISIBLE or unicodedata.category(c) in _INVISIBLE_CATEGORIES for c in text
    )


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def terminal_safe(value: Any, limit: int = 200) -> str:
    """``value`` as text a terminal shows as written: control characters (ESC sequences, carriage returns,
    bidi overrides) as ``\\xNN``/``\\uNNNN`` escapes, at most ``limit`` characters (for what a file of a
    run says, e.g. ``heartbeat.json``, printed by ``status``)."""
    text = _CONTROL.sub(lambda m: ascii(m.group())[1:-1], str(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def lone_surrogate(text: str) -> int | None:
    """The position of the first lone surrogate in ``text``, or None."""
    match = _SURROGATE.search(text)
    return match.start() if match else None


def first_lone_surrogate(value: Any) -> tuple[str, str] | None:
    """(path inside ``value``, e.g. ``messages[0].content``, the surrogate as ``\\udXXX``) of the first
    lone surrogate in any string (or key) of a JSON value, or None. Iterative: depth is checked elsewhere."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            at = lone_surrogate(item)
            if at is not None:
                return where, f"\\u{ord(item[at]):04x}"
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", v) for i, v in reversed(list(enumerate(item))))
        elif isinstance(item, dict):
            for key, v in reversed(list(item.items())):
                shown = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", key)
                name = f"{where}.{shown}" if where else shown
                stack += [(name, v), (name, key)]
    return None


def replace_lone_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (and keys) replaced by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [replace_lone_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {replace_lone_surrogates(k): replace_lone_surrogates(v) for k, v in value.items()}
    return value
