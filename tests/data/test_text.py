"""Text that is not text (``data/text.py``): strings that are blank but do not look it, and lone surrogates
(``"\\ud800"``), a legal JSON escape that UTF-8 cannot encode.
"""

from __future__ import annotations

import pytest

from ark_trainer.data.text import first_lone_surrogate, is_blank, replace_lone_surrogates
from tests.data.blank_text import BLANKS, VISIBLE


@pytest.mark.parametrize("text", BLANKS.values(), ids=BLANKS.keys())
def test_is_blank(text):
    assert is_blank(text)


@pytest.mark.parametrize("text", VISIBLE)
def test_visible_text_is_not_blank(text):
    assert not is_blank(text)


def test_surrogate_helpers():
    assert first_lone_surrogate({"a": [1, {"b": "x\udabc"}]}) == ("a[1].b", "\\udabc")
    assert first_lone_surrogate({"a": "😀"}) is None
    assert replace_lone_surrogates({"k\ud800": ["x\udfff"]}) == {"k\ufffd": ["x\ufffd"]}
