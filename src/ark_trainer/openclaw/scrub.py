"""Scrub secrets and personal data from text before it is written as training data.

Each kind of finding becomes a fixed placeholder (``[PRIVATE_KEY]``, ``[API_KEY]``, ``[TOKEN]``,
``[EMAIL]``, ``[ID_NUMBER]``, ``[CARD_NUMBER]``, ``[PHONE]``, ``[IP]``) and is counted, so the caller can
report what was removed. Order matters: whole PEM blocks first, then keys and tokens (so a token with
digits is not half-eaten by the phone rule), then e-mail, ID and card numbers, then phone numbers.

    s = Scrubber(); clean = s.text("mail bob@corp.com"); s.counts  # {"email": 1}
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any


def _luhn_card(match: re.Match) -> str:
    """A 13-19 digit run is a card number only when its Luhn checksum holds (an order id usually fails)."""
    digits = [int(c) for c in match.group(0) if c.isdigit()]
    if not 13 <= len(digits) <= 19:
        return match.group(0)
    total = sum(d if i % 2 == 0 else (d * 2 - 9 if d > 4 else d * 2) for i, d in enumerate(reversed(digits)))
    return "[CARD_NUMBER]" if total % 10 == 0 else match.group(0)


# (kind, replacement, pattern); the replacement is a placeholder, a template keeping the key, or a function. Digit rules use look-arounds so that they never match inside a longer
# number (an order id is not a phone number).
RULES: list[tuple[str, Any, re.Pattern]] = [
    (
        "private_key",
        "[PRIVATE_KEY]",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
            re.S,
        ),
    ),
    (
        "api_key",
        "[API_KEY]",
        re.compile(
            r"\b(?:sk-(?:ant-|proj-|or-v1-|live-|test-)?[A-Za-z0-9_\-]{16,}"  # OpenAI, Anthropic, OpenRouter, ...
            r"|sk_(?:live|test)_[A-Za-z0-9]{16,}|rk_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
            r"|AKIA[0-9A-Z]{16}|ASIA[0-9A-Z]{16}"  # AWS access key ids
            r"|AIza[0-9A-Za-z_\-]{35}"  # Google API keys
            r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}"  # GitHub
            r"|glpat-[A-Za-z0-9_\-]{20,}"  # GitLab
            r"|xox[abposr]-[A-Za-z0-9\-]{10,}"  # Slack
            r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
            r"|npm_[A-Za-z0-9]{36})"  # npm
        ),
    ),
    ("token", r"\g<key>[TOKEN]", re.compile(r"(?P<key>(?i:bearer)\s+)[A-Za-z0-9\-._~+/]{16,}=*")),
    (
        "token",
        "[TOKEN]",
        re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    ),  # JWT
    (
        "token",  # key=value / "key": "value" assignments of secrets; the key name is kept
        r"\g<key>[TOKEN]",
        re.compile(
            r"(?P<key>(?i:api[_-]?key|access[_-]?token|auth[_-]?token|client[_-]?secret|secret|password|passwd"
            r"|token)[\"']?\s*[:=]\s*[\"']?)(?![\[])[^\s\"',;]{8,}"
        ),
    ),
    ("email", "[EMAIL]", re.compile(r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}\b")),
    (
        "id_number",  # Chinese resident ID: 6-digit area, birth date 18xx-20xx, 3 digits, check digit/X
        "[ID_NUMBER]",
        re.compile(
            r"(?<![0-9A-Za-z])[1-9]\d{5}(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[0-9Xx](?![0-9A-Za-z])"
        ),
    ),
    ("card_number", _luhn_card, re.compile(r"(?<!\d)(?:\d{4}[ -]?){3}\d{1,7}(?!\d)")),
    (
        "phone",
        "[PHONE]",
        re.compile(
            r"(?<![\d+])(?:\+?86[ -]?)?1[3-9]\d{9}(?!\d)"  # Chinese mobile
            r"|(?<![\d+])(?:\+?86[ -]?)?0\d{2,3}-\d{7,8}(?!\d)"  # Chinese landline 010-12345678
            r"|(?<![\w+])\+\d{1,3}[ -]?\(?\d{1,4}\)?(?:[ -]?\d{2,4}){2,4}(?!\d)"  # international +1 415 555 0100
            r"|(?<![\d-])\(?\d{3}\)?[ -.]\d{3}[ -.]\d{4}(?![\d-])"  # North American (415) 555-0100
        ),
    ),
    (
        "ip_address",
        "[IP]",
        re.compile(r"(?<![\d.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?![\d.])"),
    ),
]


class Scrubber:
    """Replaces findings with placeholders and counts them by kind (``counts``)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def text(self, value: str) -> str:
        for kind, replacement, pattern in RULES:
            new = pattern.sub(replacement, value)
            if new != value:
                self.counts[kind] += len(pattern.findall(value)) - len(pattern.findall(new))
                value = new
        return value

    def value(self, value: Any) -> Any:
        """Scrub every string inside a JSON-like value (dict keys are kept)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        return value
