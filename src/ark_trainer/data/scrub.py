"""Scrub secrets and personal data from text before it is written as training data.

Each kind of finding becomes a fixed placeholder (``[PRIVATE_KEY]``, ``[API_KEY]``, ``[TOKEN]``,
``[PASSWORD]``, ``[CODE]``, ``[SEED_PHRASE]``, ``[EMAIL]``, ``[ID_NUMBER]``, ``[CARD_NUMBER]``, ``[PHONE]``,
``[IP]``) and is counted, so
the caller can report what was removed. Order matters: whole PEM blocks first, then keys and tokens (so a
token with digits is not half-eaten by the phone rule), then e-mail, ID and card numbers, then phones.

The rules match on a *probe* of the text: full-width forms (``１３８``, ``：``, ``＠``) and Chinese digits
(``一八六``, ``幺``, ``壹``, ``〇``) folded to ASCII, JSON escapes (``\\n``) blanked, and invisible characters
(zero-width space and joiners, the BOM, bidi marks, soft hyphen, the Hangul fillers and the braille blank,
and their ``\\u200b`` escapes) left out,
so ``１３８１２３４５６７８``, ``幺八六一二三四五六七八``, a key split by a zero-width space and a key after an
escaped newline inside a tool call's JSON are found; the replacement is applied to the original text by
position (a finding's invisible characters go with it). Digit rules refuse to match inside a longer
number, card numbers must pass Luhn and start like a card, and ID numbers must hold a real birth date, so
order ids and prices are left alone.

What is covered, by kind: PEM private keys; API keys by their vendors' prefixes (OpenAI, Anthropic, AWS,
Alibaba, Tencent, Google, GitHub, GitLab, Slack, Hugging Face, Groq, npm, Stripe) and AWS secret shapes;
bearer tokens and JWTs; any value after a key name (``api_key=``, ``"client_secret": ``) or a Chinese label
with or without a colon (``密钥``, ``接口密钥 sk…``, ``令牌``, ``口令 hunter22``, ``密码abc123``,
``支付密码是 …``, ``password是 …``); a card PIN (``PIN 1234``, ``my PIN is 1234``); verification codes and
card security codes after their label (``验证码 123456``, ``CVV 123``); wallet seed phrases after their
label (``助记词：`` / ``seed phrase:`` and 12-24 words); e-mail addresses, also IDN and spelled out
(``name at gmail dot com``, ``name[at]qq[dot]com``, ``name 艾特 163 点 com``, ``name @ gmail . com``,
``bob dot smith at …``); Chinese resident ID numbers; card numbers; phone numbers (Chinese mobiles with
spaces, dashes of any width, dots, slashes, underscores, commas, a bracketed prefix or a separator between
every digit, landlines, international and North American forms); IPv4 addresses.
Not covered: secrets without a label or a known shape (a bare random word), numbers spelled as Chinese
words with units or counts (``一百八十六``, ``六个八``), labels spelled a letter at a time
(``p a s s w o r d``), e-mails without a top-level domain (``bob at gmail``) or with ``_at_``/``period``
for the signs, personal names and street addresses.

    s = Scrubber(); clean = s.text("mail bob@corp.com"); s.counts  # {"email": 1}
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from itertools import compress
from typing import Any

_CHINESE_DIGITS = {c: str(d) for d, chars in enumerate(
    ["〇零○", "一壹幺", "二贰貳两", "三叁參", "四肆", "五伍", "六陆陸", "七柒", "八捌", "九玖"]
) for c in chars}  # fmt: skip
_WIDTH = {chr(0xFF01 + i): chr(0x21 + i) for i in range(94)} | {"\u3000": " "}
_FOLD_WIDTH = str.maketrans(_WIDTH)
_FOLD = str.maketrans(_WIDTH | _CHINESE_DIGITS)
_ESCAPE = re.compile(r"\\[nrtbf]")
# Characters that render as nothing (and their JSON escapes): a key split by one must still be found.
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u2800\u3164"
    "\ufe00-\ufe0f\ufeff\uffa0\U000e0000-\U000e0fff]"  # and the blanks: Hangul fillers, the braille blank
    r"|\\u(?:00ad|115f|1160|200[b-f]|202[a-e]|206[0-9a-f]|2800|3164|feff|ffa0)",
    re.I,
)


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


def _token_like(value: str) -> bool:
    """After a Chinese key label: a value with a digit, or mixed case (not an English word)."""
    return any(c.isdigit() for c in value) or (
        any(c.isupper() for c in value) and any(c.islower() for c in value)
    )


def _seed_words(value: str) -> bool:
    """12, 15, 18, 21 or 24 words: a wallet's seed phrase (the match stops at the 24th at most)."""
    return len(value.split()) in (12, 15, 18, 21, 24)


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
_ZH_PASSWORD = (
    r"(?:登录|支付|账户|账号|邮箱|交易|取款|银行卡|网银|开机|无线|wifi|WiFi|WIFI)?(?:密码|密碼|口令)"
)
_ZH_KEY = r"(?:接口|访问|应用|开发者|API|api|Api)?(?:密钥|密鑰|秘钥|私钥|令牌|凭证|授权码)"
_ZH_IS = r"(?:\s*(?:[:=]|是|为|為))?\s*[\"'“]?"  # 密钥：x / 密钥是 x / 密钥 x / 密钥x
_CODE_LABEL = (
    r"(?:短信|手机|动态|邮箱|支付)?(?:验证码|驗證碼|校验码|校驗碼|动态码|安全码)"
    r"|(?<![A-Za-z])(?i:cvv2?|cvc2?|cvn|otp|verification code|security code|one-time (?:pass)?code)(?![A-Za-z])"
)
_LOCAL = (
    r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9][A-Za-z0-9._%+\-]{0,63}"
    r"(?:(?:\s+(?i:dot)\s+|\s*[\[({<]\s*(?i:dot)\s*[\])}>]\s*)[A-Za-z0-9][A-Za-z0-9._%+\-]{0,63}){0,3}"
)  # bob.smith, bob dot smith
_AT_MARK = r"(?:\s*[\[({<]\s*(?i:at|@)\s*[\])}>]\s*|\s*艾特\s*)"  # [at] (at) {at} <at> 艾特
_AT_WORD = r"(?:\s+(?i:at)\s+|\s+@\s*|\s*@\s+)"  # " at ", " @ "
_DOT_SPELLED = r"(?:\s*[\[({<]\s*(?i:dot)\s*[\])}>]\s*|\s+(?i:dot)\s+|\s*点\s*|\s+\.\s*|\.\s+)"
_LABEL = r"[A-Za-z0-9][A-Za-z0-9\-]{0,62}"
_TLD = r"(?i:com|net|org|edu|gov|cn|io|co|uk|de|jp|me|info|biz|top|xyz|dev|ai|app|hk|tw|sg|us|ru|fr)(?![A-Za-z0-9])"
_DOMAIN_ANY = (
    _LABEL + r"(?:(?:" + _DOT_SPELLED + r"|\.)" + _LABEL + r"){0,3}(?:" + _DOT_SPELLED + r"|\.)" + _TLD
)
_DOMAIN_SPELLED = _LABEL + r"(?:(?:" + _DOT_SPELLED + r"|\.)" + _LABEL + r"){0,3}" + _DOT_SPELLED + _TLD
_WEBMAIL = r"(?i:gmail|googlemail|qq|163|126|yeah|sina|sohu|aliyun|foxmail|outlook|hotmail|live|yahoo|icloud|proton(?:mail)?)\.(?i:com|cn|net|me)(?![A-Za-z0-9])"
# between the groups of a mobile: a space, or one separator (with a space either side or not)
_WORD = r"(?-i:[a-z]{3,8})"  # a word of a wallet's seed phrase (BIP-39 words have 3 to 8 letters)
_PHONE_SEP = r"(?:\s?[\-./·_,~\u2010-\u2015\u2212]\s?|\s)?"
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
            r"(?:(?i:password|passcode)\s+(?:is|was)\s+|(?:(?i:password|passcode)|密码|密碼|口令)\s*(?:是|为|為)\s*)[\"'“]?"
            + _PASSWORD_VALUE
        ),
        _password_like,
    ),
    Rule(  # PIN: 1234 / PIN 482913 / my PIN is 1234 / pin=9876: a card PIN, digits only
        "password",
        "[PASSWORD]",
        re.compile(
            r"(?<![A-Za-z])(?i:pin)(?:\s*(?:[:=]|(?i:is|was)(?![A-Za-z])|是|为)\s*|\s+)(?P<v>\d{4,12})(?!\d)"
        ),
    ),
    Rule(  # 密码abc123 / 口令 hunter22 / 支付密码 889900: a Chinese label without a colon
        "password",
        "[PASSWORD]",
        re.compile(
            _ZH_PASSWORD
            + r"\s*[\"'“]?"
            + r"(?P<v>(?![:=])[^\s\"'`,;:=\\<>\[\]，。；、“”‘’\u3000-\u9fff]{4,})"
        ),
        _password_like,
    ),
    Rule(  # 助记词：abandon ability … (12 to 24 words of 3-8 letters, as wallets write them)
        "seed_phrase",
        "[SEED_PHRASE]",
        re.compile(
            r"(?:(?:助记词|助記詞|(?i:(?:secret\s+)?(?:seed|recovery)\s+phrase))(?:\s*(?:[:=]|是|为|(?i:is))\s*|\s+)"
            r"|(?i:mnemonic(?:\s+phrase)?)\s*(?:[:=]|是|为|(?i:is))\s*)[\"'“]?"
            r"(?P<v>"
            + "|".join(rf"{_WORD}(?:\s+{_WORD}){{{n - 1}}}" for n in (24, 21, 18, 15, 12))
            + r")(?![A-Za-z])"
        ),
        _seed_words,
    ),
    Rule(  # 接口密钥 abcd1234… / 密钥：… / 令牌是 …: the label is kept
        "token",
        "[TOKEN]",
        re.compile(_ZH_KEY + _ZH_IS + r"(?P<v>(?!\[)[A-Za-z0-9_\-+/=.~]{8,})"),
        _token_like,
    ),
    Rule(  # 验证码 123456 / CVV: 123 / verification code is 4821
        "code",
        "[CODE]",
        re.compile(
            r"(?:" + _CODE_LABEL + r")(?:\s*(?:[:=]|是|为|為|(?i:is|was)\s))?\s*[\"'“]?"
            r"(?P<v>(?<![0-9A-Za-z])[0-9A-Za-z]{3,8})(?![0-9A-Za-z])"
        ),
        lambda v: any(c.isdigit() for c in v),
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
    Rule(  # spelled out: name at gmail dot com, name[at]qq[dot]com, name(at)163.com, name 艾特 qq 点 com
        "email",
        "[EMAIL]",
        re.compile(
            _LOCAL
            + r"(?:"
            + _AT_MARK
            + _DOMAIN_ANY
            + r"|"
            + _AT_WORD
            + _DOMAIN_SPELLED
            + r"|\s+(?i:at)\s+"
            + _WEBMAIL
            + r")"
        ),  # fmt: skip
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
            r"(?<![\d+.])(?:(?:\+|00)86[ -]?|\(\+?86\)[ -]?)?(?:\(1[3-9]\d\)|1[3-9]\d)(?:"
            + _PHONE_SEP
            + r"\d{4}){2}"
            r"(?![\d.]\d|\d)"  # 138-1234-5678, 138_1234_5678, 138 – 1234 – 5678, (138)1234-5678
            r"|(?<![\d+.\-])1[ \-][3-9](?:[ \-]\d){9}(?![\d]|[ \-]\d)"  # 1 3 8 1 2 3 4 5 6 7 8
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
    """``text`` with full-width forms and Chinese digits folded to ASCII and JSON escapes blanked; same
    length, same positions (invisible characters are left out by :func:`probe_map`)."""
    return _ESCAPE.sub("  ", text.translate(_FOLD))


def visible(text: str) -> str:
    """``text`` with full-width forms folded to ASCII and invisible characters left out (for word rules)."""
    return _INVISIBLE.sub("", text.translate(_FOLD_WIDTH))


def probe_map(text: str) -> tuple[str, list[int] | None]:
    """(probe without invisible characters, the original position of each probe character and of its end);
    ``None`` for the positions when nothing was left out (they are the same)."""
    seen = probe(text)
    if not _INVISIBLE.search(text):
        return seen, None
    keep = bytearray(b"\1") * (len(text) + 1)
    for match in _INVISIBLE.finditer(text):
        keep[match.start() : match.end()] = bytes(match.end() - match.start())
    return "".join(compress(seen, keep)), list(compress(range(len(text) + 1), keep))


class Scrubber:
    """Replaces findings with placeholders and counts them by kind (``counts``)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def text(self, value: str) -> str:
        probed = probe_map(value)
        for rule in RULES:
            scrubbed = self._apply(rule, value, probed)
            if scrubbed is not value:
                value, probed = scrubbed, probe_map(scrubbed)
        return value

    def _apply(self, rule: Rule, value: str, probed: tuple[str, list[int] | None]) -> str:
        seen, index = probed
        pieces, last = [], 0
        for match in rule.pattern.finditer(seen):
            start, end = match.span("v") if "v" in rule.pattern.groupindex else match.span()
            if rule.check is not None and not rule.check(seen[start:end]):
                continue
            if index is not None:  # back to the original's positions, invisible characters inside included
                start, end = index[start], index[end - 1] + 1 if end > start else index[start]
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
