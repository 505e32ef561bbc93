"""Scrubbing of secrets and personal data before OpenClaw conversations become training data."""

from __future__ import annotations

import pytest

from ark_trainer.data.scrub import Scrubber

CASES = [
    ("key sk-abcdefghijklmnopqrstuvwxyz123456 end", "key [API_KEY] end", "api_key"),
    ("sk-ant-api03-abcdefghijklmnopqrstu_vwxyz", "[API_KEY]", "api_key"),
    ("aws AKIAABCDEFGHIJKLMNOP", "aws [API_KEY]", "api_key"),
    ("gh ghp_abcdefghijklmnopqrstuvwxyz0123456789", "gh [API_KEY]", "api_key"),
    ("hf hf_abcdefghijklmnopqrstuvwxyz0123456789", "hf [API_KEY]", "api_key"),
    ("Authorization: Bearer abcdefghijklmnop1234567890", "Authorization: Bearer [TOKEN]", "token"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.abcdefghijkl", "jwt [TOKEN]", "token"),
    ('{"password": "hunter2hunter2"}', '{"password": "[PASSWORD]"}', "password"),
    ("api_key=abcd1234efgh5678", "api_key=[TOKEN]", "token"),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n+/def==\n-----END RSA PRIVATE KEY-----\nok",
        "[PRIVATE_KEY]\nok",
        "private_key",
    ),
    (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n-----END OPENSSH PRIVATE KEY-----",
        "[PRIVATE_KEY]",
        "private_key",
    ),
    ("mail bob.smith@corp.co.uk now", "mail [EMAIL] now", "email"),
    ("联系我 zhang.san@example.cn 谢谢", "联系我 [EMAIL] 谢谢", "email"),
    ("手机13812345678，谢谢", "手机[PHONE]，谢谢", "phone"),
    ("call +86 13912345678", "call [PHONE]", "phone"),
    ("座机 010-12345678", "座机 [PHONE]", "phone"),
    ("tel (415) 555-0100", "tel [PHONE]", "phone"),
    ("intl +44 20 7946 0958", "intl [PHONE]", "phone"),
    ("身份证 11010519491231002X 号", "身份证 [ID_NUMBER] 号", "id_number"),
    ("身份证号110105194912310021", "身份证号[ID_NUMBER]", "id_number"),
    ("card 4111 1111 1111 1111 ok", "card [CARD_NUMBER] ok", "card_number"),
    ("from 192.168.1.10", "from [IP]", "ip_address"),
]


@pytest.mark.parametrize(("text", "expected", "kind"), CASES)
def test_each_kind_is_replaced_and_counted(text, expected, kind):
    s = Scrubber()
    assert s.text(text) == expected
    assert s.counts == {kind: 1}


@pytest.mark.parametrize(
    "text",
    [
        "version 1.2.3 on 2026-11-30 at 12:30, price 1999 元",
        "order 2023120112345678901 is a long order id (no Luhn checksum)",
        "订单号 138123456789 has 12 digits, not a mobile number",
        "session ba09a082-5df7-4dd3-9636-d752b068922c",
        "结论：违规\n类型：泄露隐私\n回复：非常抱歉给您带来不便。",
    ],
)
def test_ordinary_text_is_left_alone(text):
    s = Scrubber()
    assert s.text(text) == text
    assert not s.counts


def test_counts_add_up_over_values():
    s = Scrubber()
    out = s.value({"a": ["x@y.com", "13812345678 and 13912345678"], "n": 3})
    assert out == {"a": ["[EMAIL]", "[PHONE] and [PHONE]"], "n": 3}
    assert s.counts == {"email": 1, "phone": 2}
