"""The QC label a data row carries (``data/labels.py``): the spellings users give the violation types."""

from __future__ import annotations

import pytest

from ark_trainer.rewards.qc import normalize_label


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("辱骂", "辱骂"),
        (" 泄露隐私 ", "泄露隐私"),
        ("无", "无"),
        ("abuse", "辱骂"),
        ("Abuse", "辱骂"),
        ("PII", "泄露隐私"),
        ("privacy_leak", "泄露隐私"),
        ("privacy", "泄露隐私"),
        ("promise", "违规承诺"),
        ("unauthorized_promise", "违规承诺"),
        ("no_apology", "未致歉"),
        ("missing_apology", "未致歉"),
        ("deflection", "推诿"),
        ("clean", "无"),
        ("none", "无"),
        ("合规", "无"),
        ({"type": "辱骂"}, "辱骂"),
        ({"violation": "deflect"}, "推诿"),
        ("the customer was happy", None),
        (None, None),
        (3, None),
    ],
)
def test_normalize_label(raw, expected):
    assert normalize_label(raw) == expected
