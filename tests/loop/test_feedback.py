"""The next user message as feedback (``loop/feedback.py``): an invisible hint is no correction target."""

from __future__ import annotations


def test_an_invisible_hint_is_not_a_correction_target():
    from ark_trainer.loop.feedback import Rules, judge

    assert judge("不对，应该回答：\u200b\ufeff", Rules()) == (-1, None)
