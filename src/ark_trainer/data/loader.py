"""Load and validate training data (JSONL) in the shapes users bring.

One sample per line. The prompt is ``prompt`` (text or a chat list), ``question`` (text) or ``messages``
(an OpenAI chat list; a trailing assistant turn becomes a candidate answer). Optional: ``candidates`` /
``answers`` (list of strings), ``chosen`` / ``rejected``, ``reference`` / ``label``. Every other key is
kept as a column and reaches the reward functions as a keyword argument, as in TRL.

For an agent run (``--env``) a candidate may also be an **episode**: the chat messages after the prompt
(``assistant`` turns with optional OpenAI ``tool_calls``, and ``tool`` results), which RFT replays through
the environment and scores with the samples (``stages/agent/rft.py``). Without ``--env`` such a row is refused
(:func:`episode_candidate_problems`).

The whole file is checked before anything heavy runs, and every problem is reported in one pass as
``path:line: field: message``. Every known field is checked for its JSON type and refused when it is
wrong, never reinterpreted (``{"messages": "hello"}`` is an error, not a one-turn chat); a key given twice
in one object is refused (JSON parsers silently keep the last one); nesting deeper than ``MAX_DEPTH``
levels is refused before it can exhaust Python's recursion limit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import jsonl_byte_lines
from ark_trainer.data.files import check_data_file, read_data_bytes
from ark_trainer.data.text import first_lone_surrogate, is_blank

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
_BLANK = " (only whitespace or invisible characters); write the text or drop the row"
_JSON_TYPES = {str: "string", int: "number", float: "number", bool: "boolean", list: "list", dict: "object"}
MAX_DEPTH = 64  # lists/objects inside one row; real rows need a handful, Python's own limit is ~1000
# Known scalar columns and the JSON types they may hold (null is always allowed).
SCALAR_TYPES = {
    "reference": (str, int, float, bool),
    "label": (str, int, float, bool, dict),
}


class _Problems:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.items: list[str] = []

    def add(self, line: int, field: str, message: str) -> None:
        self.items.append(f"{self.path}:{line}: {field}: {message}")


def json_objects(path: Path, problems: _Problems, flag: str = "--data_path"):
    """Yield ``(line number, object)`` for each JSON object line of ``path``; bad lines go to ``problems``.

    Decoded line by line so that every non-UTF-8 line is reported with its number, with the others;
    a UTF-8 byte-order mark (Windows editors write one) is dropped rather than refused.
    """
    for lineno, raw_line in enumerate(jsonl_byte_lines(read_data_bytes(path, flag)), start=1):
        try:
            line = raw_line.decode("utf-8-sig" if lineno == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            problems.add(lineno, "encoding", f"not UTF-8 text ({exc.reason}); save the file as UTF-8")
            continue
        if not line.strip():
            continue
        raw = _parse_line(line, lineno, problems)
        if raw is not None:
            yield lineno, raw


def _parse_line(line: str, lineno: int, problems: _Problems) -> dict | None:
    """One JSON object, or ``None`` after recording why not (bad JSON, duplicate key, too deep)."""
    duplicates: list[str] = []
    try:
        raw = json.loads(line, object_pairs_hook=_pairs_hook(duplicates), parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        problems.add(lineno, "json", f"not valid JSON ({exc.msg} at column {exc.colno}); one object per line")
        return None
    except RecursionError:
        problems.add(lineno, "json", f"nested too deeply (over {MAX_DEPTH} levels); flatten the row")
        return None
    except ValueError as exc:  # NaN/Infinity, or an integer of more than 4,300 digits
        problems.add(lineno, "json", f"not valid JSON ({str(exc).split(';')[0]}); use finite numbers")
        return None
    if duplicates:
        for key in dict.fromkeys(duplicates):
            problems.add(lineno, key, "key given twice in one object (JSON keeps only the last); keep one")
        return None
    if not isinstance(raw, dict):
        problems.add(lineno, "json", f"expected a JSON object, got {type(raw).__name__}")
        return None
    if _depth(raw) > MAX_DEPTH:
        problems.add(lineno, "json", f"nested too deeply (over {MAX_DEPTH} levels); flatten the row")
        return None
    bad = first_lone_surrogate(raw)
    if bad is not None:
        problems.add(lineno, bad[0] or "json", f"holds a lone surrogate ({bad[1]}), which is not a character "
                     "(UTF-8 cannot encode it); remove it or write the full surrogate pair")  # fmt: skip
        return None
    return raw


def _pairs_hook(duplicates: list[str]):
    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                duplicates.append(key)
            out[key] = value
        return out

    return build


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _depth(value: Any) -> int:
    """Nesting depth of lists/objects, without recursion (a deep value must not overflow the stack)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            if level <= MAX_DEPTH:
                children = item.values() if isinstance(item, dict) else item
                stack.extend((child, level + 1) for child in children)
    return deepest


