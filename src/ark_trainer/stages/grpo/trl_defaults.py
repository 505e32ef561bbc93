"""Where GRPO's defaults differ from TRL 1.16's ``GRPOConfig``, and why: one list, written into
docs/real-models.md (between the markers below; ``python -m ark_trainer.stages.grpo.trl_defaults`` rewrites it)
and shown in the report's GRPO section, so the two cannot drift (``tests/stages/test_trl_defaults.py``
checks the doc, and each TRL value against TRL's own declaration)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

DOC = Path(__file__).resolve().parents[4] / "docs" / "real-models.md"
BEGIN, END = "<!-- trl-defaults: generated -->", "<!-- /trl-defaults -->"
HEADER = ["setting", "ark-trainer", "TRL 1.16", "why"]


@dataclass(frozen=True)
class Difference:
    """One setting: ``trl`` is ``GRPOConfig``'s declared default where ``setting`` is one of its fields."""

    setting: str
    ours: str
    trl: object
    why: str
    flag: str | None = None  # the GRPOOptions flag whose default ``ours`` states


DIFFERENCES = (
    Difference(
        "beta", "0.04", 0.0,
        "a KL penalty to the starting (RFT) model keeps a run on a few hundred prompts near a policy that "
        "already answers in format; `--beta 0` drops the reference model and its forward pass",
        flag="beta",
    ),
    Difference(
        "num_generations", "4", 8,
        "every completion is sampled and back-propagated: 4 keeps a CPU step affordable; raise it when most "
        "groups are flat (`frac_reward_zero_std`)",
        flag="num_generations",
    ),
    Difference(
        "gradient_checkpointing", "False", True,
        "recomputing every activation costs about a quarter more compute a step where memory is seldom the "
        "limit, and turns off the shared-prompt pass; `--gradient_checkpointing` turns it on",
    ),
    Difference(
        "shuffle_dataset", "False on labelled data", True,
        "the label-balanced order is the order: each label's rows (and the unlabelled ones) spread evenly, "
        "so every optimizer step sees the labels in the data's proportions",
    ),
    Difference(
        "max_completion_length", "what the GRPO reward reads (QC: the decision lines)", 512,
        "sampling past what the reward reads costs time and earns nothing; the completions cut there are "
        "still trained (`mask_truncated_completions` stays False, as TRL's): the reward scored the tokens "
        "up to the cut. `--grpo_max_completion_length` sets it",
    ),
    Difference(
        "reward_weights", "QC on a real model: the decision grader alone", None,
        "TRL weighs every reward function 1.0; the format graders saturate after RFT and would add "
        "flat reward; `--grpo_reward_weights` sets them",
    ),
    Difference(
        "gradient_accumulation_steps", "enough for `--grpo_prompts_per_step` prompts (a real model: one per "
        "label, 4..16)", 1,
        "a step of one or two prompts would follow whichever labels it drew",
    ),
    Difference(
        "disable_dropout", "True (and the config's dropout rates 0)", False,
        "TRL samples in training mode: with dropout each answer is sampled from one sub-network and scored "
        "under another",
    ),
    Difference(
        "bf16", "`--mixed_precision` (auto: bf16 where the device computes it natively, else fp32)", None,
        "TRL's None turns bf16 autocast on wherever it can, a CPU that only emulates bf16 included, where "
        "it is slower and rounds every matrix product",
    ),
    Difference(
        "warm-up", "linear, first step at 1/(w+1) of the rate", "linear from 0",
        "transformers' warm-up trains its first step at learning rate 0 (5% of 40 steps: 0, 0.5, 1.0)",
    ),
)  # fmt: skip


def rows() -> list[list[str]]:
    """The table's rows: setting, ours, TRL's, why."""
    return [[d.setting, d.ours, str(d.trl), d.why] for d in DIFFERENCES]


def markdown() -> str:
    """The table as docs/real-models.md holds it, markers included."""
    lines = [BEGIN, "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows()]
    return "\n".join([*lines, END])


def rewritten(text: str) -> str:
    """``text`` (the doc) with the block between the markers replaced by :func:`markdown`."""
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + markdown() + text[end:]


def main() -> int:
    DOC.write_text(rewritten(DOC.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
