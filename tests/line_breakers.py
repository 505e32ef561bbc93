"""The characters that break a line for someone, for the tests of every JSONL reader and writer.

JSON Lines are read by ``"\\n"`` only, everywhere, and written so that any line splitter sees one record.
``str.splitlines`` also breaks at U+2028, U+2029, U+0085 (legal raw inside a JSON string), ``\\r``,
``\\v``, ``\\f`` and ``\\x1c``-``\\x1e`` (which ``json.dumps`` escapes, but a hand-written file may hold); one
such character in a recorded turn once hid every later turn from the live loop. Every reader of a JSONL
file is checked with each of them inside a value, in the raw form an older writer (or another program)
leaves on disk (``raw_line``, ``write_raw``).
"""

from __future__ import annotations

import json
from pathlib import Path

# raw-legal inside a JSON string (json.dumps(ensure_ascii=False) leaves them raw)
RAW_LEGAL = ["\u2028", "\u2029", "\x85"]
# control characters: json.dumps escapes them; raw, they make a line invalid JSON (but must not split it)
CONTROLS = ["\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"]
SEPARATORS = RAW_LEGAL + CONTROLS
IDS = [f"U+{ord(c):04X}" for c in SEPARATORS]


def raw_line(value: dict) -> str:
    """What an older writer (``json.dumps(ensure_ascii=False)``) put on disk: U+2028 and co. left raw."""
    return json.dumps(value, ensure_ascii=False) + "\n"


def records(sep: str, n: int = 5) -> list[dict]:
    return [{"event": "x", "i": i, "text": f"before{sep}after {i}"} for i in range(n)]


def write_raw(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes("".join(raw_line(r) for r in rows).encode("utf-8"))
