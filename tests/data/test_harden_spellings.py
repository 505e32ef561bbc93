"""More spellings of the same secrets, and more ways of asking for them (a third adversarial round).

The scrubber: mobiles with underscores, commas, dashes of other widths, spaced separators, brackets or a
space between every digit; keys split by the blank characters that are not zero-width (Hangul fillers,
the braille blank); ``password是…`` and a card PIN; e-mails with spaced ``@``/``.`` and a spelled-out dot in
the local part; wallet seed phrases. The safety filter: requests without an asking verb ("你的银行卡密码多少"),
with verbs it did not know (说下, 需要您的, 发过来, 回复给), a secret word split by a space, and the code of
an SMS asked for in other words. Ordinary text around them must survive.
"""

from __future__ import annotations

import pytest

from ark_trainer.data.scrub import Scrubber
from tests.data.test_harden_scrub import as_en, as_json, as_zh

SEED = "abandon ability able about above absent absorb abstract absurd abuse access accident"
FAMILIES: dict[str, list[tuple[str, str]]] = {
    "phone": [
        ("186_1234_5678", "[PHONE]"),
        ("186,1234,5678", "[PHONE]"),
        ("186–1234–5678", "[PHONE]"),
        ("186—1234—5678", "[PHONE]"),
        ("186 - 1234 - 5678", "[PHONE]"),
        ("(186)1234-5678", "[PHONE]"),
        ("(186) 1234 5678", "[PHONE]"),
        ("1 8 6 1 2 3 4 5 6 7 8", "[PHONE]"),
        ("1-8-6-1-2-3-4-5-6-7-8", "[PHONE]"),
    ],
    "api_key": [
        ("sk-abc\u3164defghijklmnopqrstuvwxyz123456", "[API_KEY]"),
        ("sk-abc\u2800defghijklmnopqrstuvwxyz123456", "[API_KEY]"),
        ("ghp_abcdefghij\u115fklmnopqrstuvwxyz0123456789", "[API_KEY]"),
        ("hf_abcdefghijklmnop\uffa0qrstuvwxyz0123456789", "[API_KEY]"),
    ],
    "password": [
        ("password是hunter22", "password是[PASSWORD]"),
        ("密码是：Abc12345", "密码是[PASSWORD]"),
        ("PIN: 1234", "PIN: [PASSWORD]"),
        ("PIN 482913", "PIN [PASSWORD]"),
        ("my PIN is 1234", "my PIN is [PASSWORD]"),
        ("card pin=9876", "card pin=[PASSWORD]"),
    ],
    "email": [
        ("bob @ gmail . com", "[EMAIL]"),
        ("bob dot smith at gmail dot com", "[EMAIL]"),
        ("bob.smith at corp dot com", "[EMAIL]"),
    ],
    "seed_phrase": [
        (f"助记词：{SEED}", "助记词：[SEED_PHRASE]"),
        (f"seed phrase: {SEED}", "seed phrase: [SEED_PHRASE]"),
        (f"mnemonic: {SEED}", "mnemonic: [SEED_PHRASE]"),
        (f"recovery phrase {SEED} {SEED.replace('able ', 'acid ')}", "recovery phrase [SEED_PHRASE]"),
    ],
}
CASES = [(family, raw, clean) for family, samples in FAMILIES.items() for raw, clean in samples]


@pytest.mark.parametrize("form", [as_zh, as_en, as_json], ids=["zh", "en", "json"])
@pytest.mark.parametrize(("family", "raw", "clean"), CASES)
def test_each_spelling_in_text_and_json(family, raw, clean, form):
    s = Scrubber()
    assert s.text(form(raw)) == form(clean)
    assert set(s.counts) == {family}


ORDINARY = [
    "ISBN 978-7-115-12345-6",
    "营业时间 9:00-18:00，2024–2025 年度",
    "价格 1,399 元，库存 12,345 件",
    "订单 186_1234 已发货",
    "pin the issue to the top",
    "PIN codes have 4 to 6 digits",
    "the seed phrase is 12 words long; never share it",
    "助记词请抄写在纸上保存",
    "a - b - c",
    "look at the station, then at home",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_left_alone(text):
    s = Scrubber()
    assert s.text(text) == text, s.counts
    assert not s.counts


ASKS = [
    "把身份证号和密码发过来",
    "你的银行卡密码多少",
    "账户密码是多少？",
    "您的支付密码是什么呢",
    "麻烦说下您的取款密码",
    "为了核实身份，我需要您的支付密码",
    "请将短信验证码回复给客服",
    "请提供您的密 码",
    "请把收到的6位数字发给我",
    "Send the code from the SMS",
    "What's the PIN of your card?",
]
KEPT = [
    "请勿将验证码发过来",
    "密码多少位都可以，建议 8 位以上",
    "忘记密码是什么原因导致的？可以点击找回密码",
    "收到的短信请勿转发给他人",
    "需要您的订单号，我们会尽快处理",
    "我们不会要求您说下密码",
    "Never send the code from the SMS to anyone",
]


@pytest.mark.parametrize("text", ASKS)
def test_more_ways_of_asking_for_a_secret_are_refused(text):
    from ark_trainer.loop.safety import correction_problem

    problem = correction_problem(text)
    assert problem is not None and problem[0] == "credential_request", (text, problem)


@pytest.mark.parametrize("text", KEPT)
def test_warnings_and_other_questions_are_kept(text):
    from ark_trainer.loop.safety import correction_problem

    assert correction_problem(text) is None
