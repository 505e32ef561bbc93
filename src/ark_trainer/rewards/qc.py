"""Customer-service quality-inspection (QC) graders.

The QC agent reads a customer-service dialogue and answers in three lines::

    结论：违规
    类型：泄露隐私
    回复：非常抱歉给您带来不便，我们会尽快为您处理。

``结论`` (verdict) is 合规 (compliant) or 违规 (violation); ``类型`` (type) is one of
:data:`VIOLATION_TYPES` (``无`` for a clean dialogue); ``回复`` is the reply the agent suggests to the
customer. The same answer in English (``format_answer(..., lang="en")``, for a small English model)::

    Verdict: violation
    Type: privacy_leak
    Reply: We are very sorry for the inconvenience, we will process your refund as soon as possible.

with the verdicts and type names of :data:`ENGLISH_VERDICTS` and :data:`ENGLISH_TYPES`; the parser reads
both languages (English keys case-insensitive) into the canonical Chinese values, and the compliance rules
and the satisfaction proxy carry English patterns beside the Chinese ones.

The graders below score a completion against the sample's ``label`` column (the true type) and check the
suggested reply against the compliance rules. Every grader follows TRL's reward contract
``fn(prompts, completions, **columns) -> list[float | None]``; ``None`` means "not applicable" (e.g. no
label). Evaluation calls the very same functions, so the reward and the metric cannot drift apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ark_trainer.data.labels import CLEAN, VIOLATION_TYPES, normalize_label
from ark_trainer.rewards.contract import completion_text, register_reward

VERDICT_OK, VERDICT_BAD = "合规", "违规"
# The English answer's names for the verdicts and types (format_answer(..., lang="en") writes these).
ENGLISH_VERDICTS = {VERDICT_OK: "compliant", VERDICT_BAD: "violation"}
ENGLISH_TYPES = {
    "辱骂": "abuse",
    "泄露隐私": "privacy_leak",
    "违规承诺": "unauthorised_promise",
    "未致歉": "no_apology",
    "推诿": "deflection",
    CLEAN: "none",
}
ANSWER_LANGS = ("zh", "en")

_VERDICT_ONLY = {"违规", "violation", "non-compliant", "noncompliant"}

# Compliance rules, applied to the agent's own suggested reply. Each is a pattern whose presence is a breach,
# except the apology rule, whose *absence* is one.
ABUSE_WORDS = ("滚", "蠢", "白痴", "笨蛋", "闭嘴", "有病", "神经病", "废物", "傻")
PROMISE_PATTERNS = ("保证", "一定全额", "肯定赔", "百分百", "绝对没问题", "包赔", "承诺退", "双倍赔")
DEFLECTION_PATTERNS = ("不归我管", "不关我", "自己去", "找别人", "别问我", "我也没办法", "不是我们的问题")
APOLOGY_PATTERNS = ("抱歉", "对不起", "不好意思", "致歉", "歉意")
SERVICE_PATTERNS = ("为您", "帮您", "尽快", "马上", "处理", "跟进", "核实", "解决")
# The same rules in English, matched case-insensitively from the start of a word ("apolog": apologise,
# apology, apologies).
ABUSE_WORDS_EN = ("idiot", "stupid", "shut up", "moron", "dumb", "get lost", "useless", "are you blind")
PROMISE_PATTERNS_EN = (
    "guarantee",
    "100%",
    "for sure",
    "double compensation",
    "twice the money",
    "promise",
    "out of my own pocket",
)
DEFLECTION_PATTERNS_EN = (
    "not my job",
    "not my problem",
    "not our problem",
    "none of my business",
    "ask someone else",
    "go find",
    "go ask",
    "nothing i can do",
)
APOLOGY_PATTERNS_EN = ("sorry", "apolog", "regret")
SERVICE_PATTERNS_EN = (
    "for you",
    "right away",
    "as soon as",
    "follow up",
    "check",
    "verify",
    "resolve",
    "handle",
    "process",
    "look into",
)


def _english_rule(patterns: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(rf"\b{re.escape(p)}" for p in patterns), re.IGNORECASE)


_ABUSE_EN = _english_rule(ABUSE_WORDS_EN)
_PROMISE_EN = _english_rule(PROMISE_PATTERNS_EN)
_DEFLECTION_EN = _english_rule(DEFLECTION_PATTERNS_EN)
_APOLOGY_EN = _english_rule(APOLOGY_PATTERNS_EN)
_SERVICE_EN = _english_rule(SERVICE_PATTERNS_EN)
# 11-digit mainland mobile numbers, 18-character resident ID numbers, e-mail addresses, bank-card-like runs.
PII_RE = re.compile(
    r"(?<!\d)1[3-9]\d{9}(?!\d)|(?<!\d)\d{17}[\dXx](?!\d)|[\w.+-]+@[\w-]+\.[\w.]+|(?<!\d)\d{16,19}(?!\d)"
)

_LINE_RE = {
    "verdict": re.compile(r"结论[:：]\s*(\S+)"),
    "type": re.compile(r"类型[:：]\s*(\S+)"),
    "reply": re.compile(r"回复[:：]\s*(.+)"),
}
# The English keys, read where the Chinese key is missing.
_LINE_RE_EN = {
    "verdict": re.compile(r"\bverdict\s*[:：]\s*(\S+)", re.IGNORECASE),
    "type": re.compile(r"\btype\s*[:：]\s*(\S+)", re.IGNORECASE),
    "reply": re.compile(r"\breply\s*[:：]\s*(.+)", re.IGNORECASE),
}
_FROM_ENGLISH = {
    "verdict": {v: k for k, v in ENGLISH_VERDICTS.items()},
    "type": {v: k for k, v in ENGLISH_TYPES.items()},
}
# A reply is measured in characters when it holds Chinese, else in words: about as long either way.
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
REPLY_CHARS = (6, 60)  # a concise Chinese reply, in characters
# ... in English, in words: the demo's English replies run ~0.75 words per character of their Chinese twins
REPLY_WORDS = (4, 48)


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


def format_answer(violation_type: str, reply: str, lang: str = "zh") -> str:
    """The canonical QC answer for a violation type and a suggested reply, in Chinese (``lang="zh"``) or
    English (``"en"``: the type is canonical or its English name)."""
    if lang == "en":
        kind = normalize_label(violation_type) or violation_type
        verdict = ENGLISH_VERDICTS[VERDICT_OK if kind == CLEAN else VERDICT_BAD]
        return f"Verdict: {verdict}\nType: {ENGLISH_TYPES.get(kind, kind)}\nReply: {reply}"
    if lang != "zh":
        raise ValueError(f"format_answer: lang {lang!r} is not one of {', '.join(ANSWER_LANGS)}")
    verdict = VERDICT_OK if violation_type == CLEAN else VERDICT_BAD
    return f"结论：{verdict}\n类型：{violation_type}\n回复：{reply}"


def _field(text: str, name: str) -> str | None:
    """One field of an answer: under its Chinese key, else under its English one (mapped to canonical)."""
    match = _LINE_RE[name].search(text)
    english = match is None
    if english:
        match = _LINE_RE_EN[name].search(text)
    value = match.group(1).strip() if match else None
    if not value or name == "reply":
        return value
    value = value.rstrip("。.，,;；!！")
    return _FROM_ENGLISH[name].get(value.lower(), value) if english else value


def parse_answer(text: str) -> QCAnswer:
    """The three fields of a completion, in either language; verdict and type as canonical values."""
    return QCAnswer(**{name: _field(text, name) for name in _LINE_RE})


def _has(reply: str, chinese: tuple[str, ...], english: re.Pattern[str]) -> bool:
    return any(p in reply for p in chinese) or english.search(reply) is not None


def compliance_breaches(reply: str) -> list[str]:
    """Names of the compliance rules a suggested reply breaks (empty when compliant)."""
    breaches = []
    if _has(reply, ABUSE_WORDS, _ABUSE_EN):
        breaches.append("abuse")
    if PII_RE.search(reply):
        breaches.append("personal_data")
    if _has(reply, PROMISE_PATTERNS, _PROMISE_EN):
        breaches.append("unauthorised_promise")
    if _has(reply, DEFLECTION_PATTERNS, _DEFLECTION_EN):
        breaches.append("deflection")
    if not _has(reply, APOLOGY_PATTERNS, _APOLOGY_EN):
        breaches.append("missing_apology")
    return breaches


def concise(reply: str) -> bool:
    """The reply's length lies in :data:`REPLY_CHARS` (Chinese) or :data:`REPLY_WORDS` (no Chinese in it)."""
    if _CJK.search(reply):
        low, high = REPLY_CHARS
        return low <= len(reply) <= high
    low, high = REPLY_WORDS
    return low <= len(reply.split()) <= high


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


