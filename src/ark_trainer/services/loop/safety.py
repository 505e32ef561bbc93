"""The safety filter on user corrections: a hinted answer that would teach the model something harmful.

A correction "不对，应该回答：X" makes ``X`` the turn's training target (:mod:`ark_trainer.services.loop.feedback`), so
whoever talks to the agent chooses what it learns. Before ``X`` becomes a row it goes through the
scrubber and this filter; a hint is dropped (the turn still counts as a plain correction: its answer is
not imitated, RFT samples new ones) for the first of these reasons:

- ``secret``: the scrubber finds anything in it (a password, key, token, verification code, card, ID or
  phone number, e-mail), or the placeholder the recorder's scrubbing left (``[PASSWORD]``, ...);
- ``credential_request``: it asks for a credential or payment data: a verb of asking (Chinese, English,
  Japanese, Russian: "提供", "告诉", "发给我", "输入", "需要您的", "send", "tell me", "what's your", "教えて",
  "пришлите", ...) with, in the same clause, a password, PIN, verification or SMS code ("收到的那串数字",
  "the 6-digit code we texted you"), a card's security code ("背后的三个数字", CVV), expiry, full card
  number, ID or social security number, login credentials, private key or seed phrase (also in pinyin:
  "mima", "yanzhengma"); or such a word asked about without a verb ("密码是多少？");
- ``link``, ``money_transfer``, ``harmful``, ``abuse``, ``injection``: see :mod:`ark_trainer.services.loop.hazards`.

Every rule reads the normalised text (:mod:`ark_trainer.services.loop.normalize`: NFKC, case folding, Cyrillic and
Greek look-alikes, full-width and spaced letters, leetspeak, zero-width characters); the correction that
is learned is the user's own text. A request is let through only when a negation governs its verb in the
same clause, or the clause reports someone else's request (:mod:`ark_trainer.services.loop.clauses`): "不要把验证码
告诉任何人" and "违规：客服要求客户提供验证码" pass, "不要担心，请告诉我您的密码" does not. A request to enter
a code or password in the official app ("请只在官方 App 内输入密码") is an instruction, not a request.

Where the loop's reward has a reward model or an LLM judge, :func:`veto_hints` lets it veto a hint too.
Dropped hints are counted by reason in ``ark-trainer status LOOP`` and the loop report. Measured recall and
limits: docs/loop.md.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ark_trainer.data.scrub import RULES, Scrubber
from ark_trainer.services.loop import hazards
from ark_trainer.services.loop.clauses import NEGATION, clauses, governed, reported
from ark_trainer.services.loop.normalize import views

PLACEHOLDERS = sorted({rule.placeholder for rule in RULES})  # what the recorder left of a secret

_ASK = (
    r"提供|告诉|告知|发送|发给|发我|发来|发一下|报一下|报给|报上|输入|填写|填入|填一下|回复|说出|说一下"
    r"|念一下|读一下|说下|讲下|讲一下|报下|念下|发下|核对一下|确认一下|给我|给我们|提交|上传|拍照|截图|私信|透露|念给"
    r"|需要(?:您|你)的?|(?:您|你)的?[^，。]{0,8}?方便说"
    r"|(?<![a-z])(?:send|tell|give|provide|share|enter|type|input|confirm|verify|reply with|respond with|read (?:out|me)"
    r"|ask for|what(?:'s| is| are) (?:your|the)|what(?= (?:pin|password|passcode|code|cvv)(?![a-z]))|need (?:your|the)"
    r"|submit|dm(?: me)?|text me|upload|paste|write(?: down)?)(?![a-z])"
    r"|教えて|入力|送って|送信|伝えて|お知らせ|пришлите|отправьте|скажите|назовите|введите|сообщите"
)
_SECRET_WORDS = (
    r"密码|口令|验证码|校验码|动态码|短信码|安全码|cvv2?|cvc2?|cvn|pin码?|卡背面|背(?:面|后)的?[^，。]{0,6}(?:数字|数|码|位)"
    r"|签名栏|有效期|私钥|助记词|密钥|秘钥|令牌|卡号|身份证(?:号码?|照片|正反面)?|社保号|短信截图|短信内容"
    r"|收到的[^，。\n]{0,6}?(?:数字|号码|代码|短信)|短信(?:里|中)?的?[^，。]{0,4}(?:数字|码)"
    r"|(?<![a-z])(?:password|passwd|pass word|passcode|pw|pwd|pin|cvv|cvc|security code|verification code|sms code"
    r"|one[- ]time (?:pass)?code|otp|(?:2fa|mfa|two[- ]factor|authentication|auth|login|security) code|private key|seed phrase|recovery phrase|api key|secret key|access token|token"
    r"|expiry date|expiration date|card number|card's expiration|credentials|login details|social security"
    r"|ssn|id card|passport number|maiden name|(?:(?<!\d)\d+|three|four|six)[- ]digit (?:code|number|card number)"
    r"|code (?:from|in) (?:the |your )?(?:sms|text|message)|code (?:you|that you) (?:received|got)|code (?:we|i) (?:sent|texted)"
    r"|(?:codes?|numbers?|digits)[^,.;]{0,12}(?:on|at) the (?:back|front) of|mima"
    r"|(?:screenshot|photo|picture) of (?:the |your )?(?:text|sms|message|card)|mi ma|yan ?zheng ?ma)(?![a-z])"
    r"|パスワード|暗証番号|認証コード|確認コード|セキュリティコード|カード番号|пароль|код"
)
_HAND_OVER = (
    r"给一下|给下|(?:打|写|发|输入|填|贴|留)在(?:对话框|聊天框|聊天窗口|聊天里|这里|下方|评论)|输入到|填到|填写到|发到|告诉|发给|发我|报给|给我|提供给|交给|私信|发过来|传过来|发送过来|回复给|回复过来|转给|说一下|说下|念一下|报一下"
    r"|(?<![a-z])(?:to me|to us)(?![a-z])"
)
_WHAT = r"\s*(?:是|为)?\s*(?:多少|什么|啥|几)\s*(?=[?？呢吗啊呀]|$|[。！!，,])|\s*是\s*(?=[?？]|$)"
_REQUEST = re.compile(
    r"(?P<verb>" + _ASK + r")(?P<object>[^。！？!?\n;；]{0,40}?)(?:" + _SECRET_WORDS + r")"  # 请提供您的密码
    r"|(?:" + _SECRET_WORDS + r")[^。！？!?\n;；]{0,16}?(?P<verb2>" + _HAND_OVER + r")"  # 把密码发给我
    r"|(?:" + _SECRET_WORDS + r")(?:" + _WHAT + r")"  # 你的银行卡密码多少: a question without a verb
    r"|(?:" + _SECRET_WORDS + r")[をは]?[^。]{0,8}?(?:ください|下さい)"  # パスワードを…ください
    r"|^\s*(?:your|ur) (?:" + _SECRET_WORDS + r")\s*,?\s*(?P<verb3>please)"  # your password please
)
# the speaker announces sending ("我们会通过短信发送验证码", "we'll send you a code"): no request
_ANNOUNCED = re.compile(
    r"(?:我们|系统|平台|银行)(?:会|将)[^，。]{0,8}$|(?<![a-z])we(?:'ll| will)[^,.]{0,12}$"
)
_OFFICIAL = re.compile(r"官方\s*app|app\s*(?:内|中|里)|官网|官方网站|柜台|营业厅|official app|in the app")
_TYPE_IN = re.compile(r"输入|填写|enter|type")


def credential_request(seen_views: Sequence[str]) -> str | None:
    """The first request for a credential in a clause of ``seen_views`` that no negation governs, none
    reports and that is not an instruction to type it in the official app."""
    for seen in seen_views:
        for _, clause in clauses(seen):
            for match in _REQUEST.finditer(clause):
                verb = hazards.verb_at(match)
                if governed(clause, verb) or reported(clause, verb) or _ANNOUNCED.search(clause[:verb]):
                    continue
                if match.group("object") and NEGATION.search(match.group("object")):
                    continue  # 告知官方不会索要验证码: the secret is the object of a negated verb
                if _OFFICIAL.search(clause) and _TYPE_IN.match(clause, verb):
                    continue
                return match.group()
    return None


def correction_problem(text: str, allowed_domains: Sequence[str] = ()) -> tuple[str, str] | None:
    """``(reason, detail)`` when the hinted answer ``text`` must not become a training target, else None.

    ``allowed_domains``: hosts a link in a correction may point to (their subdomains too); any other
    link drops the correction."""
    scrubber = Scrubber()
    scrubber.text(text)
    if scrubber.counts:
        return "secret", ", ".join(sorted(scrubber.counts))
    left = [p for p in PLACEHOLDERS if p in text]  # recorded turns are scrubbed already
    if left:
        return "secret", ", ".join(left)
    seen = views(text)
    checks = (
        ("injection", hazards.injection),
        ("credential_request", credential_request),
        ("link", lambda v: hazards.link(v, allowed_domains)),
        ("money_transfer", lambda v: hazards.money_transfer(v, text)),
        ("harmful", hazards.harmful),
        ("abuse", hazards.abuse),
    )
    for reason, check in checks:
        found = check(seen)
        if found:
            return reason, found
    return None


JUDGE_VETO = 0.5  # a reward model's or judge's score in [0, 1] below which a hinted answer is not learned


def judges(reward: Any) -> list[Any]:
    """The components of ``reward`` that judge an answer as a whole: a reward model or an LLM judge."""
    from ark_trainer.rewards.guards import unguarded
    from ark_trainer.rewards.llm_judge import LLMJudge
    from ark_trainer.rewards.reward_model import LazyRewardModel, RewardModelScorer

    kinds = (LLMJudge, LazyRewardModel, RewardModelScorer)
    return [c for c in getattr(reward, "components", []) if isinstance(unguarded(c.fn), kinds)]


def veto_hints(rows: list[dict], reward: Any, dropped: Any = None, threshold: float = JUDGE_VETO) -> None:
    """Turn the hinted rows whose hint the loop's reward model or judge scores below ``threshold`` (the
    mean of those that score it) into plain corrections, in place; ``dropped`` (a Counter) counts them as
    ``judge_veto``. Nothing happens without such a component; a judge that cannot score a hint (None)
    does not veto it."""
    hinted = [
        r for r in rows if r.get("reference") and r["messages"] and r["messages"][-1]["role"] == "assistant"
    ]
    comps = judges(reward)
    if not hinted or not comps:
        return
    prompts = [r["messages"][:-1] for r in hinted]
    hints = [r["reference"] for r in hinted]
    columns = {"reference": hints}
    table = [comp.fn(prompts=prompts, completions=hints, **columns) for comp in comps]
    for i, row in enumerate(hinted):
        scores = [float(s[i]) for s in table if s[i] is not None]
        if scores and sum(scores) / len(scores) < threshold:
            row["messages"] = row["messages"][:-1]
            del row["reference"]
            row["feedback"] = -1
            if dropped is not None:
                dropped["judge_veto"] += 1