def load_jsonl(path: str | Path, flag: str = "--data_path") -> list[dict[str, Any]]:
    """Read, validate and normalise a JSONL file; raise :class:`UserError` listing every problem."""
    path = check_data_file(path, flag)
    problems = _Problems(path)
    rows: list[dict[str, Any]] = []
    column_types: dict[str, tuple[str, int]] = {}
    for lineno, raw in json_objects(path, problems, flag):
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
        if is_blank(candidates[-1]):
            problems.add(line, f"messages[{len(prompt)}].content", f"empty answer{_BLANK}")
        if not prompt:
            problems.add(line, "messages", "holds only an assistant turn; add the user turn before it")
    if "completion" in raw:  # TRL's prompt-completion shape: the completion is one more candidate
        text = _answer_text(raw["completion"], "completion", line, problems)
        candidates += [text] if text is not None else []
    for name in ("candidates", "answers"):
        if name in raw:
            candidates += _candidate_list(raw[name], name, line, problems)
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
        _check_scalar(name, value, line, problems)
        if name in ("label", "reference") and isinstance(value, str) and is_blank(value):
            problems.add(
                line, name, "empty text (only whitespace or invisible characters); write it, or null for none"
            )
        row[name] = value
    return row if len(problems.items) == n_before else None


def _kind(value: Any) -> str:
    return "null" if value is None else _JSON_TYPES.get(type(value), type(value).__name__)


def _check_scalar(name: str, value: Any, line: int, problems: _Problems) -> None:
    allowed = SCALAR_TYPES.get(name)
    if allowed and value is not None and not isinstance(value, allowed):
        kinds = " or ".join(dict.fromkeys(_JSON_TYPES[t] for t in allowed))
        problems.add(line, name, f"expected {kinds}, got {_kind(value)}")


def _prompt_messages(value: Any, key: str, line: int, problems: _Problems) -> list[dict[str, str]]:
    if isinstance(value, str) and key != "messages":
        if is_blank(value):
            problems.add(line, key, f"empty text{_BLANK}")
        return [{"role": "user", "content": value}]
    if key == "question":
        problems.add(line, key, f"expected text, got {_kind(value)}")
        return []
    if not isinstance(value, list) or not value:
        what = "a non-empty list" if key == "messages" else "text or a non-empty list"
        problems.add(line, key, f"expected {what} of {{role, content}} messages, got {_kind(value)}")
        return []
    messages = []
    for i, msg in enumerate(value):
        checked = _message(msg, f"{key}[{i}]", line, problems)
        if checked is not None:
            messages.append(checked)
    if messages and not any(m["role"] == "user" for m in messages):
        problems.add(line, key, "no user turn")
    return messages


def _message(msg: Any, where: str, line: int, problems: _Problems) -> dict[str, str] | None:
    """One ``{role, content}`` chat message with a known role and text content, or ``None`` (reported)."""
    if not isinstance(msg, dict) or "role" not in msg or "content" not in msg:
        problems.add(line, where, f"expected an object with 'role' and 'content', got {_kind(msg)}")
        return None
    role, content = msg["role"], msg["content"]
    ok = isinstance(role, str) and role in ROLES
    if not ok:
        shown = repr(role) if isinstance(role, str) else f"a {_kind(role)}"
        problems.add(line, f"{where}.role", f"unknown role {shown}; use {', '.join(sorted(ROLES))}")
    if not isinstance(content, str):
        problems.add(line, f"{where}.content", f"expected text, got {_kind(content)}")
        return None
    if ok and role == "user" and is_blank(content):
        problems.add(line, f"{where}.content", f"empty user turn{_BLANK}")
    return {"role": role, "content": content} if ok else None


