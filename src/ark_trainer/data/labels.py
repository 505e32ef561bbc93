"""The QC label a data row carries: the violation types and the spellings users give them.

A row's ``label`` column names the true violation type of a customer-service dialogue (``无`` when clean), in
Chinese, in English or as a verdict-only label. The hash split keeps the label mix of each side
(``data/split.py``) and the QC graders score against it (``rewards/qc.py``); both read it here.
"""

from __future__ import annotations

CLEAN = "无"
VIOLATION_TYPES: tuple[str, ...] = ("辱骂", "泄露隐私", "违规承诺", "未致歉", "推诿", CLEAN)

# Type aliases users put in their own labels (English names, verdict-only labels).
_LABEL_ALIASES = {
    "abuse": "辱骂",
    "abusive": "辱骂",
    "pii": "泄露隐私",
    "privacy_leak": "泄露隐私",
    "privacy": "泄露隐私",
    "leak": "泄露隐私",
    "promise": "违规承诺",
    "unauthorised_promise": "违规承诺",
    "unauthorized_promise": "违规承诺",
    "no_apology": "未致歉",
    "missing_apology": "未致歉",
    "deflection": "推诿",
    "deflect": "推诿",
    "clean": CLEAN,
    "none": CLEAN,
    "ok": CLEAN,
    "compliant": CLEAN,
    "合规": CLEAN,
    "正常": CLEAN,
}


def normalize_label(label: object) -> str | None:
    """Map a label column value to a violation type, or ``None`` when it is not a QC label."""
    if isinstance(label, dict):
        label = label.get("type", label.get("violation"))
    if not isinstance(label, str):
        return None
    label = label.strip()
    if label in VIOLATION_TYPES:
        return label
    return _LABEL_ALIASES.get(label.lower())
