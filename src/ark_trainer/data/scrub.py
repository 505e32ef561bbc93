"""Scrub secrets and personal data from text before it is written as training data.

Each kind of finding becomes a fixed placeholder (``[PRIVATE_KEY]``, ``[API_KEY]``, ``[TOKEN]``,
``[PASSWORD]``, ``[EMAIL]``, ``[ID_NUMBER]``, ``[CARD_NUMBER]``, ``[PHONE]``, ``[IP]``) and is counted, so
the caller can report what was removed. Order matters: whole PEM blocks first, then keys and tokens (so a
token with digits is not half-eaten by the phone rule), then e-mail, ID and card numbers, then phones.

The rules match on a *probe* of the text with the same length: full-width forms (``１３８``, ``：``, ``＠``)
folded to ASCII and JSON escapes (``\\n``) blanked, so ``１３８１２３４５６７８`` and a key after an escaped
newline inside a tool call's JSON are found; the replacement is applied to the original text by position.
Digit rules refuse to match inside a longer number, card numbers must pass Luhn and start like a card, and
ID numbers must hold a real birth date, so order ids and prices are left alone.

    s = Scrubber(); clean = s.text("mail bob@corp.com"); s.counts  # {"email": 1}
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_FOLD = str.maketrans({**{chr(0xFF01 + i): chr(0x21 + i) for i in range(94)}, "\u3000": " "})
_ESCAPE = re.compile(r"\\[nrtbf]")


@dataclass(frozen=True)
class Rule:
    """``pattern`` found on the probe; the ``v`` group (or the whole match) becomes ``placeholder``."""

    kind: str
    placeholder: str
    pattern: re.Pattern
    check: Callable[[str], bool] | None = None  # on the matched value (probe text); False: leave it


def _luhn_card(value: str) -> bool:
    """13-19 digits that start like a card (2221-2720, 3-6) and pass Luhn (an order id usually fails)."""
    digits = [int(c) for c in value if c.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    head = int("".join(map(str, digits[:4])))
    if not (3 <= digits[0] <= 6 or 2221 <= head <= 2720):
        return False
    total = sum(d if i % 2 == 0 else (d * 2 - 9 if d > 4 else d * 2) for i, d in enumerate(reversed(digits)))
    return total % 10 == 0


def _id_number(value: str) -> bool:
    """A Chinese resident ID: 18 digits (last may be X) with a 19xx/20xx birth date, or the old 15 digits."""
    digits = re.sub(r"[ -]", "", value).upper()
    if len(digits) == 18:
        date = digits[6:14]
        return date[:2] in ("18", "19", "20") and _valid_date(date[4:6], date[6:8])
    return len(digits) == 15 and digits[-1] != "X" and _valid_date(digits[8:10], digits[10:12])


def _valid_date(month: str, day: str) -> bool:
    return month.isdigit() and day.isdigit() and 1 <= int(month) <= 12 and 1 <= int(day) <= 31


def _aws_secret_shape(value: str) -> bool:
    """40 base64 characters that look random (mixed case, digits), not a path or a camel-case name."""
    return (
        any(c.isupper() for c in value)
        and any(c.islower() for c in value)
        and any(c.isdigit() for c in value)
        and value.count("/") < 3
    )


def _password_like(value: str) -> bool:
    """After "password is"/"密码是": a value with a digit or symbol (not "the password is wrong")."""
    return any(not c.isalpha() for c in value) and any(c.isascii() and c.isalnum() for c in value)


_A = r"(?<![A-Za-z0-9_\-])"  # an ASCII token starts here (not inside a longer word; CJK before is fine)
_Z = r"(?![A-Za-z0-9_\-])"
_SEP = r"\\*[\"']?\s*[:=]\s*\\*[\"']?"  # key: value, "key": "value", {\"key\": \"value\"}, KEY=value
_SECRET_VALUE = r"(?P<v>(?!\[)[^\s\"'`,;\\<>]{8,})"
_PASSWORD_VALUE = r"(?P<v>(?!\[)[^\s\"'`,;\\<>，。；、“”‘’\u3000-\u9fff]{4,})"
_KEY_NAMES = (
    r"api[_-]?key|apikey|access[_-]?key(?:[_-]?secret)?|account[_-]?key|secret(?:[_-]?(?:access[_-]?)?key)?"
    r"|private[_-]?key|(?:access|auth|refresh|session|id|bot)?[_-]?token|credentials?"
)
_NOT_DIGIT_RUN = r"(?<![0-9A-Za-z])(?<!\d[ -])"  # a number starts here, not inside a longer (grouped) one
_END_DIGIT_RUN = r"(?![0-9A-Za-z])(?![ -]\d)"

RULES: list[Rule] = [
    Rule(
        "private_key",
        "[PRIVATE_KEY]",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
            re.S,
        ),
    ),
    Rule(
        "api_key",
        "[API_KEY]",
        re.compile(
            _A
            + r"(?:sk-(?:ant-|proj-|or-v1-|live-|test-)?[A-Za-z0-9_\-]{16,}"  # OpenAI, Anthropic, DeepSeek, ...
            r"|sk_(?:live|test)_[A-Za-z0-9]{16,}|rk_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
            r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key ids
            r"|LTAI[0-9A-Za-z]{12,24}"  # Alibaba Cloud AccessKey id
            r"|AKID[0-9A-Za-z]{13,40}"  # Tencent Cloud SecretId
            r"|AIza[0-9A-Za-z_\-]{35}"  # Google API keys
            r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}"  # GitHub
            r"|glpat-[A-Za-z0-9_\-]{20,}"  # GitLab
            r"|xox[abposr]-[A-Za-z0-9\-]{10,}"  # Slack
            r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
            r"|gsk_[A-Za-z0-9]{20,}"  # Groq
            r"|npm_[A-Za-z0-9]{36})" + _Z
        ),
    ),
    Rule("token", "[TOKEN]", re.compile(r"(?i:bearer)\s+(?P<v>[A-Za-z0-9\-._~+/]{16,}=*)")),
    Rule(
        "token", "[TOKEN]", re.compile(_A + r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")
    ),
    Rule(  # password: x / "db_password": "x" / PWD=x / 密码：x / 口令是 x
        "password",
        "[PASSWORD]",
        re.compile(
            r"(?:(?<![A-Za-z0-9_.\-])[A-Za-z0-9_.\-]{0,40}?(?i:password|passwd|passphrase|passcode|pwd|pin[_ -]?code)"
            r"|(?:登录|支付|账户|账号|邮箱)?(?:密码|密碼|口令)|(?i:pin)码)" + _SEP + _PASSWORD_VALUE
        ),
    ),
    Rule(  # "my password is x" / "密码是 x": only a value with a digit or a symbol
        "password",
        "[PASSWORD]",
        re.compile(
            r"(?:(?i:password|passcode)\s+(?:is|was)\s+|(?:密码|密碼|口令)\s*(?:是|为|為)\s*)[\"'“]?"
            + _PASSWORD_VALUE
        ),
        _password_like,
    ),
    Rule(  # api_key=… / "client_secret": "…" / {\"api_key\": \"…\"}: the key name is kept
        "token",
        "[TOKEN]",
        re.compile(
            r"(?<![A-Za-z0-9_.\-])[A-Za-z0-9_.\-]{0,40}?(?i:" + _KEY_NAMES + r")" + _SEP + _SECRET_VALUE
        ),
    ),
    Rule(
        "api_key",
        "[API_KEY]",
        re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"),
        _aws_secret_shape,
    ),
    Rule(
        "email",
        "[EMAIL]",
        re.compile(
            r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}"
            r"(?![A-Za-z0-9\-])"
        ),
    ),
    Rule(  # non-ASCII local parts and domains (IDN): 张三@例子.中国, josé@exämple.com
        "email",
        "[EMAIL]",
        re.compile(r"(?<![\w.%+\-])[\w.%+\-]{1,64}@[\w\-]+(?:\.[\w\-]+)*\.(?:[^\W\d_]{2,}|xn--[\w\-]+)"),
    ),
    Rule(  # 18 digits (last may be X) or 15, with optional spaces/dashes; checked for a birth date
        "id_number",
        "[ID_NUMBER]",
        re.compile(_NOT_DIGIT_RUN + r"[1-9](?:[ -]?\d){14}(?:(?:[ -]?\d){2}[ -]?[\dXx])?" + _END_DIGIT_RUN),
        _id_number,
    ),
    Rule(  # 13-19 digits, plain or grouped (4-4-4-4-3, 4-6-5, 6-13, ...); Luhn and a card's first digits
        "card_number",
        "[CARD_NUMBER]",
        re.compile(_NOT_DIGIT_RUN + r"(?:\d{13,19}|\d{4,6}(?:[ -]\d{2,13}){1,5})" + _END_DIGIT_RUN),
        _luhn_card,
    ),
    Rule(
        "phone",
        "[PHONE]",
        re.compile(
            r"(?<![\d+])(?:(?:\+|00)86[ -]?|\(\+?86\)[ -]?)?1[3-9]\d(?:[ -]?\d{4}){2}(?!\d)"  # mobile 138-1234-5678
            r"|(?<![\d+])(?:\+?86[ -]?)?0\d{2,3}[ -](?:\d{7,8}|\d{3,4}[ -]\d{4})(?!\d)"  # landline 010-12345678
            r"|(?<![\w+])\+\d{1,3}[ -]?\(?\d{1,4}\)?(?:[ -]?\d{2,4}){2,4}(?!\d)"  # international +1 415 555 0100
            r"|(?<![\d-])\(?\d{3}\)?[ -.]\d{3}[ -.]\d{4}(?![\d-])"  # North American (415) 555-0100
        ),
    ),
    Rule(
        "ip_address",
        "[IP]",
        re.compile(r"(?<![\d.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?![\d.])"),
    ),
]


def probe(text: str) -> str:
    """``text`` with full-width forms folded to ASCII and JSON escapes blanked; same length, same positions."""
    return _ESCAPE.sub("  ", text.translate(_FOLD))


class Scrubber:
    """Replaces findings with placeholders and counts them by kind (``counts``)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def text(self, value: str) -> str:
        for rule in RULES:
            value = self._apply(rule, value)
        return value

    def _apply(self, rule: Rule, value: str) -> str:
        seen = probe(value)
        pieces, last = [], 0
        for match in rule.pattern.finditer(seen):
            start, end = match.span("v") if "v" in rule.pattern.groupindex else match.span()
            if rule.check is not None and not rule.check(seen[start:end]):
                continue
            pieces += [value[last:start], rule.placeholder]
            last = end
            self.counts[rule.kind] += 1
        return "".join(pieces) + value[last:] if pieces else value

    def value(self, value: Any) -> Any:
        """Scrub every string inside a JSON-like value (dict keys are kept)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        return value
