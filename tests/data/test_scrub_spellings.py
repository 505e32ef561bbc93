"""More spellings of the same secrets for the scrubber (``data/scrub.py``): a third adversarial round.

Mobiles with underscores, commas, dashes of other widths, spaced separators, brackets or a space between
every digit; keys split by the blank characters that are not zero-width (Hangul fillers, the braille
blank); ``password是…`` and a card PIN; e-mails with spaced ``@``/``.`` and a spelled-out dot in the local
part; wallet seed phrases. Ordinary text around them must survive. The round's ways of asking for a secret
are checked in ``tests/loop/test_safety.py``.
"""

from __future__ import annotations

import pytest

from ark_trainer.data.scrub import Scrubber
from tests.data.scrub_forms import as_en, as_json, as_zh

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
