"""The safety filter on user corrections: a hinted answer that would teach the model something harmful.

A correction "不对，应该回答：X" makes ``X`` the turn's training target (:mod:`ark_trainer.loop.feedback`), so
whoever talks to the agent chooses what it learns. Before ``X`` becomes a row it goes through the
scrubber and this filter; a hint is dropped (the turn still counts as a plain correction: its answer is
not imitated, RFT samples new ones) when

- ``secret``: the scrubber finds anything in it (a password, key, token, verification code, card, ID or
  phone number, e-mail), or the placeholder the recorder's scrubbing left (``[PASSWORD]``, ...): a target
  must not carry one, not even as a placeholder;
- ``credential_request``: it asks for a credential or a payment secret: a verb of asking ("提供", "告诉",
  "发给我", "输入", "填写", "send", "tell me", "enter", "confirm", ...) followed in the same sentence by
  (or, for "告诉/发给我/给我", following) one of: password, passcode, PIN, 密码/口令 (bank-card, payment, login), verification or SMS code
  (验证码, 动态码, OTP), card security code (CVV/CVC, 安全码, "the three digits on the back"), card
  expiry, private key, seed phrase (助记词), API key, secret key or token — unless the sentence negates
  it ("请勿", "不要", "我们不会", "never", "don't", ...).

Limits (documented in docs/loop.md): it is a list of words, not a classifier. It reads Chinese and
English; a request phrased without one of the verbs ("你的密码多少") or in another language passes; a
warning that mentions a secret without a negation it knows may be dropped (a lost correction, not a
harmful one kept). Dropped hints are counted by reason in ``ark-trainer status LOOP`` and the loop report.
"""

from __future__ import annotations

import re

from ark_trainer.data.scrub import RULES, Scrubber, visible

PLACEHOLDERS = sorted({rule.placeholder for rule in RULES})  # what the recorder left of a secret

_ASK = (
    r"提供|告诉|告知|发送|发给|发我|发来|发一下|报一下|报给|报上|输入|填写|填入|填一下|回复|说出|说一下|念一下|读一下"
    r"|核对一下|确认一下|给我|给我们|提交|上传|拍照|截图|私信"
    r"|(?<![a-z])(?:send|tell|give|provide|share|enter|type|confirm|verify|reply with|read out|what(?:'s| is) your"
    r"|need your|submit|dm)(?![a-z])"
)
_SECRET_WORDS = (
    r"密码|密碼|口令|验证码|驗證碼|校验码|动态码|短信码|安全码|cvv2?|cvc2?|cvn|pin码?|卡背面|背面.{0,3}(?:三|3)位|有效期"
    r"|私钥|助记词|密钥|秘钥|令牌"
    r"|(?<![a-z])(?:password|passcode|pin|cvv|cvc|security code|verification code|sms code|one-time (?:pass)?code"
    r"|otp|private key|seed phrase|recovery phrase|api key|secret key|access token|token|expiry date"
    r"|expiration date)(?![a-z])"
)
_HAND_OVER = r"告诉|发给|发我|报给|给我|提供给|交给|私信|(?<![a-z])(?:to me|to us)(?![a-z])"
_REQUEST = re.compile(
    r"(?:" + _ASK + r")[^。！？!?\n.;；]{0,24}?(?:" + _SECRET_WORDS + r")"  # 请提供您的密码
    r"|(?:" + _SECRET_WORDS + r")[^。！？!?\n.;；]{0,16}?(?:" + _HAND_OVER + r")"  # 把密码发给我
)
_NEGATION = re.compile(
    r"不要|勿|别(?![人的处])|不会|绝不|从不|不可|不能|无需|不需要|不用|切莫|禁止|谨防|(?<![a-z])(?:never|don'?t|do not|won'?t"
    r"|will not|no need|not ask|shouldn'?t|should not|avoid)(?![a-z])"
)
NEGATION_WINDOW = 8  # characters before the verb that may hold the negation ("我们不会要求您提供密码")


def correction_problem(text: str) -> tuple[str, str] | None:
    """``(reason, detail)`` when the hinted answer ``text`` must not become a training target, else None."""
    scrubber = Scrubber()
    scrubber.text(text)
    if scrubber.counts:
        return "secret", ", ".join(sorted(scrubber.counts))
    left = [p for p in PLACEHOLDERS if p in text]  # recorded turns are scrubbed already
    if left:
        return "secret", ", ".join(left)
    seen = visible(text).lower()
    for match in _REQUEST.finditer(seen):
        before = re.split(r"[。！？!?\n.;；]", seen[max(0, match.start() - NEGATION_WINDOW) : match.start()])[
            -1
        ]
        if not _NEGATION.search(before + match.group()):
            return "credential_request", match.group()
    return None
