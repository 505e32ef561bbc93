"""The recorded turns of an exchange and a user's correction after it, for the loop's tests."""

from __future__ import annotations


def conversation(question: str, answer: str, correction: str) -> list[dict]:
    """The recorded turns of one exchange and the correction after it (as the recorder writes them)."""
    from ark_trainer.services.deploy.record import build_row

    first = build_row({"messages": [{"role": "user", "content": question}]}, answer, [], "round-0", 1)
    history = first["messages"] + [{"role": "user", "content": correction}]
    second = build_row({"messages": history}, "好的", [], "round-0", 2)
    return [first, second]
