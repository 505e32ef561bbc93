"""Turn an OpenClaw agent's own conversations into training JSONL: ``ark-trainer data collect --openclaw``.

Sources: ``openclaw sessions --json`` lists the sessions in OpenClaw's store; each is exported with
``openclaw sessions export-trajectory --session-key K --json`` into a temporary workspace (the bundle
holds unscrubbed text, so it is deleted afterwards); its ``session-branch.json`` (the message tree's
current branch) and ``events.jsonl`` (``context.compiled``: the system prompt each run used) are read.
Legacy transcripts (``<state>/agents/<id>/sessions/*.jsonl``: a ``{"type": "session"}`` header line,
then one entry per line, the same entries as ``session-branch.json``) are read directly.

One row per assistant message: ``messages`` = system prompt (when the export holds it whole) + the
conversation before it + the assistant message (the candidate answer, as ``load_jsonl`` reads it).
Tool calls stay in the text as the chat template writes them (``<tool_call>\n{"name": …,
"arguments": …}\n</tool_call>`` after the content, :mod:`ark_trainer.stages.agent.toolcall`) and in a
``tool_calls`` column; tool results are ``tool`` turns. Each row trains its last assistant message as the
completion (the loss on it only), so the assistant turns of a session are trained one row each and no
user turn or tool result is ever a target. Columns: session_id, session_key, agent_id,
turn, model, timestamp, source, system_prompt_included, tool_calls. Every string, the session columns
included, is scrubbed (:mod:`ark_trainer.data.scrub`) before anything is written. A transcript line
that is not JSON (the torn last line of a session OpenClaw is still writing) is skipped and counted.
"""

from __future__ import annotations

import json
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ark_trainer.base.errors import UserError
from ark_trainer.base.external import openclaw_cli as cli
from ark_trainer.base.fileio import (
    MAX_LINES_BYTES,
    atomic_write_text,
    json_line,
    jsonl_byte_lines,
    read_bounded,
    read_json,
)
from ark_trainer.data.scrub import Scrubber


@dataclass
class Session:
    key: str
    session_id: str
    agent_id: str
    entries: list[dict]
    system_prompts: dict[str, str | None] = field(default_factory=dict)  # runId -> prompt (None: cut)
    source: str = "trajectory"


def parse_since(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError as exc:
        raise UserError(f"--since: {text!r} is not a date; use YYYY-MM-DD or an ISO time") from exc
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _ms(value) -> datetime | None:
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value / 1000, tz=UTC)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


def list_sessions(agent: str | None) -> list[dict]:
    args = ["sessions", "--json", "--limit", "all"] + (["--agent", agent] if agent else [])
    data = cli.run_json(args, timeout=120)
    return data.get("sessions") or []


def export_session(meta: dict, agent: str | None, workdir: Path) -> Session:
    """Export one session with the real CLI and read its bundle."""
    name = "s" + "".join(c if c.isalnum() else "_" for c in meta["key"])[:80]
    args = ["sessions", "export-trajectory", "--session-key", meta["key"], "--json"]
    args += ["--workspace", str(workdir), "--output", name] + (["--agent", agent] if agent else [])
    out = Path(cli.run_json(args, timeout=180)["outputDir"])
    branch = read_json(out / "session-branch.json")
    prompts: dict[str, str | None] = {}
    events = out / "events.jsonl"
    for event in read_jsonl_objects(events)[0] if events.is_file() else []:
        if event.get("type") == "context.compiled":
            prompt = (event.get("data") or {}).get("systemPrompt")
            prompts[event.get("runId", "")] = prompt if isinstance(prompt, str) else None
    return Session(
        key=meta["key"],
        session_id=meta.get("sessionId") or branch.get("header", {}).get("id", ""),
        agent_id=meta.get("agentId") or agent or "",
        entries=branch.get("entries") or [],
        system_prompts=prompts,
    )


