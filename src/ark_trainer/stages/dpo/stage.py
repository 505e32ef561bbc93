"""DPO (direct preference optimization) with TRL's DPOTrainer, on preference pairs.

``--strategy DPO`` trains the base model, ``--strategy RFT+DPO`` the RFT model, on pairs from
``stages/preference.py``: the data's own ``chosen``/``rejected``, or the starting model's best and worst
sampled answers by the run's reward (ties and pairs below ``--dpo_min_margin`` dropped and counted). The
reward is used only to build the pairs; training itself needs no reward calls. Knobs: ``--dpo_beta``,
``--dpo_loss_type`` (TRL's ``loss_type``), ``--dpo_learning_rate``; steps: what ``--max_train_steps`` leaves.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import TYPE_CHECKING

from ark_trainer.base.strategies import Strategy
from ark_trainer.core.metrics import PREFERENCE_ALIGNMENT
from ark_trainer.core.models.loading import load_tokenizer
from ark_trainer.stages.common import no_checkpointing, train_and_save, trainer_kwargs
from ark_trainer.stages.dpo.options import DPOOptions, dpo_losses
from ark_trainer.stages.preference import dpo_pairs, earlier, stats_blocks
from ark_trainer.stages.preference import estimate_parts as preference_estimate
from ark_trainer.stages.preference import given_answers as data_gives_answers
from ark_trainer.stages.registry import Plot, StageContext

if TYPE_CHECKING:
    from ark_trainer.stages.plan import PlanStage


def train_dpo(ctx: StageContext, plan: PlanStage, model_in: str, rows: list[dict], final_dir: Path) -> Path:
    """Run TRL's DPOTrainer for ``plan.steps`` on ``rows``; returns the saved model folder."""
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    opts = ctx.options
    assert isinstance(opts, DPOOptions)  # the registry hands each stage its own options
    tok = load_tokenizer(model_in, ctx.rt.trust_remote_code)
    args = DPOConfig(
        **no_checkpointing(trainer_kwargs(ctx.run, ctx.rt, ctx.out / "dpo", plan.steps, plan.learning_rate)),
        beta=opts.dpo_beta,
        loss_type=dpo_losses(opts.dpo_loss_type),
    )
    train_and_save(
        ctx,
        plan,
        "dpo",
        DPOTrainer,
        tok,
        final_dir,
        model=model_in,
        args=args,
        train_dataset=Dataset.from_list(rows),
    )
    return final_dir


class DPOStage:
    """Pairs (the data's or sampled) → TRL's DPOTrainer, from the previous stage's model or the base model."""

    name, label = "dpo", "DPO"
    options, plays_episodes = DPOOptions, False
    steps_flag, lr_flag = None, "dpo_learning_rate"  # always the last stage: what --max_train_steps leaves
    plots = (
        Plot("dpo_loss.png", "loss", "DPO loss"),
        Plot("dpo_margin.png", "rewards/margins", "DPO reward margin (chosen − rejected)"),
        Plot("dpo_accuracy.png", "rewards/accuracies", "DPO pairs ranked right by the policy"),
    )
    headline_metric = PREFERENCE_ALIGNMENT

    def run(self, ctx: StageContext, plan: PlanStage, model_in: str, final_dir: Path) -> str:
        data = earlier(ctx, "dpo_pairs") or dpo_pairs(ctx, model_in)
        gc.collect()
        if not data.rows:
            ctx.monitor.warn(
                "DPO found no preference pair (every prompt's answers tied or differed by less than "
                f"--dpo_min_margin {ctx.options.dpo_min_margin}); DPO training skipped. Lower --dpo_min_margin, "
                "raise --rft_num_samples or --rft_temperature, or give chosen/rejected answers in the data"
            )
            return model_in
        return str(train_dpo(ctx, plan, model_in, data.rows, final_dir))

    def estimate_parts(self, run, options: DPOOptions, steps: int, t, size) -> list:
        """What ``steps`` steps of the stage cost (``stages/preference.py``)."""
        return preference_estimate(self.name, run, options, steps, t, size)

    def given_answers(self, rows: list[dict]) -> bool:
        """Whether the data carries the answers the stage would otherwise sample."""
        return data_gives_answers(rows)

    def report_blocks(self, run) -> list:
        """The report's "DPO pairs" section: where the pairs came from and what was dropped."""
        return stats_blocks(run, "dpo_pairs", "DPO pairs")


def register_stages(register) -> None:
    """The plug-in hook (``ark_trainer.base.plugins``) that registers this module's stage."""
    register(DPOStage)


def register_strategies(register) -> None:
    """The plug-in hook (``ark_trainer.base.plugins``) that adds the strategies ending with DPO."""
    register(
        "DPO",
        Strategy(
            ("dpo",),
            "one step: DPO on preference pairs (the data's chosen/rejected, or the model's own best vs worst "
            "sampled answer); no reward in the training loop, cheap and stable",
            ("only dpo", "dpo only"),
            words=(r"(?<![a-z_])dpo(?![a-z_])|直接偏好优化",),
        ),
    )
    register(
        "RFT+DPO",
        Strategy(
            ("rft", "dpo"),
            "two steps: RFT on reward-selected answers, then DPO on fresh best-vs-worst pairs sampled from the "
            "RFT model",
            ("rftdpo", "rft_dpo", "rft-dpo", "rft dpo"),
            phrases=(
                r"先\s*(?:做|用)?\s*rft[\s,，、]*(?:再|然后|后|接着)\s*(?:做|用)?\s*dpo"
                r"|rft(?:(?!学习率|lr|learning|温度|temp|batch|[0-9])[^\n]){0,20}?(?<![a-z_])dpo(?![a-z_])",
            ),
        ),
    )
