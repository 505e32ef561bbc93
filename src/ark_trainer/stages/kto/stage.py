"""KTO (Kahneman-Tversky optimization) with TRL's KTOTrainer, on unpaired good and bad answers.

The shape thumbs-up/down feedback from an agent's users has: rows with an answer and ``label: true/false``
(``chosen``/``rejected`` count as one good and one bad answer). Data without them gets the starting model's
sampled answers, desirable at or above ``--kto_threshold`` (default ``--pass_threshold``), undesirable
below (``stages/preference.py``). Knobs: ``--kto_beta``, ``--kto_loss_type``, ``--kto_learning_rate``.

The two classes are weighted as TRL's KTO guide asks (``desirable_weight × n_desirable`` over
``undesirable_weight × n_undesirable`` between 1 and 4/3): a model that mostly fails gives mostly bad
answers (2818 good against 4670 bad on the demo), and unweighted KTO then pushes every answer's likelihood
down until its sigmoid saturates and the answers are noise (measured: task accuracy 0% after 439 steps).
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import TYPE_CHECKING

from ark_trainer.base.strategies import Strategy
from ark_trainer.core.metrics import PREFERENCE_ALIGNMENT
from ark_trainer.core.models.loading import load_tokenizer
from ark_trainer.stages.common import no_checkpointing, train_and_save, trainer_kwargs
from ark_trainer.stages.kto.options import KTOOptions
from ark_trainer.stages.preference import earlier, kto_examples, stats_blocks
from ark_trainer.stages.preference import estimate_parts as preference_estimate
from ark_trainer.stages.preference import given_answers as data_gives_answers
from ark_trainer.stages.registry import Plot, StageContext

if TYPE_CHECKING:
    from ark_trainer.stages.plan import PlanStage


def class_weights(n_desirable: int, n_undesirable: int) -> tuple[float, float]:
    """(desirable_weight, undesirable_weight) that bring TRL's weighted class ratio into [1, 4/3]."""
    ratio = n_desirable / max(n_undesirable, 1)
    if ratio < 1:
        return round(1 / ratio, 4), 1.0
    if ratio > 4 / 3:
        return 1.0, round(ratio * 3 / 4, 4)
    return 1.0, 1.0


def train_kto(ctx: StageContext, plan: PlanStage, model_in: str, rows: list[dict], final_dir: Path) -> Path:
    """Run TRL's KTOTrainer for ``plan.steps`` on ``rows``; returns the saved model folder."""
    from datasets import Dataset
    from trl import KTOConfig, KTOTrainer

    opts = ctx.options
    assert isinstance(opts, KTOOptions)  # the registry hands each stage its own options
    tok = load_tokenizer(model_in, ctx.rt.trust_remote_code)
    good = sum(1 for r in rows if r["label"])
    desirable_weight, undesirable_weight = class_weights(good, len(rows) - good)
    ctx.monitor.event("kto_weights", desirable_weight=desirable_weight, undesirable_weight=undesirable_weight)
    args = KTOConfig(
        **no_checkpointing(trainer_kwargs(ctx.run, ctx.rt, ctx.out / "kto", plan.steps, plan.learning_rate)),
        beta=opts.kto_beta,
        loss_type=opts.kto_loss_type,
        desirable_weight=desirable_weight,
        undesirable_weight=undesirable_weight,
    )
    train_and_save(
        ctx,
        plan,
        "kto",
        KTOTrainer,
        tok,
        final_dir,
        model=model_in,
        args=args,
        train_dataset=Dataset.from_list(rows),
    )
    return final_dir


class KTOStage:
    """Good/bad answers (thumbs labels or reward-split samples) → TRL's KTOTrainer."""

    name, label = "kto", "KTO"
    options, plays_episodes = KTOOptions, False
    steps_flag, lr_flag = None, "kto_learning_rate"  # always the last stage: what --max_train_steps leaves
    plots = (
        Plot("kto_loss.png", "loss", "KTO loss"),
        Plot("kto_margin.png", "rewards/margins", "KTO reward margin (desirable − undesirable)"),
    )
    headline_metric = PREFERENCE_ALIGNMENT

    def run(self, ctx: StageContext, plan: PlanStage, model_in: str, final_dir: Path) -> str:
        data = earlier(ctx, "kto_examples") or kto_examples(ctx, model_in)
        gc.collect()
        good = data.stats.get("n_desirable", 0)
        if not good or good == len(data.rows):
            ctx.monitor.warn(
                f"KTO needs desirable and undesirable answers; it has {good} of {len(data.rows)} desirable, so "
                "KTO training is skipped. Give rows with label true and false, or move --kto_threshold"
            )
            return model_in
        return str(train_kto(ctx, plan, model_in, data.rows, final_dir))

    def estimate_parts(self, run, options: KTOOptions, steps: int, t, size) -> list:
        """What ``steps`` steps of the stage cost (``stages/preference.py``)."""
        return preference_estimate(self.name, run, options, steps, t, size)

    def given_answers(self, rows: list[dict]) -> bool:
        """Whether the data carries the answers the stage would otherwise sample."""
        return data_gives_answers(rows)

    def report_blocks(self, run) -> list:
        """The report's "KTO examples" section: where they came from, how many good and bad."""
        return stats_blocks(run, "kto_examples", "KTO examples")


def register_stages(register) -> None:
    """The plug-in hook (``ark_trainer.base.plugins``) that registers this module's stage."""
    register(KTOStage)


def register_strategies(register) -> None:
    """The plug-in hook (``ark_trainer.base.plugins``) that adds the strategy ending with KTO."""
    register(
        "KTO",
        Strategy(
            ("kto",),
            "one step: KTO on unpaired good/bad answers (thumbs-up/down labels, or sampled answers split by "
            "a reward threshold)",
            ("only kto", "kto only"),
            words=(r"(?<![a-z_])kto(?![a-z_])",),
        ),
    )
