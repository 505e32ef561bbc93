"""The scrubber (``data/scrub.py``) against the families of personal data that once leaked through.

Table-driven: every sample of every family is checked in each form it reaches training data in (Chinese
text, English text, a JSON string, and a tool call's arguments, which ``data collect`` writes into the
assistant text and the ``tool_calls`` column, with a nested JSON string whose quotes are escaped; the forms
are ``tests/data/scrub_forms.py``). Ordinary numbers (order ids, prices, dates) must survive, or the data
stops being useful. ``data collect`` end to end is in ``test_collect.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ark_trainer.data.collect import _assistant
from ark_trainer.data.scrub import Scrubber
from tests.data.scrub_forms import CARD_19, as_en, as_json, as_tool_call, as_zh, group, luhn

CARD_16 = luhn("4111", 16)
FULLWIDTH = str.maketrans("0123456789X@.", "０１２３４５６７８９Ｘ＠．")


# family -> [(fragment as written, fragment after scrubbing)]
FAMILIES: dict[str, list[tuple[str, str]]] = {
    "phone": [
        ("13812345678", "[PHONE]"),
        ("138-1234-5678", "[PHONE]"),
        ("138 1234 5678", "[PHONE]"),
        ("+86 138 1234 5678", "[PHONE]"),
        ("+86-138-1234-5678", "[PHONE]"),
        ("+8613812345678", "[PHONE]"),
        ("(+86)138-1234-5678", "[PHONE]"),
        ("0086 13812345678", "[PHONE]"),
        ("13812345678".translate(FULLWIDTH), "[PHONE]"),
        ("010 8888 1234", "[PHONE]"),
    ],
    "id_number": [
        ("11010519491231002X", "[ID_NUMBER]"),
        ("110105194912310021", "[ID_NUMBER]"),
        ("110105 19491231 002X", "[ID_NUMBER]"),
        ("110105-19491231-0021", "[ID_NUMBER]"),
        ("1101 0519 4912 3100 2X", "[ID_NUMBER]"),
        ("110105491231002", "[ID_NUMBER]"),  # the old 15-digit form
        ("11010519491231002X".translate(FULLWIDTH), "[ID_NUMBER]"),
    ],
    "card_number": [
        (CARD_16, "[CARD_NUMBER]"),
        (group(CARD_16, [4, 4, 4, 4]), "[CARD_NUMBER]"),
        (group(CARD_16, [4, 4, 4, 4], "-"), "[CARD_NUMBER]"),
        (group(CARD_19, [4, 4, 4, 4, 3]), "[CARD_NUMBER]"),
        (group(CARD_19, [6, 13]), "[CARD_NUMBER]"),
        (group("378282246310005", [4, 6, 5]), "[CARD_NUMBER]"),  # Amex
        (luhn("4222", 13), "[CARD_NUMBER]"),
        (group(luhn("2221", 16), [4, 4, 4, 4]), "[CARD_NUMBER]"),  # Mastercard 2-series
        (group(CARD_16, [4, 4, 4, 4]).translate(FULLWIDTH), "[CARD_NUMBER]"),
    ],
    "api_key": [
        ("AKIAIOSFODNN7EXAMPLE", "[API_KEY]"),
        ("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "[API_KEY]"),  # AWS secret access key shape
        ("LTAI5tRqvXg9bKzP8wY3mN2c", "[API_KEY]"),  # Alibaba Cloud AccessKey id
        ("AKIDz8krbsJ5yKBZQpn74WFkmLPx3gnPhESA", "[API_KEY]"),  # Tencent Cloud SecretId
        ("sk-abcdefghijklmnopqrstuvwxyz123456", "[API_KEY]"),
        ("sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv", "[API_KEY]"),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "[API_KEY]"),
        ("AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "[API_KEY]"),
        ("hf_abcdefghijklmnopqrstuvwxyz0123456789", "[API_KEY]"),
        ("xoxb-1234567890-abcdefghij", "[API_KEY]"),
    ],
    "token": [
        ("api_key=abcd1234efgh5678", "api_key=[TOKEN]"),
        ('"api_key": "abcd1234efgh5678"', '"api_key": "[TOKEN]"'),
        ("X-Api-Key: abcd1234efgh5678", "X-Api-Key: [TOKEN]"),
        ("aws_secret_access_key = Zx9Yw8Xv7Wu6Vt5Us4Tr3Sq2Rp1Qo0PnMlKjIh", "aws_secret_access_key = [TOKEN]"),
        ('"AccessKeySecret": "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1"', '"AccessKeySecret": "[TOKEN]"'),
        ("client_secret: abcdEFGH12345678", "client_secret: [TOKEN]"),
        ("access_token=ya29.a0AfH6SMBx1234", "access_token=[TOKEN]"),
        ("Authorization: Bearer abcdefghijklmnop1234567890", "Authorization: Bearer [TOKEN]"),
    ],
    "password": [
        ("密码：abc123", "密码：[PASSWORD]"),
        ("密码: Passw0rd!", "密码: [PASSWORD]"),
        ("登录密码=qwer1234", "登录密码=[PASSWORD]"),
        ("口令是 hunter22", "口令是 [PASSWORD]"),
        ("密码为Zz_998877", "密码为[PASSWORD]"),
        ("密码：" + "abc123".translate(FULLWIDTH), "密码：[PASSWORD]"),
        ("password: hunter2", "password: [PASSWORD]"),
        ("my password is S3cret!x", "my password is [PASSWORD]"),
        ("DB_PASSWORD=hunter2x", "DB_PASSWORD=[PASSWORD]"),
        ('"password": "hunter2x"', '"password": "[PASSWORD]"'),
        ("pwd=abcd1234", "pwd=[PASSWORD]"),
        ("PIN码：1234", "PIN码：[PASSWORD]"),
    ],
    "email": [
        ("bob.smith@corp.co.uk", "[EMAIL]"),
        ("zhang.san@example.cn", "[EMAIL]"),
        ("张三@例子.中国", "[EMAIL]"),
        ("josé@exämple.com", "[EMAIL]"),
        ("用户@公司.com", "[EMAIL]"),
        ("bob@corp.com".translate(FULLWIDTH), "[EMAIL]"),
    ],
}
CASES = [(family, raw, clean) for family, samples in FAMILIES.items() for raw, clean in samples]


@pytest.mark.parametrize("form", [as_zh, as_en, as_json], ids=["zh", "en", "json"])
@pytest.mark.parametrize(("family", "raw", "clean"), CASES)
def test_each_family_in_text_and_json(family, raw, clean, form):
    s = Scrubber()
    assert s.text(form(raw)) == form(clean)
    assert set(s.counts) == {family}


@pytest.mark.parametrize(("family", "raw", "clean"), CASES)
def test_each_family_in_tool_call_arguments(family, raw, clean):
    text, calls = as_tool_call(raw)
    want_text, want_calls = as_tool_call(clean)
    s = Scrubber()
    assert s.text(text) == want_text
    assert s.value(calls) == want_calls
    assert set(s.counts) == {family}


def test_keys_of_the_tool_call_arguments_themselves():
    args = {"api_key": "abcd1234efgh5678", "password": "hunter2x", "密码": "abc123", "to": "138-1234-5678"}
    text, calls = _assistant([{"type": "toolCall", "name": "login", "arguments": args}])
    s = Scrubber()
    out = s.text(text) + json.dumps(s.value(calls), ensure_ascii=False)
    for secret in args.values():
        assert secret not in out
    assert json.loads(s.value(calls)[0]["arguments"]) == {
        "api_key": "[TOKEN]",
        "password": "[PASSWORD]",
        "密码": "[PASSWORD]",
        "to": "[PHONE]",
    }


ORDINARY = [
    "订单号 2024112300001 已发货",
    "order 2024112300001 shipped, tracking 1Z999AA10123456784",
    "第2024112300001号订单，金额 ¥1,399.00，优惠 200 元",
    "price 1999 元, total 13999元, 1,234,567.89 USD",
    "订单号：202411230000123456",
    "订单号 138123456789 有 12 位，不是手机号",
    "card-like 1234 5678 9012 3456 is not a card (starts with 1)",
    "version 1.2.3 on 2026-11-30 at 12:30; room 1501, floor 15",
    "commit 3f786850e387550fdab836ed7e6dc881de23001b",
    "path home/User1/Documents/Projects/MyApp2/src",
    "session ba09a082-5df7-4dd3-9636-d752b068922c",
    '{"max_tokens": 512, "total_tokens": 12345678, "tokenizer": "Qwen/Qwen2.5-0.5B-Instruct"}',
    "the password is wrong; 请输入密码；密码错误，请重试",
    "结论：违规\n类型：泄露隐私\n回复：非常抱歉给您带来不便。",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_numbers_and_words_are_left_alone(text):
    s = Scrubber()
    assert s.text(text) == text
    assert not s.counts


@pytest.mark.slow
def test_adversarial_text_is_scrubbed_in_linear_time():
    """Long runs that make a careless pattern quadratic (each start rescanning the run) finish quickly."""
    code = (
        "from ark_trainer.data.scrub import Scrubber\n"
        "s = Scrubber()\n"
        "for text in ['a-' * 200_000, '1 ' * 200_000, 'a@' * 100_000, 'x.' * 200_000 + '@', '7' * 400_000,\n"
        "             '密码' * 100_000, 'password_' * 50_000, 'Ab1/' * 100_000, '张' * 300_000 + '@']:\n"
        "    s.text(text)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
