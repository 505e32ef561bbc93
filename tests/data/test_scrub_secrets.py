"""Secrets in the spellings the scrubber (``data/scrub.py``) once missed.

Mobiles with dots or slashes or in Chinese digits, keys after Chinese labels without a colon, keys and
labels split by zero-width characters, verification and card security codes, e-mails spelled out. Each
sample is checked in every form it reaches training data in (``tests/data/scrub_forms.py``). The safety
filter on corrections that carry such a secret is checked in ``tests/loop/test_safety.py``.
"""

from __future__ import annotations

import json

import pytest

from ark_trainer.data.scrub import Scrubber
from tests.data.scrub_forms import ZW, as_en, as_json, as_tool_call, as_zh

FAMILIES: dict[str, list[tuple[str, str]]] = {
    "phone": [
        ("186.1234.5678", "[PHONE]"),
        ("186/1234/5678", "[PHONE]"),
        ("186·1234·5678", "[PHONE]"),
        ("+86 186.1234.5678", "[PHONE]"),
        ("１８６．１２３４．５６７８", "[PHONE]"),
        ("一八六一二三四五六七八", "[PHONE]"),
        ("幺八六 一二三四 五六七八", "[PHONE]"),
        ("壹捌陆壹贰叁肆伍陆柒捌", "[PHONE]"),
        ("一三八-一二三四-五六七八", "[PHONE]"),
        ("一八六零零零零幺幺幺幺", "[PHONE]"),
        (f"186{ZW}1234{ZW}5678", "[PHONE]"),
        ("13812345678".replace("5", "\u2060" + "5"), "[PHONE]"),
    ],
    "token": [
        ("接口密钥 abcd1234efgh5678", "接口密钥 [TOKEN]"),
        ("接口密钥abcd1234efgh5678", "接口密钥[TOKEN]"),
        ("API密钥是 abcd1234efgh5678", "API密钥是 [TOKEN]"),
        ("密钥 AbCdEfGhIjKlMnOp", "密钥 [TOKEN]"),
        ("访问令牌 Zx9Yw8Xv7Wu6", "访问令牌 [TOKEN]"),
        ("私钥：9f8e7d6c5b4a3210", "私钥：[TOKEN]"),
        (f"接口{ZW}密钥 abcd1234efgh5678", f"接口{ZW}密钥 [TOKEN]"),
        (f"api_key=abcd{ZW}1234efgh5678", "api_key=[TOKEN]"),
    ],
    "password": [
        ("口令 hunter22", "口令 [PASSWORD]"),
        ("密码abc123", "密码[PASSWORD]"),
        ("密码 Passw0rd!", "密码 [PASSWORD]"),
        ("支付密码 889900", "支付密码 [PASSWORD]"),
        ("银行卡密码 135790", "银行卡密码 [PASSWORD]"),
        ("取款密码是一二三四五六", "取款密码是[PASSWORD]"),
        (f"密{ZW}码：abc123", f"密{ZW}码：[PASSWORD]"),
        (f"password: hun{ZW}ter2x", "password: [PASSWORD]"),
    ],
    "code": [
        ("验证码 482913", "验证码 [CODE]"),
        ("短信验证码：482913", "短信验证码：[CODE]"),
        ("动态码是 5521", "动态码是 [CODE]"),
        ("安全码 123", "安全码 [CODE]"),
        ("CVV 123", "CVV [CODE]"),
        ("cvv2: 4567", "cvv2: [CODE]"),
        ("verification code is 482913", "verification code is [CODE]"),
        ("OTP 7788", "OTP [CODE]"),
    ],
    "api_key": [
        (f"sk-abc{ZW}defghijklmnopqrstuvwxyz123456", "[API_KEY]"),
        (f"AKIA{ZW}IOSFODNN7EXAMPLE", "[API_KEY]"),
        ("ghp_abcdefghij\u200cklmnopqrstuvwxyz0123456789", "[API_KEY]"),
        ("hf_abcdefghijklmnop\ufeffqrstuvwxyz0123456789", "[API_KEY]"),
    ],
    "email": [
        ("bob at gmail dot com", "[EMAIL]"),
        ("bob.smith AT corp DOT co DOT uk", "[EMAIL]"),
        ("bob [at] qq [dot] com", "[EMAIL]"),
        ("bob(at)163(dot)com", "[EMAIL]"),
        ("bob(at)163.com", "[EMAIL]"),
        ("bob {at} corp.cn", "[EMAIL]"),
        ("bob <at> corp <dot> io", "[EMAIL]"),
        ("bob at gmail.com", "[EMAIL]"),
        ("bob 艾特 qq 点 com", "[EMAIL]"),
        ("bob艾特163点com", "[EMAIL]"),
        ("bob @ gmail dot com", "[EMAIL]"),
        (f"bob{ZW}@corp.com", "[EMAIL]"),
    ],
}
CASES = [(family, raw, clean) for family, samples in FAMILIES.items() for raw, clean in samples]


