"""The live-loop demo's simulated users: sessions with the served agent, over HTTP or through OpenClaw.

A session is one pool question and the user's feedback on the answer (``app/demo/loop_scenario.py``: thanks,
a correction, or a poisoner's bad correction), then the agent's reply to that feedback: two requests.

- **HTTP** (most sessions): each request goes straight to the loop's OpenAI-compatible server in OpenClaw's
  exact request shape, the one recorded from a real ``openclaw agent --local`` turn and shipped with the
  package (``services/openclaw/openclaw_turn.json``: its ~39k-character system prompt, its tool schemas, the user's
  message wrapped as OpenClaw wraps it, its internal-context note; streamed, ``max_completion_tokens`` =
  the deployment's reply budget, as OpenClaw's provider entry says). A follow-up carries the history as
  OpenClaw sends it: the first message with its runtime note, the answer, the new message with the date
  prefix only, and a fresh internal-context note.
- **OpenClaw** (a stated share): the real CLI, ``openclaw agent --local --session-id S --message M``, with
  the OpenClaw state the loop deployed into (isolated in the demo's folder).

Every request is timed and marked with whether a round was training when it started or ended
(``LOOP/state.json``), so the report can set the turn latency while a round trains beside the idle one.
"""

from __future__ import annotations

import json
import random
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ark_trainer.app.demo.loop_scenario import feedback
from ark_trainer.base.fileio import read_json
from ark_trainer.services.deploy.policy import RUNTIME_NOTE


@dataclass
class Request:
    """One timed request: its route (``http`` or ``openclaw``), seconds, success, and whether a round was
    training when it started or ended."""

    route: str
    seconds: float
    ok: bool
    training: bool
    at: float
    error: str = ""


@dataclass
class Session:
    question_id: str
    label: str
    route: str
    phase: int  # the round this session's turns go to (the loop's next round when it started)
    said: str  # thanks, correction, or a poison kind
    right: bool
    answer: str = ""


@dataclass
class Ledger:
    """What the users did, shared by their threads."""

    requests: list[Request] = field(default_factory=list)
    sessions: list[Session] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, item: Request | Session) -> None:
        with self.lock:
            (self.requests if isinstance(item, Request) else self.sessions).append(item)  # type: ignore[arg-type]

    def to_json(self) -> dict:
        with self.lock:
            return {
                "requests": [asdict(r) for r in self.requests],
                "sessions": [asdict(s) for s in self.sessions],
            }


def loop_state(loop: Path) -> dict:
    try:
        return read_json(loop / "state.json")
    except (OSError, ValueError):
        return {}


def training_now(loop: Path) -> bool:
    return bool(loop_state(loop).get("training"))


class HttpAgent:
    """Requests to the loop's server in OpenClaw's recorded shape."""

    def __init__(self, record: dict, shape: dict) -> None:
        self.url = f"http://127.0.0.1:{record['port']}/v1/chat/completions"
        self.key = Path(record["api_key_file"]).read_text(encoding="utf-8").strip()
        self.model, self.reply_tokens, self.shape = record["name"], int(record["reply_tokens"]), shape

    def body(self, history: list[dict], message: str) -> dict:
        from ark_trainer.services.openclaw.shape import turn_request

        body = turn_request(self.shape, message, self.model)
        system, current = body["messages"][0], body["messages"][1:]
        if history:  # a follow-up: the date prefix only; the runtime note stays under the first message
            current = [{**current[0], "content": RUNTIME_NOTE.sub("", current[0]["content"])}, *current[1:]]
        body["messages"] = [system, *history, *current]
        body["max_completion_tokens"] = self.reply_tokens
        return body

    def chat(self, body: dict, timeout: float = 300) -> str:
        req = urllib.request.Request(
            self.url, data=json.dumps(body).encode(), method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.key}"},
        )  # fmt: skip
        text = []
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            for raw in resp:
                line = raw.decode("utf-8").strip()
                if line.startswith("data:") and line != "data: [DONE]":
                    for choice in json.loads(line[5:]).get("choices") or []:
                        text.append((choice.get("delta") or {}).get("content") or "")
        return "".join(text)


def _timed(ledger: Ledger, loop: Path, route: str, call) -> str | None:
    busy, started = training_now(loop), time.time()
    try:
        out = call()
    except Exception as exc:  # noqa: BLE001 - a failed request is a figure of the run, not its end
        ledger.add(
            Request(route, time.time() - started, False, busy or training_now(loop), started, str(exc)[:200])
        )
        return None
    ledger.add(Request(route, time.time() - started, True, busy or training_now(loop), started))
    return out


def http_session(agent: HttpAgent, row: dict, poison: str | None, phase: int, loop: Path, ledger: Ledger,
                 rng: random.Random) -> None:  # fmt: skip
    """One session straight to the server: the question, the user's feedback, the agent's reply to it."""
    first = agent.body([], row["question"])
    answer = _timed(ledger, loop, "http", lambda: agent.chat(first))
    if answer is None:
        return
    message, said = feedback(row, answer, poison, rng)
    history = [first["messages"][1], {"role": "assistant", "content": answer}]
    _timed(ledger, loop, "http", lambda: agent.chat(agent.body(history, message)))
    ledger.add(Session(row["id"], row["label"], "http", phase, said, said == "thanks", answer))


def openclaw_session(env: dict, row: dict, poison: str | None, phase: int, loop: Path, ledger: Ledger,
                     rng: random.Random, session_id: str) -> None:  # fmt: skip
    """One session through the real ``openclaw agent --local`` (two agent turns)."""
    from ark_trainer.base.external import openclaw_cli

    def turn(message: str) -> str:
        args = [
            "agent",
            "--local",
            "--json",
            "--timeout",
            "200",
            "--session-id",
            session_id,
            "--message",
            message,
        ]
        out = openclaw_cli.run_json(args, timeout=260, env=env)
        return "".join(p.get("text") or "" for p in out.get("payloads") or []).strip()

    answer = _timed(ledger, loop, "openclaw", lambda: turn(row["question"]))
    if answer is None:
        return
    message, said = feedback(row, answer, poison, rng)
    _timed(ledger, loop, "openclaw", lambda: turn(message))
    ledger.add(Session(row["id"], row["label"], "openclaw", phase, said, said == "thanks", answer))
