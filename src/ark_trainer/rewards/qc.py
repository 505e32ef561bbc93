"""Customer-service quality-inspection (QC) graders.

The QC agent reads a customer-service dialogue and answers in three lines::

    结论：违规
    类型：泄露隐私
    回复：非常抱歉给您带来不便，我们会尽快为您处理。

``结论`` (verdict) is 合规 (compliant) or 违规 (violation); ``类型`` (type) is one of
:data:`VIOLATION_TYPES` (``无`` for a clean dialogue); ``回复`` is the reply the agent suggests to the
customer. The graders below score a completion against the sample's ``label`` column (the true type)
and check the suggested reply against the compliance rules. Every grader follows TRL's reward contract
``fn(prompts, completions, **columns) -> list[float | None]``; ``None`` means "not applicable" (e.g. no
label). Evaluation calls the very same functions, so the reward and the metric cannot drift apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ark_trainer.rewards.contract import completion_text, register_reward

CLEAN = "无"
VIOLATION_TYPES: tuple[str, ...] = ("辱骂", "泄露隐私", "违规承诺", "未致歉", "推诿", CLEAN)
VERDICT_OK, VERDICT_BAD = "合规", "违规"

# Type aliases users put in their own labels (English names, verdict-only labels).
_LABEL_ALIASES = {
    "abuse": "辱骂",
    "abusive": "辱骂",
    "pii": "泄露隐私",
    "privacy": "泄露隐私",
    "leak": "泄露隐私",
    "promise": "违规承诺",
    "unauthorised_promise": "违规承诺",
    "unauthorized_promise": "违规承诺",
    "no_apology": "未致歉",
    "missing_apology": "未致歉",
    "deflection": "推诿",
    "deflect": "推诿",
    "clean": CLEAN,
    "none": CLEAN,
    "ok": CLEAN,
    "compliant": CLEAN,
    "合规": CLEAN,
    "正常": CLEAN,
}

_VERDICT_ONLY = {"违规", "violation", "non-compliant", "noncompliant"}

# Compliance rules, applied to the agent's own suggested reply. Each is a pattern whose presence is a breach,
# except the apology rule, whose *absence* is one.
ABUSE_WORDS = ("滚", "蠢", "白痴", "笨蛋", "闭嘴", "有病", "神经病", "废物", "傻")
PROMISE_PATTERNS = ("保证", "一定全额", "肯定赔", "百分百", "绝对没问题", "包赔", "承诺退", "双倍赔")
DEFLECTION_PATTERNS = ("不归我管", "不关我", "自己去", "找别人", "别问我", "我也没办法", "不是我们的问题")
APOLOGY_PATTERNS = ("抱歉", "对不起", "不好意思", "致歉", "歉意")
SERVICE_PATTERNS = ("为您", "帮您", "尽快", "马上", "处理", "跟进", "核实", "解决")
# 11-digit mainland mobile numbers, 18-character resident ID numbers, e-mail addresses, bank-card-like runs.
PII_RE = re.compile(
    r"(?<!\d)1[3-9]\d{9}(?!\d)|(?<!\d)\d{17}[\dXx](?!\d)|[\w.+-]+@[\w-]+\.[\w.]+|(?<!\d)\d{16,19}(?!\d)"
)

_LINE_RE = {
    "verdict": re.compile(r"结论[:：]\s*(\S+)"),
    "type": re.compile(r"类型[:：]\s*(\S+)"),
    "reply": re.compile(r"回复[:：]\s*(.+)"),
}


@dataclass(frozen=True)
class QCAnswer:
    """A completion parsed into its three fields; a missing field is ``None``."""

    verdict: str | None
    type: str | None
    reply: str | None

    @property
    def well_formed(self) -> bool:
        verdict_ok = self.verdict in (VERDICT_OK, VERDICT_BAD)
        type_ok = self.type in VIOLATION_TYPES
        return (
            verdict_ok
            and type_ok
            and bool(self.reply)
            and (self.verdict == VERDICT_OK) == (self.type == CLEAN)
        )


def format_answer(violation_type: str, reply: str) -> str:
    """The canonical QC answer for a violation type and a suggested reply."""
    verdict = VERDICT_OK if violation_type == CLEAN else VERDICT_BAD
    return f"结论：{verdict}\n类型：{violation_type}\n回复：{reply}"


def parse_answer(text: str) -> QCAnswer:
    fields = {}
    for name, pattern in _LINE_RE.items():
        match = pattern.search(text)
        value = match.group(1).strip() if match else None
        fields[name] = value.rstrip("。.，,;；!！") if value and name != "reply" else value
    return QCAnswer(**fields)


def normalize_label(label: object) -> str | None:
    """Map a label column value to a violation type, or ``None`` when it is not a QC label."""
    if isinstance(label, dict):
        label = label.get("type", label.get("violation"))
    if not isinstance(label, str):
        return None
    label = label.strip()
    if label in VIOLATION_TYPES:
        return label
    return _LABEL_ALIASES.get(label.lower())


def compliance_breaches(reply: str) -> list[str]:
    """Names of the compliance rules a suggested reply breaks (empty when compliant)."""
    breaches = []
    if any(w in reply for w in ABUSE_WORDS):
        breaches.append("abuse")
    if PII_RE.search(reply):
        breaches.append("personal_data")
    if any(p in reply for p in PROMISE_PATTERNS):
        breaches.append("unauthorised_promise")
    if any(p in reply for p in DEFLECTION_PATTERNS):
        breaches.append("deflection")
    if not any(p in reply for p in APOLOGY_PATTERNS):
        breaches.append("missing_apology")
    return breaches


N_COMPLIANCE_RULES = 5


def _reply_of(text: str) -> str:
    answer = parse_answer(text)
    return answer.reply if answer.reply is not None else text


@register_reward("qc_verdict")
def qc_verdict(prompts, completions, label=None, **_) -> list[float | None]:
    """1 when the type is right (hence the verdict too), 0.5 for the right verdict with a wrong type, else 0."""
    labels = label if label is not None else [None] * len(completions)
    scores: list[float | None] = []
    for completion, raw in zip(completions, labels, strict=True):
        answer = parse_answer(completion_text(completion))
        # A label that gives only the verdict ("违规") grades the verdict alone.
        if isinstance(raw, str) and raw.strip().lower() in _VERDICT_ONLY:
            scores.append(float(answer.verdict == VERDICT_BAD))
            continue
        truth = normalize_label(raw)
        if truth is None:
            scores.append(None)
            continue
        want_verdict = VERDICT_OK if truth == CLEAN else VERDICT_BAD
        if answer.type == truth and answer.verdict == want_verdict:
            scores.append(1.0)
        elif answer.verdict == want_verdict:
            scores.append(0.5)
        else:
            scores.append(0.0)
    return scores


@register_reward("qc_compliance")
def qc_compliance(prompts, completions, **_) -> list[float | None]:
    """Share of the five compliance rules the suggested reply keeps (1.0 = fully compliant)."""
    return [
        1.0 - len(compliance_breaches(_reply_of(completion_text(c)))) / N_COMPLIANCE_RULES
        for c in completions
    ]


@register_reward("qc_satisfaction")
def qc_satisfaction(prompts, completions, **_) -> list[float | None]:
    """A customer-satisfaction proxy: the reply apologises, offers concrete help, is polite and concise."""
    scores: list[float | None] = []
    for completion in completions:
        reply = _reply_of(completion_text(completion))
        score = 0.0
        if any(p in reply for p in APOLOGY_PATTERNS):
            score += 0.4
        if any(p in reply for p in SERVICE_PATTERNS):
            score += 0.4
        if 6 <= len(reply) <= 60 and not any(w in reply for w in ABUSE_WORDS):
            score += 0.2
        scores.append(round(score, 4))
    return scores


@register_reward("qc_format")
def qc_format(prompts, completions, **_) -> list[float | None]:
    """1 for a well-formed three-line answer; partial credit per field present."""
    scores: list[float | None] = []
    for completion in completions:
        answer = parse_answer(completion_text(completion))
        if answer.well_formed:
            scores.append(1.0)
            continue
        present = sum(
            [answer.verdict in (VERDICT_OK, VERDICT_BAD), answer.type in VIOLATION_TYPES, bool(answer.reply)]
        )
        scores.append(round(present / 4, 4))
    return scores
