"""The safety filter on user corrections: a hinted answer that would teach the model something harmful.

A correction "不对，应该回答：X" makes ``X`` the turn's training target (:mod:`ark_trainer.loop.feedback`), so
whoever talks to the agent chooses what it learns. Before ``X`` becomes a row it goes through the
scrubber and this filter; a hint is dropped (the turn still counts as a plain correction: its answer is
not imitated, RFT samples new ones) when

- ``secret``: the scrubber finds anything in it (a password, key, token, verification code, card, ID or
  phone number, e-mail), or the placeholder the recorder's scrubbing left (``[PASSWORD]``, ...): a target
  must not carry one, not even as a placeholder;
- ``credential_request``: it asks for a credential or a payment secret: a verb of asking ("提供", "告诉",
  "发给我", "输入", "填写", "说下", "需要您的", "send", "tell me", "enter", "confirm", "what's the", ...)
  followed in the same sentence by (or, for "告诉/发给我/发过来/回复给", following) one of: password, passcode,
  PIN, 密码/口令 (bank-card, payment, login), verification or SMS code (验证码, 动态码, OTP, "收到的6位数字",
  "the code from the SMS"), card security code (CVV/CVC, 安全码, "the three digits on the back"), card
  expiry, private key, seed phrase (助记词), API key, secret key or token; or such a word asked about
  without a verb ("你的银行卡密码多少？", "支付密码是什么呢") — unless the sentence negates it ("请勿",
  "不要", "我们不会", "never", "don't", ...). Invisible characters and spaces inside a Chinese word
  ("密 码") do not hide it.

Limits (documented in docs/loop.md): it is a list of words, not a classifier. It reads Chinese and
English; a request phrased in other words ("把那串数字念给我听") or in another language passes; a warning
that mentions a secret without a negation it knows may be dropped (a lost correction, not a harmful one
kept). Dropped hints are counted by reason in ``ark-trainer status LOOP`` and the loop report.
"""

from __future__ import annotations

import re

from ark_trainer.data.scrub import RULES, Scrubber, visible

PLACEHOLDERS = sorted({rule.placeholder for rule in RULES})  # what the recorder left of a secret

_ASK = (
    r"提供|告诉|告知|发送|发给|发我|发来|发一下|报一下|报给|报上|输入|填写|填入|填一下|回复|说出|说一下|念一下|读一下"
    r"|说下|讲下|讲一下|报下|念下|发下|核对一下|确认一下|给我|给我们|提交|上传|拍照|截图|私信|需要(?:您|你)的?"
    r"|(?<![a-z])(?:send|tell|give|provide|share|enter|type|confirm|verify|reply with|read out"
    r"|what(?:'s| is| are) (?:your|the)|need your|submit|dm)(?![a-z])"
)
_SECRET_WORDS = (
    r"密码|密碼|口令|验证码|驗證碼|校验码|动态码|短信码|安全码|cvv2?|cvc2?|cvn|pin码?|卡背面|背面.{0,3}(?:三|3)位|有效期"
    r"|私钥|助记词|密钥|秘钥|令牌"
    r"|收到的[^。！？!?\n]{0,4}?[0-9一二三四五六七八九十两]\s*位(?:数字|数|码)?"  # 收到的6位数字: the SMS code
    r"|(?<![a-z])(?:password|passcode|pin|cvv|cvc|security code|verification code|sms code|one-time (?:pass)?code"
    r"|otp|private key|seed phrase|recovery phrase|api key|secret key|access token|token|expiry date"
    r"|expiration date|code (?:from|in) (?:the |your )?(?:sms|text|message))(?![a-z])"
)
_HAND_OVER = r"告诉|发给|发我|报给|给我|提供给|交给|私信|发过来|传过来|发送过来|回复给|转给|(?<![a-z])(?:to me|to us)(?![a-z])"
_WHAT = r"\s*(?:是|为)?\s*(?:多少|什么|啥|几)\s*(?=[?？呢吗啊呀]|$|[。！!，,])"  # 密码多少？ (not 密码多少位)
_REQUEST = re.compile(
    r"(?:" + _ASK + r")[^。！？!?\n.;；]{0,24}?(?:" + _SECRET_WORDS + r")"  # 请提供您的密码
    r"|(?:" + _SECRET_WORDS + r")[^。！？!?\n.;；]{0,16}?(?:" + _HAND_OVER + r")"  # 把密码发给我
    r"|(?:" + _SECRET_WORDS + r")" + _WHAT  # 你的银行卡密码多少: a question without a verb
)
_CJK_SPACE = re.compile(r"(?<=[\u3400-\u9fff])\s+(?=[\u3400-\u9fff])")  # 密 码: the word, spaced
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
    seen = _CJK_SPACE.sub("", visible(text).lower())
    for match in _REQUEST.finditer(seen):
        before = re.split(r"[。！？!?\n.;；]", seen[max(0, match.start() - NEGATION_WINDOW) : match.start()])[
            -1
        ]
        if not _NEGATION.search(before + match.group()):
            return "credential_request", match.group()
    return None
