"""Load and validate training data (JSONL) in the shapes users bring.

One sample per line. The prompt is ``prompt`` (text or a chat list), ``question`` (text) or ``messages``
(an OpenAI chat list; a trailing assistant turn becomes a candidate answer). Optional: ``candidates`` /
``answers`` (list of strings), ``chosen`` / ``rejected``, ``reference`` / ``label``. Every other key is
kept as a column and reaches the reward functions as a keyword argument, as in TRL.

The whole file is checked before anything heavy runs, and every problem is reported in one pass as
``path:line: field: message``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ark_trainer.errors import UserError

PROMPT_KEYS = ("prompt", "question", "messages")
ROLES = {"system", "user", "assistant", "tool", "developer"}
# Names TRL passes to reward functions itself; a column with one of them would be shadowed.
RESERVED = {
    "prompts",
    "completions",
    "completion_ids",
    "trainer_state",
    "log_extra",
    "log_metric",
}
_JSON_TYPES = {str: "string", int: "number", float: "number", bool: "boolean", list: "list", dict: "object"}


class _Problems:
    def __init__(self, path: Path) -> None:
        self.path, self.items = path, []

    def add(self, line: int, field: str, message: str) -> None:
        self.items.append(f"{self.path}:{line}: {field}: {message}")


def json_objects(path: Path, problems: _Problems):
    """Yield ``(line number, object)`` for each JSON object line of ``path``; bad lines go to ``problems``.

    Decoded line by line so that every non-UTF-8 line is reported with its number, with the others;
    a UTF-8 byte-order mark (Windows editors write one) is dropped rather than refused.
    """
    for lineno, raw_line in enumerate(path.read_bytes().splitlines(), start=1):
        try:
            line = raw_line.decode("utf-8-sig" if lineno == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            problems.add(lineno, "encoding", f"not UTF-8 text ({exc.reason}); save the file as UTF-8")
            continue
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.add(
                lineno, "json", f"not valid JSON ({exc.msg} at column {exc.colno}); one object per line"
            )
            continue
        if not isinstance(raw, dict):
            problems.add(lineno, "json", f"expected a JSON object, got {type(raw).__name__}")
            continue
        yield lineno, raw


def load_jsonl(path: str | Path, flag: str = "--data_path") -> list[dict[str, Any]]:
    """Read, validate and normalise a JSONL file; raise :class:`UserError` listing every problem."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{flag}: no such file {str(path)!r}; give the path of a .jsonl file")
    problems = _Problems(path)
    rows: list[dict[str, Any]] = []
    column_types: dict[str, tuple[str, int]] = {}
    for lineno, raw in json_objects(path, problems):
        row = _normalise(raw, lineno, problems)
        if row is not None:
            _check_column_types(row, lineno, problems, column_types)
            row["_line"] = lineno
            rows.append(row)
    if not rows and not problems.items:
        problems.items.append(f"{path}: no samples; the file is empty")
    if problems.items:
        raise UserError(*problems.items)
    return rows


def _normalise(raw: dict[str, Any], line: int, problems: _Problems) -> dict[str, Any] | None:
    n_before = len(problems.items)
    present = [k for k in PROMPT_KEYS if k in raw]
    if not present:
        problems.add(line, "prompt", "missing; give 'prompt' or 'question' (text) or 'messages' (chat list)")
        return None
    if len(present) > 1:
        problems.add(line, present[1], f"give only one of {', '.join(present)}")
        return None
    key = present[0]
    candidates: list[str] = []
    prompt = _prompt_messages(raw[key], key, line, problems)
    if prompt and key == "messages" and prompt[-1]["role"] == "assistant":
        candidates.append(prompt.pop()["content"])
        if not prompt:
            problems.add(line, "messages", "holds only an assistant turn; add the user turn before it")
    if "completion" in raw:  # TRL's prompt-completion shape: the completion is one more candidate
        text = _answer_text(raw["completion"], "completion", line, problems)
        candidates += [text] if text is not None else []
    for name in ("candidates", "answers"):
        if name in raw:
            candidates += _string_list(raw[name], name, line, problems)
    row: dict[str, Any] = {"prompt": prompt, "candidates": candidates}
    for name in ("chosen", "rejected"):
        if name in raw and raw[name] is not None:
            row[name] = _answer_text(raw[name], name, line, problems)
    for name, value in raw.items():
        if name in (*PROMPT_KEYS, "completion", "candidates", "answers", "chosen", "rejected"):
            continue
        if name in RESERVED or name.startswith("_"):
            problems.add(line, name, "reserved column name (TRL uses it); rename the column")
            continue
        row[name] = value
    return row if len(problems.items) == n_before else None


def _prompt_messages(value: Any, key: str, line: int, problems: _Problems) -> list[dict[str, str]]:
    if isinstance(value, str):
        if not value.strip():
            problems.add(line, key, "empty text")
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        problems.add(line, key, "expected text or a non-empty list of {role, content} messages")
        return []
    messages = []
    for i, msg in enumerate(value):
        where = f"{key}[{i}]"
        if not isinstance(msg, dict) or "role" not in msg or "content" not in msg:
            problems.add(line, where, "expected an object with 'role' and 'content'")
            continue
        if msg["role"] not in ROLES:
            problems.add(
                line, f"{where}.role", f"unknown role {msg['role']!r}; use {', '.join(sorted(ROLES))}"
            )
        if not isinstance(msg["content"], str):
            problems.add(line, f"{where}.content", "expected text")
            continue
        messages.append({"role": msg["role"], "content": msg["content"]})
    if messages and not any(m["role"] == "user" for m in messages):
        problems.add(line, key, "no user turn")
    return messages


def _string_list(value: Any, name: str, line: int, problems: _Problems) -> list[str]:
    if not isinstance(value, list):
        problems.add(line, name, f"expected a list of strings, got {type(value).__name__}")
        return []
    out = []
    for i, item in enumerate(value):
        text = _answer_text(item, f"{name}[{i}]", line, problems)
        if text is not None:
            out.append(text)
    return out


def _answer_text(value: Any, name: str, line: int, problems: _Problems) -> str | None:
    if isinstance(value, list) and value and all(isinstance(m, dict) for m in value):
        value = "".join(str(m.get("content", "")) for m in value)
    if not isinstance(value, str) or not value.strip():
        problems.add(line, name, "expected non-empty text")
        return None
    return value


def _check_column_types(row: dict, line: int, problems: _Problems, seen: dict[str, tuple[str, int]]) -> None:
    """A column must keep one JSON type across the file (nulls allowed), or Arrow cannot hold it."""
    for name, value in row.items():
        if name in ("prompt", "candidates") or value is None:
            continue
        kind = _JSON_TYPES.get(type(value), type(value).__name__)
        first = seen.setdefault(name, (kind, line))
        if first[0] != kind:
            problems.add(line, name, f"is a {kind} here but a {first[0]} on line {first[1]}; use one type")


def resolve_eval_path(path: str) -> Path:
    """``--eval_dataset`` may be a JSONL file or a folder holding eval.jsonl / test.jsonl / one .jsonl file."""
    p = Path(path)
    if p.is_dir():
        for name in ("eval.jsonl", "test.jsonl", "validation.jsonl", "dev.jsonl"):
            if (p / name).is_file():
                return p / name
        found = sorted(p.glob("*.jsonl"))
        if len(found) == 1:
            return found[0]
        raise UserError(
            f"--eval_dataset: {path!r} is a folder without eval.jsonl or test.jsonl "
            f"({len(found)} .jsonl files); point at the file"
        )
    if not p.is_file():
        raise UserError(f"--eval_dataset: no such file or folder {path!r}")
    return p
