"""The next user message as feedback on the answer before it.

A user who says "不对" or "that's wrong" right after an answer has graded it; one who says "谢谢" has too.
:func:`feedback_of` reads each recorded turn's request: wherever an assistant message is followed by a
user message, that user message is feedback on that assistant answer. Rules (regular expressions,
matched case-insensitively on the user message's start, the first 200 characters):

- ``negative``: a correction ("不对", "错了", "不是这样", "that's wrong", "no,", "incorrect", ...): the answer
  counts against (feedback -1): it is not kept as a candidate to imitate;
- ``positive``: thanks or approval ("谢谢", "对的", "thanks", "correct", ...): feedback +1, the answer is kept;
- ``hint``: a correction that says what the answer should have been ("应该回答：X", "should be: X"):
  ``X`` becomes the turn's ``reference`` and its candidate (a hindsight label, as OpenClaw-RL does),
  unless the safety filter (:mod:`ark_trainer.services.loop.safety`: a secret in ``X``, or ``X`` asking for a
  credential, sending a link or money, teaching harm or abuse, or instructing the model) drops it: the
  turn is then a plain correction, and the drop is counted.

Replace them with ``--feedback_rules FILE`` (YAML with any of ``negative``, ``positive``, ``hint``: lists
of patterns; ``hint`` patterns capture the corrected answer in their first group). The same file's
``allowed_domains`` (a list of host names, e.g. ``[shop.example.com]``) names the sites a hinted answer may
link to (their subdomains too); without it, a hint with any link is dropped.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field

from ark_trainer.base.errors import UserError
from ark_trainer.data.text import is_blank

NEGATIVE = [
    r"不对", r"错了", r"不是这样", r"不正确", r"答错", r"that'?s wrong", r"wrong", r"incorrect",
    r"no[,.!，。]", r"not right",
]  # fmt: skip
POSITIVE = [
    r"谢谢",
    r"对的",
    r"没错",
    r"正确",
    r"很好",
    r"thanks",
    r"thank you",
    r"correct",
    r"great",
    r"perfect",
]
HINT = [r"应该(?:回答|是|说)\s*[:：]\s*(.+)$", r"should (?:be|say|have said)\s*[:：]\s*(.+)$"]


@dataclass
class Rules:
    negative: list[re.Pattern] = field(default_factory=lambda: _compile(NEGATIVE))
    positive: list[re.Pattern] = field(default_factory=lambda: _compile(POSITIVE))
    hint: list[re.Pattern] = field(default_factory=lambda: _compile(HINT))
    allowed_domains: list[str] = field(default_factory=list)  # sites a hinted answer may link to


def _compile(patterns: list[str], where: str = "") -> list[re.Pattern]:
    out = []
    for p in patterns:
        try:
            out.append(re.compile(p, re.I | re.S))
        except re.error as exc:
            raise UserError(
                f"{where or 'feedback rules'}: bad pattern {p!r}: {exc}; fix the regular expression"
            ) from None
    return out


def load_rules(path: str | None) -> Rules:
    """The default rules, or those of a YAML file (``negative``, ``positive``, ``hint``: pattern lists)."""
    if not path:
        return Rules()
    from ark_trainer.base.yamlsafe import read_yaml_file

    try:
        data = read_yaml_file(path) or {}
    except UserError as exc:
        raise UserError(f"--feedback_rules: {exc.messages[0]}") from None
    if not isinstance(data, dict) or set(data) - {"negative", "positive", "hint", "allowed_domains"}:
        raise UserError(
            f"--feedback_rules: {path}: expected a mapping with negative, positive and/or hint lists "
            "(and allowed_domains)"
        )
    rules = Rules(allowed_domains=_domains(data.get("allowed_domains", []), path))
    for name in ("negative", "positive", "hint"):
        if name in data:
            if not isinstance(data[name], list) or not all(isinstance(p, str) for p in data[name]):
                raise UserError(f"--feedback_rules: {path}: {name}: expected a list of patterns (strings)")
            setattr(rules, name, _compile(data[name], f"--feedback_rules: {path}: {name}"))
    return rules


_DOMAIN = re.compile(r"(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{1,62}")


def _domains(value: object, path: str) -> list[str]:
    """``allowed_domains``: host names, lower case (``shop.example.com``; no scheme, path or wildcard)."""
    if not isinstance(value, list) or not all(isinstance(d, str) for d in value):
        raise UserError(f"--feedback_rules: {path}: allowed_domains: expected a list of host names")
    bad = [d for d in value if not _DOMAIN.fullmatch(d.strip().lower())]
    if bad:
        raise UserError(
            f"--feedback_rules: {path}: allowed_domains: {bad[0]!r} is not a host name; write it as "
            "shop.example.com (no scheme, path or *)"
        )
    return [d.strip().lower() for d in value]


def judge(message: str, rules: Rules) -> tuple[int, str | None]:
    """(feedback, hint) of one user message: -1 a correction, +1 approval, 0 neither; the hinted answer."""
    head = message.strip()[:200]
    for pattern in rules.hint:
        match = pattern.search(head)
        if match and not is_blank(match.group(1)):
            return -1, match.group(1).strip()
    if any(p.match(head) or p.search(head[:12]) for p in rules.negative):
        return -1, None
    if any(p.match(head) or p.search(head[:12]) for p in rules.positive):
        return 1, None
    return 0, None


AGENT_CONTEXT = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"


def is_agent_context(message: dict) -> bool:
    """OpenClaw's own per-turn context: the system prompt, and the user message it adds after the current
    turn's ("<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>> Conversation data ...": active exec sessions and
    subagents), which later requests' history does not repeat."""
    content = message.get("content")
    return message["role"] == "system" or (
        message["role"] == "user" and isinstance(content, str) and content.lstrip().startswith(AGENT_CONTEXT)
    )


def conversation_key(messages: list[dict]) -> str:
    """A key for a conversation up to and including an assistant answer (OpenClaw's context ignored: the
    answer's own request carries it, the next request's history does not)."""
    turns = [(m["role"], m["content"].strip()) for m in messages if not is_agent_context(m)]
    return hashlib.sha256(json.dumps(turns, ensure_ascii=False).encode()).hexdigest()


def feedback_of(
    rows: list[dict], rules: Rules, dropped: dict[str, str] | None = None
) -> dict[str, tuple[int, str | None]]:
    """Conversation key of an answered turn → (feedback, hint), from the user messages that followed it.

    A hint the safety filter refuses becomes a plain correction; ``dropped`` (when given) gets its
    conversation key → the reason (see :func:`~ark_trainer.services.loop.safety.correction_problem`)."""
    from ark_trainer.services.loop.safety import correction_problem

    found: dict[str, tuple[int, str | None]] = {}
    for row in rows:
        messages = row.get("messages") or []
        for i in range(1, len(messages)):
            if messages[i]["role"] == "user" and messages[i - 1]["role"] == "assistant":
                verdict = judge(messages[i]["content"], rules)
                if not verdict[0]:
                    continue
                key = conversation_key(messages[:i])
                problem = correction_problem(verdict[1], rules.allowed_domains) if verdict[1] else None
                if problem is not None:
                    verdict = (-1, None)
                    if dropped is not None:
                        dropped[key] = problem[0]
                found[key] = verdict
    return found
