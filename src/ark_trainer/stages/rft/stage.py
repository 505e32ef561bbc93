"""RFT (reward fine-tuning): supervised fine-tune on the reward-selected answers.

The answers are sampled, scored and selected by :func:`ark_trainer.rewards.scoring.sample_and_select` (best at or
above ``--rft_min_reward`` per prompt, written to ``OUT/data/rft_scored.jsonl`` and ``rft_pairs.jsonl``),
from only as many prompts as ``--rft_steps`` will train on (``scoring.rft_budget``, sampled in rounds with
a margin for prompts whose answers score below the threshold), not the whole file; this stage only trains: ``--rft_steps`` with TRL's SFTTrainer into ``OUT/rft/``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from ark_trainer.core.metrics import PREFERENCE_ALIGNMENT
from ark_trainer.core.models.loading import load_tokenizer
from ark_trainer.core.models.prompts import is_conversational
from ark_trainer.core.runfolder import RunFolder
from ark_trainer.core.runtime.distributed import ranks
from ark_trainer.rewards.scoring import reselect, rft_budget, sample_and_select
from ark_trainer.stages.common import rft_sampling, train_and_save, trainer_kwargs
from ark_trainer.stages.registry import Plot, StageContext
from ark_trainer.stages.rft import report
from ark_trainer.stages.rft.options import RFTOptions

if TYPE_CHECKING:
    from ark_trainer.base.run_options import RunFlags
    from ark_trainer.stages.plan import PlanStage

log = logging.getLogger("ark_trainer")


def train_rft(
    ctx: StageContext,
    plan: PlanStage,
    model_in: str,
    sft_rows: list[dict],
    final_dir: Path,
    episodes: bool = False,
) -> Path:
    """Fine-tune on the selected completions with TRL's SFTTrainer; returns the saved model folder.

    With ``episodes`` (``--env``) the rows are selected episodes (``{messages, tools}``), tokenized with
    their assistant-turn masks (``stages/agent/rft.py``) so the loss is on the assistant turns only.
    """
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    tok = load_tokenizer(model_in, ctx.rt.trust_remote_code)
    if episodes:
        from ark_trainer.stages.agent.rft import tokenized_episodes

        sft_rows = tokenized_episodes(tok, sft_rows)
    args = SFTConfig(
        **trainer_kwargs(ctx.run, ctx.rt, ctx.out / "rft", plan.steps, plan.learning_rate),
        completion_only_loss=True,
        max_length=None,
    )
    train_and_save(
        ctx,
        plan,
        "rft",
        SFTTrainer,
        tok,
        final_dir,
        model=model_in,
        args=args,
        train_dataset=Dataset.from_list(sft_rows),
    )
    return final_dir


class RFTStage:
    """Sample → score → select → SFT on the best (resume reuses an earlier attempt's scored samples)."""

    name, label = "rft", "RFT"
    options, plays_episodes = RFTOptions, True
    steps_flag, lr_flag = "rft_steps", "rft_learning_rate"
    plots = (Plot("rft_loss.png", "loss", "RFT loss"),)
    headline_metric = PREFERENCE_ALIGNMENT  # the report's headline compares it with the base model

    def run(self, ctx: StageContext, plan: PlanStage, model_in: str, final_dir: Path) -> str:
        import gc

        run, opts = ctx.run, ctx.options
        assert isinstance(opts, RFTOptions)  # the registry hands each stage its own options
        if run.env:  # an agent run: whole episodes, tools executed
            return self._run_episodes(ctx, plan, model_in, final_dir)
        if ctx.done and (scored := _earlier_selection(ctx.done)) is not None:
            conversational = is_conversational(load_tokenizer(model_in, ctx.rt.trust_remote_code))
            sel = reselect(scored, opts.rft_min_reward, conversational)
            log.info("resume: RFT sampling already done (%d prompts kept)", len(sel.sft_rows))
        else:
            needed = rft_budget(
                plan.steps, run.batch_size, run.gradient_accumulation_steps, ranks().num_processes
            )
            sel = sample_and_select(
                rft_sampling(run, opts.rft_num_samples, opts.rft_temperature),
                ctx.rt,
                ctx.monitor,
                model_in,
                ctx.train,
                ctx.reward,
                RunFolder(ctx.out).data_dir,
                needed,
                min_reward=opts.rft_min_reward,
            )
        gc.collect()
        if not sel.sft_rows:
            ctx.monitor.warn(
                f"RFT kept no answer at or above --rft_min_reward {opts.rft_min_reward}; RFT training "
                "skipped, GRPO starts from the base model (lower the threshold or raise --rft_num_samples)"
            )
            return model_in
        return str(train_rft(ctx, plan, model_in, sel.sft_rows, final_dir))

    def check_data(self, run: RunFlags, options: RFTOptions, rows: list[dict]) -> None:
        """Before anything is written: under ``--env`` RFT needs episodes to sample or candidates to replay."""
        from ark_trainer.stages.agent.rft import check_episode_sources

        assert run.data_path  # validate() refuses a config without it (config.REQUIRED)
        check_episode_sources(run.env, run.data_path, options.rft_num_samples, rows)

    def _run_episodes(self, ctx: StageContext, plan: PlanStage, model_in: str, final_dir: Path) -> str:
        import gc

        from ark_trainer.stages.agent.env import env_for
        from ark_trainer.stages.agent.rft import earlier_selection, sample_episodes

        env = env_for(ctx.run)
        assert env is not None  # only called under --env
        selected = earlier_selection(ctx.done) if ctx.done else None
        if selected is None:
            selected = sample_episodes(ctx, model_in, env)
        else:
            log.info("resume: RFT episode sampling already done (%d tasks kept)", len(selected))
        gc.collect()
        if not selected:
            ctx.monitor.warn(
                f"RFT kept no episode at or above --rft_min_reward {ctx.options.rft_min_reward}; RFT training "
                "skipped, GRPO starts from the base model (lower the threshold or raise --rft_num_samples)"
            )
            return model_in
        return str(train_rft(ctx, plan, model_in, selected, final_dir, episodes=True))

    def estimate_parts(self, run: RunFlags, options: RFTOptions, steps: int, t, size) -> list:
        """What ``steps`` steps of the stage cost: the answers it samples, then its supervised steps
        (``core/runtime/estimate.py``)."""
        from ark_trainer.core.auto_defaults import new_tokens
        from ark_trainer.core.runtime.estimate import rft_parts

        accumulation, tokens = run.gradient_accumulation_steps, new_tokens(run.max_completion_length)
        return rft_parts(t, steps, run.batch_size, accumulation, options.rft_num_samples, size.train, tokens)

    def report_blocks(self, run) -> list:
        """The report's "RFT data selection" section (``report.py``)."""
        return report.blocks(run)


def _earlier_selection(done) -> list[dict] | None:
    """The scored RFT candidates of an earlier attempt (``rft_selection`` is logged after both files)."""
    from ark_trainer.base.fileio import read_jsonl

    path = RunFolder(done.out).data_dir / "rft_scored.jsonl"
    return read_jsonl(path) if done.has("rft_selection") and path.is_file() else None


def register_stages(register) -> None:
    """The plug-in hook (``ark_trainer.base.plugins``) that registers this module's stage."""
    register(RFTStage)