def read_jsonl_objects(path: Path) -> tuple[list[dict], int]:
    """The JSON objects of a JSONL file and how many lines were not one.

    A transcript OpenClaw is still writing ends in a torn line (cut mid-object, maybe mid-character);
    that line is skipped and counted, not a crash, and the rest of the session is kept.
    """
    objects, bad = [], 0
    for raw in jsonl_byte_lines(read_bounded(path, MAX_LINES_BYTES, "a session file")):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            value = None
        if isinstance(value, dict):
            objects.append(value)
        else:
            bad += 1
    return objects, bad


def legacy_sessions(agent: str | None, skipped_lines: dict[str, int] | None = None) -> list[Session]:
    """Transcripts older OpenClaw versions wrote as ``agents/<id>/sessions/*.jsonl``.

    Unreadable lines (a torn last line) are counted per file in ``skipped_lines``.
    """
    root = cli.state_dir() / "agents"
    agents = [agent] if agent else sorted(p.name for p in root.glob("*") if p.is_dir())
    found = []
    for agent_id in agents:
        for path in sorted((root / agent_id / "sessions").glob("*.jsonl")):
            lines, bad = read_jsonl_objects(path)
            if bad and skipped_lines is not None:
                skipped_lines[str(path)] = bad
            header = lines[0] if lines and lines[0].get("type") == "session" else {}
            entries = lines[1:] if header else lines
            session_id = header.get("id") or path.stem
            found.append(
                Session(f"legacy:{agent_id}:{path.stem}", session_id, agent_id, entries, source="legacy")
            )
    return found


def _branch(entries: list[dict]) -> list[dict]:
    """The current branch: from the last entry up through ``parentId`` (entries without ids: in order)."""
    by_id = {e["id"]: e for e in entries if e.get("id")}
    if not entries or len(by_id) != len(entries):
        return entries
    chain: list[dict] = []
    node: dict | None = entries[-1]
    while node is not None:
        chain.append(node)
        node = by_id.get(node.get("parentId"))
    return chain[::-1]


def _text(content) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for part in content or []:
        if part.get("type") == "text":
            parts.append(part.get("text", ""))
        elif part.get("type") == "image":
            parts.append("[image]")
    return "\n".join(p for p in parts if p)


