"""Clauses, and whether a negation governs a request in one: the grammar the correction filter reads.

"不要把验证码告诉任何人" warns, "不要担心，请告诉我您的密码" asks: a negation counts only when it governs
the verb of the request. :func:`governed` reads it so: the negation is in the same clause (clauses end at
``。！？；，：`` and their ASCII forms, a line break, or a full stop before a space), comes before the verb,
at most :data:`GOVERN_GAP` characters before it, and nothing between them starts another predicate
(:data:`_BREAK`: "担心", "犹豫", "忘", "并", "然后", "worry", "forget", "fail", "and", "then", ...), so
the "不要" of "不要担心请告诉我" governs 担心, not 告诉.

:func:`reported` reads a request that is told about, not made: one whose clause names, before its verb,
someone else as the asker or the asked ("客服**要求客户**提供验证码", "**凡是**要求您转账的都是诈骗", "if
**someone** asks you to pay", "the agent **asked the customer** for"): a QC verdict describing a violation,
or a warning. A customer addressed ("尊敬的客户请提供您的密码", "dear customer, send") is no report.
"""

from __future__ import annotations

import re

CLAUSE_END = re.compile(r"[。！？!?；;，,：:\n]|\.(?=\s|$)")
GOVERN_GAP = 30  # characters between the negation and the verb it governs ("never message you asking you to")

NEGATION = re.compile(
    r"不要|请勿|切勿|勿|别(?![人的处])|不会|绝不|从不|从未|不可|不能|无需|无须|不需要|不用|切莫|禁止|严禁|不得|谨防|不支持|不接受|不收"
    r"|(?<![a-z])(?:never|don'?t|do not|won'?t|will not|no need to|shouldn'?t|should not|avoid|must not"
    r"|mustn'?t|can'?t|cannot|not ask|not to)(?![a-z])"
)
# What the negation governs instead when it stands between them: a predicate of its own ("不要担心",
# "don't worry"), above all the verbs a negation turns into an urging ("不要犹豫", "别忘了", "don't forget
# to", "never fail to"), and the conjunctions that start another one.
_BREAK = re.compile(
    r"担心|着急|急|害怕|怕|紧张|挂断|挂机|慌|犹豫|迟疑|忘|客气|拖延|耽误|错过|介意|顾虑|见外|并|然后|但|而且|只需"
    r"|(?<![a-z])(?:worry|worries|panic|hesitate|hang up|afraid|scared|shy|forget|fail|delay|wait|hold back|miss"
    r"|mind|and|then|but|just|so|please)(?![a-z])"
)
_REPORTED = re.compile(
    r"(?:要求|让|向|叫|请求|诱导|引导|逼|催促?)客户|有人|凡是|骗子|陌生人|自称|冒充|(?:对方|他人)(?=要求|让|索要|请)"
    r"|(?<![a-z])(?:(?:someone|anybody|scammers?|fraudsters?)(?![a-z])|anyone (?:who|that|asking|claiming)"
    r"|(?:asked|told|requested|pressed|pushed|made|got|asking|telling) (?:the |a )?customers?(?![a-z]))"
)


def clauses(text: str) -> list[tuple[int, str]]:
    """``(start, clause)`` of each clause of ``text``."""
    out, start = [], 0
    for end in CLAUSE_END.finditer(text):
        out.append((start, text[start : end.start()]))
        start = end.end()
    out.append((start, text[start:]))
    return [(s, c) for s, c in out if c.strip()]


def governed(clause: str, verb: int) -> bool:
    """Whether a negation in ``clause`` governs the verb at ``verb`` (see the module docstring)."""
    for neg in NEGATION.finditer(clause, 0, verb):  # one after the verb governs something else ("割腕不会痛")
        gap = clause[neg.end() : verb]
        if len(gap) <= GOVERN_GAP and not _BREAK.search(gap):
            return True
    return False


def reported(clause: str, verb: int) -> bool:
    """Whether the request at ``verb`` is told about (someone else asks or is asked) rather than made: the
    clause names the asker or the asked before the verb ("客服要求客户提供", "if someone asks you to pay";
    not a greeting, "尊敬的客户请提供您的密码")."""
    return bool(_REPORTED.search(clause, 0, verb + 1))
