"""A planning LLM's answer (``nl/llm.py``): read within bounds, one line when it is not a JSON object."""

from __future__ import annotations

import pytest

from ark_trainer.errors import UserError


def test_a_deeply_nested_llm_answer_is_one_line(capsys):
    from ark_trainer.nl.llm import extract_object

    with pytest.raises(UserError, match="the answer is not a JSON object"):
        extract_object("[" * 100_000 + "]" * 100_000, "--llm-model m")