def _arguments(value) -> dict:
    """A tool call's arguments as an object (OpenClaw stores an object; a JSON string is decoded)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {"input": value}
    return value if isinstance(value, dict) else {}


def _assistant(content) -> tuple[str, list[dict]]:
    """An assistant message's text, its tool calls written as the chat template writes them, and the calls.

    The text is what ``AGENT_CHAT_TEMPLATE`` (and Qwen's) renders for ``{"content": c, "tool_calls": …}``:
    the content, then each call as a ``<tool_call>`` block (:func:`ark_trainer.stages.agent.toolcall.format_tool_calls`),
    so a row trains the model to write exactly what the model server parses back into ``tool_calls``.
    """
    from ark_trainer.base.chat.toolcall import format_tool_calls

    if isinstance(content, str):
        return content, []
    texts, calls = [], []
    for part in content or []:
        if part.get("type") == "text" and part.get("text"):
            texts.append(part["text"])
        elif part.get("type") == "toolCall":
            call = {"name": part.get("name", ""), "arguments": _arguments(part.get("arguments"))}
            calls.append(
                {"name": call["name"], "arguments": json.dumps(call["arguments"], ensure_ascii=False)}
            )
    blocks = format_tool_calls(calls) if calls else ""
    return "\n".join(t for t in ("\n".join(texts), blocks) if t), calls


def session_rows(session: Session, since: datetime | None, scrubber: Scrubber) -> list[dict]:
    """Training rows for one session (one per assistant message), scrubbed."""
    history: list[dict] = []
    rows = []
    for entry in _branch(session.entries):
        msg = entry.get("message") if entry.get("type", "message") == "message" else None
        if not isinstance(msg, dict):
            continue
        role = msg.get("role")
        if role == "user":
            history.append({"role": "user", "content": scrubber.text(_text(msg.get("content")))})
        elif role in ("toolResult", "tool"):
            history.append({"role": "tool", "content": scrubber.text(_text(msg.get("content")))})
        elif role == "assistant":
            text, calls = _assistant(msg.get("content"))
            text, calls = scrubber.text(text), scrubber.value(calls)
            when = _ms(msg.get("timestamp")) or _ms(entry.get("timestamp"))
            fresh = since is None or (when is not None and when >= since)
            if text.strip() and fresh and any(m["role"] == "user" for m in history):
                rows.append(_row(session, msg, history, text, calls, when, scrubber))
            if text.strip():
                history.append({"role": "assistant", "content": text})
    return rows


def _row(session: Session, msg: dict, history: list[dict], text: str, calls, when, scrubber) -> dict:
    run_id = (msg.get("__openclaw") or {}).get("runId", "")
    system = session.system_prompts.get(run_id)
    prefix = [{"role": "system", "content": scrubber.text(system)}] if system else []
    provider, model = msg.get("provider"), msg.get("model")
    model_name = f"{provider}/{model}" if provider and model else (model or "")
    return {
        "messages": prefix + list(history) + [{"role": "assistant", "content": text}],
        # Channel session keys hold the peer's phone number or e-mail ("agent:main:whatsapp:+86138…"):
        # every column is scrubbed, not only the messages.
        "session_id": scrubber.text(session.session_id),
        "session_key": scrubber.text(session.key),
        "agent_id": scrubber.text(session.agent_id),
        "turn": len(history),
        "model": scrubber.text(str(model_name)),
        "timestamp": when.isoformat() if when else "",
        "source": session.source,
        "system_prompt_included": bool(system),
        "tool_calls": calls,
    }


@dataclass
class CollectResult:
    rows: list[dict]
    sessions: int
    legacy: int
    scrubbed: dict[str, int]
    skipped: list[str] = field(default_factory=list)  # "KEY: why" for sessions that could not be exported
    torn: dict[str, int] = field(default_factory=dict)  # transcript path -> unreadable lines skipped


def collect(agent: str | None = None, since: str | None = None) -> CollectResult:
    """Sessions from the CLI (when installed) plus legacy files, as scrubbed training rows."""
    start = parse_since(since)
    scrubber = Scrubber()
    sessions: list[Session] = []
    skipped: list[str] = []
    if cli.find_openclaw() is not None:
        metas = [
            m for m in list_sessions(agent) if start is None or (_ms(m.get("updatedAt")) or start) >= start
        ]
        with tempfile.TemporaryDirectory(prefix="ark-collect-") as tmp, ThreadPoolExecutor(4) as pool:
            for meta, got in zip(
                metas, pool.map(lambda m: _try_export(m, agent, Path(tmp)), metas), strict=True
            ):
                if isinstance(got, Session):
                    sessions.append(got)
                else:
                    skipped.append(f"{meta['key']}: {got}")
    torn: dict[str, int] = {}
    legacy = legacy_sessions(agent, torn)
    known = {s.session_id for s in sessions}
    legacy = [s for s in legacy if s.session_id not in known]
    rows = [row for s in sessions + legacy for row in session_rows(s, start, scrubber)]
    return CollectResult(rows, len(sessions), len(legacy), dict(scrubber.counts), skipped, torn)


def _try_export(meta: dict, agent: str | None, workdir: Path) -> Session | str:
    """One session's export, or why it failed (one bad session does not stop the others)."""
    try:
        return export_session(meta, agent, workdir)
    except (cli.OpenClawError, OSError, ValueError, KeyError) as exc:
        return str(exc)


def write_rows(rows: list[dict], out: Path) -> None:
    """Write the JSONL only if ``train``'s own validation accepts it (checked on a temp copy first)."""
    from ark_trainer.data.loader import load_jsonl

    text = "".join(json_line(r) for r in rows)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".check.jsonl", dir=out.parent)
    os.close(fd)
    try:
        Path(tmp).write_text(text, encoding="utf-8")
        load_jsonl(tmp, "-o")
    finally:
        Path(tmp).unlink(missing_ok=True)
    atomic_write_text(out, text)
