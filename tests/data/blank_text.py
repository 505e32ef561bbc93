"""Strings that are blank but do not look it (zero-width space, BOM, joiners, bidi marks, fillers), and visible
text that holds such characters.
"""

from __future__ import annotations

BLANKS = {
    "zwsp+bom": "\u200b\ufeff",
    "zwsp": "\u200b",
    "joiners": "\u200c\u200d\u2060",
    "bom": "\ufeff",
    "soft hyphen": "\u00ad",
    "bidi marks": "\u200e\u200f\u202a\u202c\u2066\u2069",
    "ideographic space": "\u3000",
    "nbsp": "\u00a0 \u2007\u202f",
    "line separators": "\u2028\u2029\x85",
    "hangul fillers": "\u3164\u115f\u1160\uffa0",
    "braille blank": "\u2800",
    "variation selectors": "\ufe0f\U000e0100",
    "grapheme joiner": "\u034f",
    "tags": "\U000e0020\U000e007f",
    "mongolian vowel separator": "\u180e",
    "controls": " \t\r\n\x0b\x0c\x1c\x1d\x1e",
}
VISIBLE = ["a\u200b", "😀", "表情\ufe0f", "\ue000", "。", "-", "0"]
