"""The forms a secret reaches training data in, for the scrubber's tests: Chinese text, English text, a JSON
string, and a tool call's arguments (which ``data collect`` writes into the assistant text and the
``tool_calls`` column, with a nested JSON string whose quotes are escaped); and card numbers that pass Luhn.
"""

from __future__ import annotations

import json

from ark_trainer.data.collect import _assistant


def luhn(prefix: str, length: int) -> str:
    """``prefix`` padded with 0s and completed with its Luhn check digit to ``length`` digits."""
    body = prefix.ljust(length - 1, "0")
    digits = [int(c) for c in body]
    total = sum(d if i % 2 else (d * 2 - 9 if d > 4 else d * 2) for i, d in enumerate(reversed(digits)))
    return body + str((10 - total % 10) % 10)


def group(number: str, sizes: list[int], sep: str = " ") -> str:
    out, i = [], 0
    for size in sizes:
        out.append(number[i : i + size])
        i += size
    return sep.join(out)


CARD_19 = luhn("6222021", 19)


def as_zh(text: str) -> str:
    return f"请帮我记一下：{text}，谢谢。"


def as_en(text: str) -> str:
    return f"Please note {text} for later.\nThanks"


def as_json(text: str) -> str:
    return json.dumps({"note": as_en(text), "备注": as_zh(text)}, ensure_ascii=False)


def as_tool_call(text: str) -> tuple[str, list[dict]]:
    """What ``data collect`` writes for a tool call carrying ``text``: the assistant text and the column."""
    nested = json.dumps({"body": as_zh(text), "raw": text}, ensure_ascii=False)  # escaped quotes inside
    return _assistant(
        [{"type": "toolCall", "name": "send", "arguments": {"body": as_en(text), "payload": nested}}]
    )


ZW = "\u200b"  # a zero-width space: it splits a secret without showing
