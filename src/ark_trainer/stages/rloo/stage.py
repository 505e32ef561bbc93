"""RLOO (REINFORCE leave-one-out) with TRL's RLOOTrainer: the critic-free alternative to GRPO.

Same rewards as GRPO (the run's composite reward, each grader logged as ``rewards/<name>/mean``) and the
same sampling flags (``--num_generations``, ``--temperature``, ``--beta`` as the KL coefficient,
``--rollout_steps``: its options declare them as GRPO's do, ``options.py``; the run's
``--max_completion_length`` and vLLM); each answer's baseline is the mean reward of the other answers to its
prompt. Its own flag besides: ``--rloo_learning_rate``. PPO, which needs a learned critic, is not
offered: TRL no longer ships it, and RLOO/GRPO are its critic-free successors.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import TYPE_CHECKING

from ark_trainer.base.scale import rollout_kwargs, vllm_grpo_kwargs
from ark_trainer.base.strategies import Strategy
from ark_trainer.core.auto_defaults import new_tokens
from ark_trainer.core.models.loading import load_tokenizer
from ark_trainer.core.models.prompts import is_conversational
from ark_trainer.stages.common import (
    no_checkpointing,
    train_and_save,
    trainer_kwargs,
    vllm_settings,
    without_dropout,
)
from ark_trainer.stages.grpo.stage import (
    grpo_rows,  # the prompt plus the reward columns: the same rows as GRPO's
)
from ark_trainer.stages.registry import Plot, StageContext
from ark_trainer.stages.rloo import report
from ark_trainer.stages.rloo.options import RLOOOptions

if TYPE_CHECKING:
    from ark_trainer.base.run_options import RunFlags
    from ark_trainer.stages.plan import PlanStage


def train_rloo(ctx: StageContext, plan: PlanStage, model_in: str, final_dir: Path) -> Path:
    """Run TRL's RLOOTrainer for ``plan.steps`` with the run's composite reward; returns the model folder."""
    from datasets import Dataset
    from trl import RLOOConfig, RLOOTrainer

    run, opts = ctx.run, ctx.options
    assert isinstance(opts, RLOOOptions)  # the registry hands each stage its own options
    tok = load_tokenizer(model_in, ctx.rt.trust_remote_code)
    funcs, weights = ctx.reward.trl_reward_funcs()
    args = RLOOConfig(
        **without_dropout(
            no_checkpointing(trainer_kwargs(run, ctx.rt, ctx.out / "rloo", plan.steps, plan.learning_rate)),
            model_in,
            ctx.rt.trust_remote_code,
        ),
        num_generations=opts.num_generations,
        max_completion_length=new_tokens(run.max_completion_length),
        temperature=opts.temperature,
        beta=opts.beta,
        disable_dropout=True,  # sample and score one policy (LoRA's dropout is off: docs/real-models.md)
        reward_weights=weights,
        **vllm_grpo_kwargs(vllm_settings(run)),
        **rollout_kwargs(
            ctx.rt.device, opts.rollout_steps, run.batch_size, run.gradient_accumulation_steps, run.use_vllm
        ),
    )
    dataset = Dataset.from_list(grpo_rows(ctx.train, is_conversational(tok)))
    train_and_save(
        ctx,
        plan,
        "rloo",
        RLOOTrainer,
        tok,
        final_dir,
        model=model_in,
        reward_funcs=funcs,
        args=args,
        train_dataset=dataset,
    )
    return final_dir


class RLOOStage:
    """RLOO with TRL's RLOOTrainer on the GRPO rewards, from the previous stage's model or the base model."""

    name, label = "rloo", "RLOO"
    options, plays_episodes = RLOOOptions, False
    steps_flag, lr_flag = None, "rloo_learning_rate"  # always the last stage: what --max_train_steps leaves
    plots = (
        Plot("rloo_reward.png", "reward", "RLOO reward (± reward_std)", "reward_std"),
        Plot("rloo_loss.png", "loss", "RLOO loss"),
    )

    def run(self, ctx: StageContext, plan: PlanStage, model_in: str, final_dir: Path) -> str:
        model = train_rloo(ctx, plan, model_in, final_dir)
        gc.collect()
        return str(model)

    def estimate_parts(self, run: RunFlags, options: RLOOOptions, steps: int, t, size) -> list:
        """What ``steps`` steps of the stage cost: each step's groups at the run's completion length and its
        loss passes (``core/runtime/estimate.py``); RLOO evaluates nothing during the stage."""
        from ark_trainer.core.runtime.estimate import GRPOWork, grpo_parts
        from ark_trainer.stages.grpo.auto import grpo_accumulation

        micro, prompts = grpo_accumulation(run.batch_size, options.num_generations, None)
        tokens = new_tokens(run.max_completion_length)
        work = GRPOWork(steps, prompts, options.num_generations, tokens, micro, 0, size.dev, options.beta > 0)
        return grpo_parts(t, self.name, work)

    def report_blocks(self, run) -> list:
        """The report's "Training health (RLOO)" section (``report.py``)."""
        return report.blocks(run)


def register_stages(register) -> None:
    """The plug-in hook (``ark_trainer.base.plugins``) that registers this module's stage."""
    register(RLOOStage)


def register_strategies(register) -> None:
    """The plug-in hook (``ark_trainer.base.plugins``) that adds the strategy ending with RLOO."""
    register(
        "RLOO",
        Strategy(
            ("rloo",),
            "one step: RLOO, the critic-free policy gradient with a leave-one-out baseline, on the GRPO rewards",
            ("only rloo", "rloo only"),
            words=(r"(?<![a-z_])rloo(?![a-z_])",),
        ),
    )
