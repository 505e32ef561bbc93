"""What the QC demo data says in one language: the phrase tables and punctuation of its generator.

:mod:`ark_trainer.app.demo.data` draws dialogues, candidates and suggested replies from one :class:`Phrasebook`:
the Chinese one (the default, in ``data.py``) or the English one (``data_en.py``). Both hold the same
structure (six scenarios with complaints, follow-ups, helps and fixes; the cues of each violation type;
apologies; flawed replies), so the generator and its random draws are the same in either language.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Scenario:
    """Phrasings for one business scenario; ``{order}`` is filled with an order number."""

    complaints: tuple[str, ...]  # the customer's opening complaint
    follow_ups: tuple[str, ...]  # the customer's second line
    helps: tuple[str, ...]  # the agent's help, with no apology and no violation
    fixes: tuple[str, ...]  # a short help clause for a suggested reply (each has a service word)


@dataclass(frozen=True)
class Phrasebook:
    """The language-specific half of the QC demo generator (see :mod:`ark_trainer.app.demo.data`)."""

    lang: str  # "zh" or "en": also the ``lang`` of format_answer
    instruction: str  # the first line of every question
    customer: str  # the customer's speaker prefix, e.g. "顾客：" / "Customer: "
    agent: str  # the agent's speaker prefix
    scenarios: dict[str, Scenario]
    greetings: tuple[str, ...]  # an optional opening line of the agent
    apologies: tuple[str, ...]  # the agent's apology inside a dialogue
    cues: dict[str, tuple[str, ...]]  # the cue of each violation type; {other} {phone} {idno}: someone else's
    reply_apologies: tuple[str, ...]  # the apology clause of a suggested reply
    type_apologies: dict[str, tuple[str, ...]]  # ... or one that fits the violation type
    flawed_replies: dict[str, tuple[str, ...]]  # a suggested reply with one flaw, by flaw kind; {fix} {phone}
    short_apologies: tuple[str, ...]  # an apology that may open a flawed reply
    surnames: Sequence[str]
    given_names: Sequence[str]
    name_format: str  # how {other} is written from {surname} and {given}
    comma: str  # joins two clauses
    full_stop: str  # ends a sentence that has no end mark
    end_marks: str  # the marks that end a sentence
    dialogue_chars: tuple[int, int]  # dialogue length bounds (characters), so a small model can read it
    capitalise: bool  # a sentence starts with a capital letter

    def sentence(self, text: str) -> str:
        """``text`` as a sentence: an end mark added when missing, a capital first letter where the language
        has them."""
        if self.capitalise:
            text = text[:1].upper() + text[1:]
        return text if text[-1] in self.end_marks else text + self.full_stop

    def start(self, text: str) -> str:
        """``text`` with the capital first letter a sentence opens with (where the language has them)."""
        return text[:1].upper() + text[1:] if self.capitalise else text
