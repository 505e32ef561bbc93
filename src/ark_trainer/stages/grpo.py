"""GRPO (group relative policy optimization) with TRL's GRPOTrainer.

Starts from the RFT model (or the base model under ``--strategy GRPO``), samples ``--num_generations``
completions per prompt, scores them with the same composite reward as RFT and evaluation, and trains for
the remaining steps into ``OUT/grpo/``. TRL logs the health signals the report shows: reward mean/std,
the share of groups with zero reward variance (``frac_reward_zero_std``), KL, entropy and clip ratios.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ark_trainer.config import TrainConfig
from ark_trainer.diagnose.timing import time_generation
from ark_trainer.distributed import check_replicas
from ark_trainer.monitor import Monitor
from ark_trainer.resume import run_trainer
from ark_trainer.rewards.composite import CompositeReward
from ark_trainer.scale import peft_config, rollout_kwargs, vllm_grpo_kwargs
from ark_trainer.stages.common import (
    Runtime,
    is_conversational,
    load_tokenizer,
    model_prompt,
    save_final,
    stage_callbacks,
    trainer_kwargs,
)
from ark_trainer.stages.registry import Plot, StageContext, register_stage
from ark_trainer.stages.rft import reward_columns

if TYPE_CHECKING:
    from ark_trainer.plan import PlanStage


def grpo_rows(rows: list[dict], conversational: bool) -> list[dict]:
    """Dataset rows for GRPOTrainer: the prompt plus every extra column (passed on to the rewards)."""
    return [{"prompt": model_prompt(r["prompt"], conversational), **reward_columns(r)} for r in rows]


def train_grpo(
    cfg: TrainConfig,
    rt: Runtime,
    monitor: Monitor,
    model_path: str,
    rows: list[dict],
    reward: CompositeReward,
    out_dir: Path,
    log_dir: Path,
    final_dir: Path,
    plan: PlanStage,
) -> Path:
    """Run GRPO for ``plan.steps`` steps; returns the saved model folder."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    tok = load_tokenizer(model_path, rt.trust_remote_code)
    funcs, weights = reward.trl_reward_funcs()
    args = GRPOConfig(
        **trainer_kwargs(cfg, rt, out_dir, plan.steps, plan.learning_rate),
        num_generations=cfg.num_generations,
        max_completion_length=cfg.max_completion_length,
        temperature=cfg.temperature,
        beta=cfg.beta,
        loss_type=cfg.loss_type,
        reward_weights=weights,
        **vllm_grpo_kwargs(cfg),
        **rollout_kwargs(cfg, rt.device),  # larger generation batches on a GPU; nothing on CPU
    )
    dataset = Dataset.from_list(grpo_rows(rows, is_conversational(tok)))
    with monitor.stage("grpo", total=plan.steps):
        trainer = run_trainer(  # resume, crash-safe saves, guards, rollbacks (a fresh trainer each)
            lambda: _timed(
                GRPOTrainer(
                    model=model_path,
                    reward_funcs=funcs,
                    args=args,
                    train_dataset=dataset,
                    processing_class=tok,
                    callbacks=stage_callbacks(monitor, log_dir, "grpo", cfg.report_to),
                    peft_config=peft_config(cfg),
                )
            ),
            cfg,
            monitor,
            "grpo",
            out_dir,
        )
        check_replicas(trainer, "grpo")
        save_final(trainer, tok, final_dir, adapter_only=cfg.save_adapter_only and plan.last)
    warn_if_no_signal(monitor, trainer.state.log_history)
    return final_dir


ZERO_STD_LIMIT = 0.9


def _timed(trainer):
    """``trainer`` with ``generation_time`` logged next to ``step_time`` (ark_trainer/diagnose/timing.py)."""
    time_generation(trainer)
    return trainer


def warn_if_no_signal(monitor: Monitor, history: list[dict]) -> None:
    """GRPO learns nothing from a group whose completions all get the same reward: say so when most do."""
    shares = [h["frac_reward_zero_std"] for h in history if "frac_reward_zero_std" in h]
    if shares and sum(shares) / len(shares) >= ZERO_STD_LIMIT:
        monitor.warn(
            f"GRPO had almost no learning signal: on average {sum(shares) / len(shares):.0%} of groups had "
            "zero reward variance; raise --num_generations or --temperature, or use a finer-grained reward"
        )


@register_stage
class GRPOStage:
    """GRPO with TRL's GRPOTrainer, from the previous stage's model (or the base model)."""

    name, label = "grpo", "GRPO"
    steps_flag, lr_flag = None, "grpo_learning_rate"  # the last stage: what --max_train_steps leaves
    plots = (
        Plot("grpo_reward.png", "reward", "GRPO reward (± reward_std)", "reward_std"),
        Plot("grpo_kl.png", "kl", "GRPO KL to reference"),
        Plot("grpo_loss.png", "loss", "GRPO loss"),
        Plot("grpo_zero_std.png", "frac_reward_zero_std", "GRPO share of zero-variance groups"),
    )

    def run(self, ctx: StageContext, plan: PlanStage, model_in: str, final_dir: Path) -> str:
        import gc

        # looked up at call time so a test can replace train_grpo on this module
        model = train_grpo(
            ctx.cfg, ctx.rt, ctx.monitor, model_in, ctx.train, ctx.reward, ctx.out / self.name, ctx.log_dir,
            final_dir, plan,
        )  # fmt: skip
        gc.collect()
        return str(model)
