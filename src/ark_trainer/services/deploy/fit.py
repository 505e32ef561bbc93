"""Fit a chat request into a small model's window by whole messages, so that the question survives.

OpenClaw sends a ~40k-character system prompt, 12 tool schemas, then the turn: ``[date] question`` +
runtime notes, and an internal-context note as a last user message. Cutting that prompt to its last
tokens keeps the notes and loses the question (every question then gets the same answer). Instead, when
the rendered prompt is longer than ``budget`` tokens (the window minus the reply's tokens), the request is
rebuilt from its parts, in this order, each taking what is left of the budget:

1. **the current turn**: the messages after the last final assistant answer (one without ``tool_calls``):
   its first user message (the request) whole, then its later messages (tool calls, tool results,
   notes), newest first, each whole if it fits. A request too long for that keeps its head and its end
   and loses its middle (two thirds of the room for the head, where OpenClaw puts the question; one
   third for the end, where a pasted text's question usually is), marked ``[…]``; it keeps at least half
   the budget, and the later messages share the other half;
2. **the tools**: all schemas as sent; else a compact form (name, first sentence of the description,
   parameter names and types); else none;
3. **the head of the system prompt**, up to a quarter of the budget, marked ``[…]`` when cut;
4. **older turns**, newest first, whole messages, while they fit;
5. whatever room is left grows the system prompt's head.

Sizes are measured by rendering the chat template and tokenizing, so the result fits whatever the
template adds. :func:`fit_messages` takes the counter as a function, so it is testable without a model.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Messages = list[dict[str, Any]]
Counter = Callable[[Messages, list | None], int]
CUT_MARK = "[…]"
SYSTEM_SHARE = 4  # the system prompt's head gets up to 1/SYSTEM_SHARE of the budget before older turns


@dataclass
class FitReport:
    """What a fitted prompt kept, in tokens and messages (for the server's one log line)."""

    total: int
    budget: int
    kept: int
    turn: tuple[int, int]  # messages of the current turn kept, of
    tools: str  # "all N", "compact N", "dropped N", "none"
    system: tuple[int, int]  # characters of the system prompt kept, of
    older: tuple[int, int]  # older messages kept, of
    request_cut: bool

    def line(self) -> str:
        turn = f"current turn {self.turn[0]}/{self.turn[1]} messages" + (
            " (request cut)" if self.request_cut else ""
        )
        return (
            f"prompt of {self.total} tokens fitted into {self.budget} ({self.kept} used): {turn}, "
            f"tools {self.tools}, system prompt head {self.system[0]}/{self.system[1]} chars, "
            f"older turns {self.older[0]}/{self.older[1]} messages"
        )


def current_turn_start(turns: Messages) -> int:
    """Index of the first message after the last final assistant answer (0 when there is none)."""
    for i in range(len(turns) - 1, -1, -1):
        if turns[i].get("role") == "assistant" and not turns[i].get("tool_calls"):
            return i + 1
    return 0


def compact_tools(tools: list) -> list:
    """Tool schemas without descriptions of parameters: name, first sentence, parameter names and types."""
    out = []
    for tool in tools:
        fn = tool.get("function", tool) if isinstance(tool, dict) else {}
        if not isinstance(fn, dict) or "name" not in fn:
            continue
        params = fn.get("parameters") or {}
        props = params.get("properties") or {}
        slim = {k: {"type": v.get("type", "string")} if isinstance(v, dict) else {} for k, v in props.items()}
        desc = str(fn.get("description") or "").split(". ")[0].strip()
        out.append(
            {
                "type": "function",
                "function": {
                    "name": fn["name"],
                    "description": desc,
                    "parameters": {
                        "type": "object",
                        "properties": slim,
                        "required": params.get("required", []),
                    },
                },
            }
        )
    return out


def _with_text(message: dict, text: str) -> dict:
    return {**message, "content": text}


def _middle_cut(text: str, keep: int) -> str:
    """``text`` with its middle cut out: ``keep`` characters, two thirds from its head, one third its end."""
    if keep >= len(text):
        return text
    head = (2 * keep + 2) // 3
    tail = keep - head
    return text[:head] + CUT_MARK + (text[-tail:] if tail else "")


def _longest(fits: Callable[[int], bool], n: int) -> int:
    """The largest k in [0, n] with ``fits(k)`` (``fits`` is monotone; ``fits(0)`` is assumed)."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _system_head(system: dict | None, keep: int) -> list[dict]:
    if system is None or keep <= 0:
        return []
    text = system.get("content")
    if not isinstance(text, str) or keep >= len(text):
        return [system]
    return [_with_text(system, text[:keep] + CUT_MARK)]


class _Fit:
    """The state of one fit: the parts, the counter and the budget."""

    def __init__(self, count: Counter, messages: Messages, tools: list | None, budget: int) -> None:
        self.count, self.budget = count, budget
        has_system = bool(messages) and messages[0].get("role") in ("system", "developer")
        self.system = messages[0] if has_system else None
        turns = messages[1:] if has_system else list(messages)
        start = current_turn_start(turns)
        self.older, self.current = turns[:start], turns[start:]
        self.tools = tools

    def fits(
        self, system_chars: int, older: Messages, turn: Messages, tools: list | None, limit: int
    ) -> bool:
        return self.count(_system_head(self.system, system_chars) + older + turn, tools) <= limit

    def turn(self) -> tuple[Messages, bool]:
        """The current turn's request and its newest later messages that fit (see the module's rule 1)."""
        users = [i for i, m in enumerate(self.current) if m.get("role") == "user"]
        first = users[0] if users else 0
        if not self.current:
            return [], False
        request, rest = self.current[first], self.current[first + 1 :]
        text = request.get("content")
        if not isinstance(text, str):
            text = None
        # The request keeps at least half the room when more of the turn follows (a tool result matters).
        floor = self.budget // 2 if rest else self.budget
        small = self._cut_request(request, text, floor)
        kept: list[int] = []
        for i in range(len(rest) - 1, -1, -1):  # newest first; one that does not fit is skipped
            if self.count([small, *(rest[j] for j in sorted([i, *kept]))], None) <= self.budget:
                kept.append(i)
        later = [rest[j] for j in sorted(kept)]
        whole = self._cut_request(request, text, self.budget, later)  # the request grows into what is left
        return [whole, *later], whole is not request

    def _cut_request(self, request: dict, text: str | None, limit: int, later: Sequence[dict] = ()) -> dict:
        """``request`` whole if it fits in ``limit`` with ``later``, else its middle cut until it does."""
        if text is None or self.count([request, *later], None) <= limit:
            return request
        keep = _longest(
            lambda k: self.count([_with_text(request, _middle_cut(text, k)), *later], None) <= limit,
            len(text),
        )
        return _with_text(request, _middle_cut(text, keep))

    def pick_tools(self, turn: Messages) -> tuple[list | None, str]:
        if not self.tools:
            return self.tools, "none"
        for form, name in ((self.tools, "all"), (compact_tools(self.tools), "compact")):
            if self.fits(0, [], turn, form, self.budget):
                return form, f"{name} {len(self.tools)}"
        return None, f"dropped {len(self.tools)}"


def fit_messages(count: Counter, messages: Messages, tools: list | None, budget: int):
    """``(messages, tools, report)`` fitted into ``budget`` tokens by the rule above (report None: it fit).

    ``count(messages, tools)`` is the rendered prompt's length in tokens (generation prompt included).
    """
    total = count(messages, tools)
    if total <= budget:
        return messages, tools, None
    fit = _Fit(count, copy.deepcopy(messages), tools, budget)
    turn, cut = fit.turn()
    tools_kept, tools_note = fit.pick_tools(turn)
    chars = len(fit.system["content"]) if fit.system and isinstance(fit.system.get("content"), str) else 0
    share = fit.count(turn, tools_kept) + budget // SYSTEM_SHARE
    sys_chars = _longest(lambda k: fit.fits(k, [], turn, tools_kept, min(share, budget)), chars)
    n_old = _longest(
        lambda k: fit.fits(sys_chars, fit.older[len(fit.older) - k :], turn, tools_kept, budget),
        len(fit.older),
    )
    older = fit.older[len(fit.older) - n_old :]
    sys_chars = _longest(lambda k: fit.fits(k, older, turn, tools_kept, budget), chars)
    kept = _system_head(fit.system, sys_chars) + older + turn
    report = FitReport(
        total=total,
        budget=budget,
        kept=count(kept, tools_kept),
        turn=(len(turn), len(fit.current)),
        tools=tools_note,
        system=(min(sys_chars, chars), chars),
        older=(n_old, len(fit.older)),
        request_cut=cut,
    )
    return kept, tools_kept, report


class PromptFitter:
    """One model's prompt preparation: tool support probed once, messages fitted, the fit logged once.

    ``render(messages, tools=None)`` is the chat template's text with the generation prompt; ``tokenize``
    turns a text into token ids. A template that does not render tool calls gets them as text
    (:func:`ark_trainer.services.deploy.toolcalls.as_plain_messages`); one that does not render ``tools=`` is not
    sent them, so they are not counted either.
    """

    def __init__(
        self, render: Callable[..., str], tokenize: Callable[[str], list], budget: int, log=print
    ) -> None:
        from ark_trainer.services.deploy.toolcalls import template_support

        self.render, self.tokenize, self.budget, self.log = render, tokenize, budget, log
        self.tools_ok, self.calls_ok = template_support(render)
        self.logged = False
        self.last: FitReport | None = None  # the last request's fit (None: it fit whole)

    def plain(self, messages: Messages) -> Messages:
        from ark_trainer.services.deploy.toolcalls import as_plain_messages

        return messages if self.calls_ok else as_plain_messages(messages)

    def count(self, messages: Messages, tools: list | None) -> int:
        return len(self.tokenize(self.render(self.plain(messages), tools=tools)))

    def __call__(self, messages: Messages, tools: list | None) -> tuple[Messages, list | None]:
        if not self.tools_ok:
            tools = None
        # Fitted on the messages as sent (a tool call is not a final answer), rendered in the form the
        # template reads.
        messages, tools, report = fit_messages(self.count, messages, tools, self.budget)
        messages = self.plain(messages)
        self.last = report
        if report is not None and not self.logged:
            self.logged = True
            self.log(
                f"[ark serve] {report.line()}; said once per server process "
                "(the rule: docs/openclaw.md, 'Prompt fitting')"
            )
        return messages, tools