@pytest.mark.parametrize("form", [as_zh, as_en, as_json], ids=["zh", "en", "json"])
@pytest.mark.parametrize(("family", "raw", "clean"), CASES)
def test_each_new_spelling_in_text_and_json(family, raw, clean, form):
    s = Scrubber()
    assert s.text(form(raw)) == form(clean)
    assert set(s.counts) == {family}


@pytest.mark.parametrize(("family", "raw", "clean"), CASES)
def test_each_new_spelling_in_tool_call_arguments(family, raw, clean):
    text, calls = as_tool_call(raw)
    s = Scrubber()
    out = s.text(text) + json.dumps(s.value(calls), ensure_ascii=False)
    assert set(s.counts) == {family}
    visible = raw.replace(ZW, "")
    assert visible not in out.replace(ZW, "").replace("\\u200b", "")


@pytest.mark.parametrize(
    ("family", "raw", "clean"),
    [c for c in CASES if ZW in c[1] and c[1].isascii() is False and c[1].replace(ZW, "").isascii()],
)
def test_zero_width_as_a_json_escape(family, raw, clean):
    """A tool call's arguments serialised with ensure_ascii: the zero-width space is ``\\u200b`` text."""
    s = Scrubber()
    out = s.text(json.dumps({"v": as_en(raw)}))
    assert set(s.counts) == {family}, out


ORDINARY = [
    "一二三四五六七八九，这是九个数",
    "第一二三名分别是张三、李四、王五",
    "价格 186.12 元，共 1234.56 元",
    "版本 1.3.5678 发布",
    "密码错误，请重试；请设置 8 位以上的密码",
    "修改密码后 3 天生效",
    "验证码已发送，验证码 6 位数字，5 分钟内有效",
    "密钥管理服务 KMS 与令牌桶算法",
    "look at this, we arrived at home at 5",
    "Contact us at support.example.com or visit example.com",
    "meet at the station",
    "CVV is the code on the back of the card",
    "the password must have 8 characters",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_left_alone(text):
    s = Scrubber()
    assert s.text(text) == text
    assert not s.counts


@pytest.mark.slow
def test_adversarial_spellings_are_scrubbed_in_linear_time():
    """Long runs aimed at the new rules (spelled e-mails, Chinese labels and digits, invisible characters)."""
    import subprocess
    import sys

    code = (
        "from ark_trainer.data.scrub import Scrubber\n"
        "s = Scrubber()\n"
        "for text in ['bob at ' * 100_000, 'x dot ' * 100_000, 'a [at] b ' * 50_000, 'a艾特' * 100_000,\n"
        "             'a点' * 150_000, '密钥' * 100_000, '一' * 400_000, '\\u200b' * 300_000, 'a\\u200b' * 200_000,\n"
        "             '验证码' * 100_000, 'cvv ' * 100_000, '密码 ' * 100_000, '1.' * 200_000]:\n"
        "    s.text(text)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=90)
    assert result.returncode == 0, result.stderr