def _string_list(value: Any, name: str, line: int, problems: _Problems) -> list[str]:
    if not isinstance(value, list):
        problems.add(line, name, f"expected a list of strings, got {_kind(value)}")
        return []
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, str):
            problems.add(line, f"{name}[{i}]", f"expected text, got {_kind(item)}")
        elif is_blank(item):
            problems.add(line, f"{name}[{i}]", f"expected non-empty text{_BLANK}")
        else:
            out.append(item)
    return out


def _candidate_list(value: Any, name: str, line: int, problems: _Problems) -> list:
    """Candidates: texts, or episodes (lists of messages) for an agent run."""
    if not isinstance(value, list) or not all(isinstance(item, list) for item in value):
        return _string_list(value, name, line, problems)
    episodes = [_episode(item, f"{name}[{i}]", line, problems) for i, item in enumerate(value)]
    return [e for e in episodes if e]


def _episode(value: list, where: str, line: int, problems: _Problems) -> list[dict[str, Any]]:
    """A candidate episode: assistant turns (text and/or ``tool_calls``) and tool results, assistant first."""
    if not value or not isinstance(value[0], dict) or value[0].get("role") != "assistant":
        problems.add(line, where, "an episode is a list of messages that starts with an assistant turn")
        return []
    out = []
    for i, msg in enumerate(value):
        if isinstance(msg, dict) and msg.get("tool_calls") and msg.get("content") is None:
            msg = {**msg, "content": ""}  # OpenAI's shape: a turn that only calls tools has no content
        checked = _message(msg, f"{where}[{i}]", line, problems)
        if checked is None:
            continue
        if checked["role"] not in ("assistant", "tool"):
            problems.add(line, f"{where}[{i}].role", "an episode holds assistant and tool turns only")
            continue
        calls = msg.get("tool_calls")
        if calls is not None and not _tool_calls_ok(calls):
            problems.add(
                line,
                f"{where}[{i}].tool_calls",
                'expected a list of {"function": {"name": text, "arguments": object}} calls',
            )
            continue
        out.append({**checked, **({"tool_calls": calls} if calls else {}), **_tool_name(msg)})
    return out


def _tool_calls_ok(calls: Any) -> bool:
    if not isinstance(calls, list):
        return False
    fns = [c.get("function", c) if isinstance(c, dict) else None for c in calls]
    return all(isinstance(f, dict) and isinstance(f.get("name"), str) and _arguments_ok(f) for f in fns)


def _arguments_ok(fn: dict) -> bool:
    """A call's ``arguments``: an object, or OpenAI's JSON text of one."""
    args = fn.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return False
    return isinstance(args, dict)


def _tool_name(msg: dict) -> dict[str, str]:
    return {"name": msg["name"]} if msg.get("role") == "tool" and isinstance(msg.get("name"), str) else {}


def episode_candidate_problems(rows: list[dict], path: str) -> list[str]:
    """One line per row whose candidates hold an episode: only an agent run (``--env``) can replay it."""
    lines = [
        row.get("_line", "?") for row in rows if any(isinstance(c, list) for c in row.get("candidates", []))
    ]
    if not lines:
        return []
    more = f" ({len(lines)} rows hold one)" if len(lines) > 1 else ""
    return [
        f"{path}:{lines[0]}: candidates: an episode (a list of messages) is a candidate of an agent run "
        f"only{more}; give --env, or write the answers as text"
    ]


def _answer_text(value: Any, name: str, line: int, problems: _Problems) -> str | None:
    """An answer: text, or a list of chat messages whose contents are joined (TRL's conversational form)."""
    if isinstance(value, list) and value:
        parts = [_message(m, f"{name}[{i}]", line, problems) for i, m in enumerate(value)]
        if any(p is None for p in parts):
            return None
        value = "".join(p["content"] for p in parts if p)
    if not isinstance(value, str) or is_blank(value):
        got = _BLANK if isinstance(value, str | list) else f", got {_kind(value)}"
        problems.add(line, name, f"expected non-empty text{got}")
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
    if _is_dir(p):
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
    return check_data_file(p, "--eval_dataset")


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a name too long, no permission: check_data_file says which
        return False
