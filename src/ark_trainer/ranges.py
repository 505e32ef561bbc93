"""The valid range of every numeric ``train`` flag, checked in one pass (issue 19).

A number that is not finite (``nan``, ``inf``, ``1e999``) is refused when the flag is read
(:func:`ark_trainer.config.coerce`); here each value is checked against its range and every problem is
reported at once, one line per flag naming the range. A numeric field missing from :data:`RANGES` still
gets :data:`DEFAULT` (≥ 0 and not absurdly large), so a flag added later is never unchecked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

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

RANGES: dict[str, Range] = {
    "max_train_steps": COUNT,
    "rft_steps": ZERO_OK,
    "grpo_learning_rate": Range(0.0, 1.0, lo_open=True),
    "rft_learning_rate": Range(0.0, 1.0, lo_open=True),
    "batch_size": Range(1, MAX_BATCH),
    "gradient_accumulation_steps": COUNT,
    "warmup_ratio": SHARE,
    "save_steps": ZERO_OK,
    "seed": Range(0, 2**32 - 1),  # numpy's seed range
    "rft_num_samples": Range(
        1, MAX_SAMPLES, why=f"must be in [1, {MAX_SAMPLES}] (answers sampled per prompt at once)"
    ),
    "rft_temperature": POSITIVE,
    "rft_min_reward": ANY,
    "num_generations": Range(
        2, MAX_SAMPLES, why=f"must be in [2, {MAX_SAMPLES}]: GRPO needs at least 2 completions per prompt"
    ),
    "max_completion_length": Range(1, MAX_NEW_TOKENS),
    "temperature": POSITIVE,
    "beta": NON_NEGATIVE,
    "dynamic_sampling_rounds": Range(0, 64),  # extra generation batches per GRPO step
    "dpo_learning_rate": Range(0.0, 1.0, lo_open=True),
    "dpo_beta": POSITIVE,
    "dpo_min_margin": NON_NEGATIVE,
    "kto_learning_rate": Range(0.0, 1.0, lo_open=True),
    "kto_beta": POSITIVE,
    "kto_threshold": ANY,
    "rloo_learning_rate": Range(0.0, 1.0, lo_open=True),
    "logging_steps": COUNT,
    "save_total_limit": ZERO_OK,
    "rm_weight": Range(0.0, MAX_WEIGHT),
    "pass_threshold": ANY,
    "eval_ratio": SHARE,
    "max_eval_samples": COUNT,
    "heartbeat_interval": POSITIVE,
    "auto_resume": Range(0, 100),
    "max_bad_steps": Range(1, None),
    "max_rollbacks": Range(0, None),
    "rollout_steps": Range(1, 64),  # optimizer steps' rollouts generated per call
    "stall_timeout": NON_NEGATIVE,
    "max_turns": Range(1, 64),
    "tool_timeout": POSITIVE,
    "max_tool_output": Range(1, 1_000_000),
    "reward_timeout": NON_NEGATIVE,
    "min_free_disk_gb": NON_NEGATIVE,
    "auto_probe_prompts": COUNT,
    "auto_probe_samples": Range(
        2, MAX_SAMPLES, why=f"must be in [2, {MAX_SAMPLES}]: a group needs at least 2 answers"
    ),
    "auto_min_pass_rate": PROB,
    "auto_max_zero_std": PROB,
    "num_processes": Range(1, 1024),
    "main_process_port": PORT,
    "lora_r": Range(0, 4096),
    "lora_alpha": COUNT,
    "lora_dropout": SHARE,
    "vllm_server_port": PORT,
    "vllm_gpu_memory_utilization": Range(0.0, 1.0, lo_open=True),
    "vllm_tensor_parallel_size": Range(1, 64),
}


def range_of(name: str) -> Range:
    return RANGES.get(name, DEFAULT)


def range_problems(values: dict[str, Any], numeric: list[str]) -> list[str]:
    """One line per numeric flag whose value is out of its range (``None`` = unset, always fine)."""
    problems = []
    for name in numeric:
        value, rng = values.get(name), range_of(name)
        if value is None or isinstance(value, bool) or value in rng:
            continue
        problems.append(f"--{name}: {rng.why or 'must be ' + rng.text()}, got {value}")
    return problems
