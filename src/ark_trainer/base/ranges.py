"""Valid ranges of numbers, and the check of a whole config's numbers in one pass.

Each numeric ``train`` flag declares its range with its field (``core/config.py``: ``flag(..., range=COUNT)``);
the common ones are named here. A number that is not finite (``nan``, ``inf``, ``1e999``) is refused when
the flag is read (:func:`ark_trainer.core.config.coerce`); :func:`range_problems` checks each value against its
range and reports every problem at once, one line per flag naming the range. A numeric field that declares
no range still gets :data:`DEFAULT` (≥ 0), so a flag added later is never unchecked.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ark_trainer.base.errors import UserError

BIG = 2**31 - 1  # counts beyond this overflow the engines' int32 step/size fields


@dataclass(frozen=True)
class Range:
    """``lo ≤ value ≤ hi`` (``lo_open``/``hi_open`` make a bound strict); ``None`` = unbounded."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    why: str = ""  # replaces the generic "must be …" text when it says the range better

    def __contains__(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        if self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo):
            return False
        return self.hi is None or (value < self.hi if self.hi_open else value <= self.hi)

    def text(self) -> str:
        lo, hi = _num(self.lo), _num(self.hi)
        if self.lo is not None and self.hi is not None:
            return f"in {'(' if self.lo_open else '['}{lo}, {hi}{')' if self.hi_open else ']'}"
        if self.lo is not None:
            return f"{'>' if self.lo_open else '≥'} {lo}"
        if self.hi is not None:
            return f"{'<' if self.hi_open else '≤'} {hi}"
        return "any finite number"


def _num(x: float | None) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


COUNT = Range(1, BIG)  # steps, sizes, samples: at least one
ZERO_OK = Range(0, BIG)  # 0 means "off" or "all"
SHARE = Range(0.0, 1.0, hi_open=True)
PROB = Range(0.0, 1.0)
POSITIVE = Range(0.0, None, lo_open=True)
NON_NEGATIVE = Range(0.0, None)
ANY = Range()  # rewards and thresholds: any finite number (a reward may be negative)
PORT = Range(1, 65535)
DEFAULT = Range(0, None)
# counts that multiply memory (answers per prompt, sequences per batch, tokens per answer): bounded well above
# any real use and well below what a typo (1000000000) would try to allocate
MAX_SAMPLES = 256  # answers per prompt (RFT, GRPO groups, the auto probe): sampled in one batch
MAX_BATCH = 8192
MAX_NEW_TOKENS = 131_072
MAX_WEIGHT = 1e6  # a reward's weight: larger ones add up to inf, and inf / inf makes every total NaN
LEARNING_RATE = Range(0.0, 1.0, lo_open=True)
# seconds: a wait longer than ~11 days is a typo, and threading refuses timeouts past ~292 years (OverflowError)
MAX_SECONDS = 1e6
SECONDS = Range(0.0, MAX_SECONDS)  # 0: off
POSITIVE_SECONDS = Range(0.0, MAX_SECONDS, lo_open=True)


def range_problems(values: dict[str, Any], ranges: Mapping[str, Range]) -> list[str]:
    """One line per flag of ``ranges`` whose value is out of its range (``None`` = unset, always fine)."""
    problems = []
    for name, rng in ranges.items():
        value = values.get(name)
        if value is None or isinstance(value, bool) or value in rng:
            continue
        problems.append(f"--{name}: {rng.why or 'must be ' + rng.text()}, got {value}")
    return problems


WEIGHTS_FLAG = "--reward_weights"


def parse_weights(text: str, flag: str = WEIGHTS_FLAG) -> dict[str, float]:
    """``"a=1,b=0.5"`` → ``{"a": 1.0, "b": 0.5}``; a malformed item is a one-line UserError naming ``flag``."""
    weights: dict[str, float] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        try:
            weight = float(value)
        except ValueError:
            weight = -1.0
        if not sep or not name or not 0 <= weight <= MAX_WEIGHT:  # nan and inf fail this too
            raise UserError(
                f"{flag}: {item!r}: expected name=weight with a weight in [0, {MAX_WEIGHT:g}], e.g. qc_compliance=1"
            )
        weights[name] = weight
    return weights