def qc_decision_text(answer: str) -> str | None:
    """The part of a QC answer that ``qc_verdict`` reads: from its start to the end of the type line (the
    verdict line where no type follows it), in either language; None where it holds no verdict."""
    ends = [m.end() for m in (_LINE_RE["verdict"].search(answer), _LINE_RE_EN["verdict"].search(answer)) if m]
    if not ends:
        return None
    types = [m.end() for m in (_LINE_RE["type"].search(answer), _LINE_RE_EN["type"].search(answer)) if m]
    return answer[: max(types or ends)]


qc_verdict.decision_text = qc_decision_text  # type: ignore[attr-defined]  # stages/grpo/auto.py: decision_reader


@register_reward("qc_type")
def qc_type(prompts, completions, label=None, **_) -> list[float | None]:
    """1 when the verdict and the type are both right (what ``task_accuracy`` counts), else 0: ``qc_verdict``
    without its half credit for a right verdict with a wrong type. That half credit makes "违规" the best
    guess for a dialogue a model cannot read (70% of the demo's data are violations), so GRPO on it moves a
    weak model's answers away from the clean type. In the QC preset at weight 0: GRPO's own reward on a real
    model (``stages/grpo/auto.py: grpo_reward_choice``; docs/rewards.md)."""
    scores = qc_verdict(prompts, completions, label=label)
    return [None if s is None else float(s >= 1.0) for s in scores]


qc_type.decision_text = qc_decision_text  # type: ignore[attr-defined]  # stages/grpo/auto.py: decision_reader
qc_type.task_indicator = True  # type: ignore[attr-defined]  # stages/grpo/auto.py: task_indicator, GRPO's reward


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
        if _has(reply, APOLOGY_PATTERNS, _APOLOGY_EN):
            score += 0.4
        if _has(reply, SERVICE_PATTERNS, _SERVICE_EN):
            score += 0.4
        if concise(reply) and not _has(reply, ABUSE_WORDS, _ABUSE_EN):
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
