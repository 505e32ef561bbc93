"""What an episode did, read back from its messages: tool calls, results, turns, invalid calls, final answer.

One reading for every source of episodes: our rollout (``stages/agent/rollout.py``), TRL's GRPO tool loop (its
completions are the same message lists: assistant turns with ``tool_calls``, then ``tool`` messages) and a
plain text answer (``ark-trainer score`` on a data file: one turn, tool calls parsed from the text). The
episode graders (``rewards/episode.py``) and the agent metrics of the evaluation read it, so a grader and a
metric cannot disagree about what a call was.

A call *attempt* is valid when it parses, names a known tool and gives its required arguments and no
unknown ones (known from the tools' JSON schemas when given). Malformed ``<tool_call>`` blocks stay in the
assistant text (TRL leaves an unparseable turn as plain text; our rollout keeps the block there too) and
count as invalid attempts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ark_trainer.base.chat.toolcall import parse_tool_calls


@dataclass
class EpisodeView:
    calls: list[dict[str, Any]] = field(default_factory=list)  # {name, arguments, result, valid}
    turns: int = 0  # assistant turns
    malformed: int = 0  # <tool_call> blocks that are no call
    final_answer: str = ""
    finished: bool = True  # the last assistant turn answered (made no tool call)

    @property
    def attempts(self) -> int:
        return len(self.calls) + self.malformed

    @property
    def n_invalid(self) -> int:
        return self.malformed + sum(not c["valid"] for c in self.calls)

    @property
    def n_valid(self) -> int:
        return sum(c["valid"] for c in self.calls)


def is_episode(completion: Any) -> bool:
    """A message list with tool traffic (not a plain one-message answer)."""
    return isinstance(completion, list) and any(
        isinstance(m, dict) and (m.get("role") == "tool" or m.get("tool_calls")) for m in completion
    )


def view(completion: Any, schemas: list[dict] | None = None) -> EpisodeView:
    """Read ``completion`` (a message list, a message or text) as an episode."""
    if isinstance(completion, dict):
        completion = [completion]
    if not isinstance(completion, list):
        completion = [{"role": "assistant", "content": str(completion)}]
    ep = EpisodeView()
    pending: list[dict] = []
    for message in completion:
        if not isinstance(message, dict):
            continue
        if message.get("role") == "assistant":
            _assistant(ep, message, pending, schemas)
        elif message.get("role") == "tool" and pending:
            pending.pop(0)["result"] = str(message.get("content", ""))
    return ep


def _assistant(ep: EpisodeView, message: dict, pending: list[dict], schemas: list[dict] | None) -> None:
    ep.turns += 1
    content, text_calls, malformed = parse_tool_calls(str(message.get("content") or ""))
    calls = [*(message.get("tool_calls") or []), *text_calls]
    ep.malformed += malformed
    for call in calls:
        fn = call.get("function", call) if isinstance(call, dict) else {}
        args = fn.get("arguments", {})
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError:
                args = None
        arguments: dict = args if isinstance(args, dict) else {}
        record = {"name": fn.get("name"), "arguments": arguments, "result": None}
        record["valid"] = isinstance(args, dict) and _fits(record["name"], arguments, schemas)
        ep.calls.append(record)
        pending.append(record)
    pending += [{"result": None}] * malformed  # the rollout answers a malformed block with an error message
    ep.final_answer = content
    ep.finished = not calls and not malformed


def _fits(name: Any, arguments: dict, schemas: list[dict] | None) -> bool:
    if not isinstance(name, str):
        return False
    if schemas is None:
        return True
    schema = next((s for s in schemas if s.get("function", s).get("name") == name), None)
    if schema is None:
        return False
    params = schema.get("function", schema).get("parameters", {})
    known = set(params.get("properties", {}))
    return all(a in arguments for a in params.get("required", [])) and all(a in known for a in arguments)


def final_answer(completion: Any) -> str:
    """The text of the episode's last assistant turn, tool-call blocks left out."""
    return view(completion).final_answer
