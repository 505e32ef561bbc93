"""A labelled (QC) held-out set for the loop's tests."""

from __future__ import annotations

QC_ROWS = [
    {"question": f"客服：您好 {i}。顾客：订单{i}不对。", "label": ["无", "辱骂", "未致歉"][i % 3]}
    for i in range(6)
]
