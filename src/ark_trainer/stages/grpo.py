"""GRPO (group relative policy optimization) with TRL's GRPOTrainer.

Starts from the RFT model (or the base model under ``--strategy GRPO``), samples ``--num_generations``
completions per prompt, scores them with the same composite reward as RFT and evaluation, and trains for
the remaining steps into ``OUT/grpo/``. TRL logs the health signals the report shows: reward mean/std,
the share of groups with zero reward variance (``frac_reward_zero_std``), KL, entropy and clip ratios.

What it samples and is scored by is the stage's own (``auto_defaults.resolve_grpo_defaults``, in
``plan.json``): ``--grpo_reward_weights`` (by default the task's decision grader alone for the QC preset),
``--grpo_max_completion_length`` (the decision lines, not the reply's budget; a whole episode under
``--env``) and ``--grpo_prompts_per_step`` prompts per optimizer step by gradient accumulation, stratified by
label where the data has labels (:func:`label_balanced`).
"""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ark_trainer.base.options.grpo import GRPOOptions
from ark_trainer.base.scale import rollout_kwargs, vllm_grpo_kwargs
from ark_trainer.core.auto_defaults import (
    RUN_WEIGHTS,
    data_labels,
    grpo_accumulation,
    label_column,
    new_tokens,
    parse_grpo_weights,
    row_label,
)
from ark_trainer.core.metrics import flat_group_share
from ark_trainer.core.models.loading import load_tokenizer
from ark_trainer.core.models.prompts import is_conversational, model_prompt
from ark_trainer.core.runtime.monitor import Monitor
from ark_trainer.rewards.composite import reward_columns
from ark_trainer.stages.common import train_and_save, trainer_kwargs, vllm_settings, without_dropout
from ark_trainer.stages.diagnose.timing import time_generation
from ark_trainer.stages.dynamic_sampling import dynamic_sampling_trainer
from ark_trainer.stages.registry import Plot, StageContext, register_stage
from ark_trainer.stages.shared_prefix import shared_prefix_trainer

if TYPE_CHECKING:
    from ark_trainer.stages.plan import PlanStage


def grpo_rows(rows: list[dict], conversational: bool) -> list[dict]:
    """Dataset rows for GRPOTrainer: the prompt plus every extra column (passed on to the rewards)."""
    return [{"prompt": model_prompt(r["prompt"], conversational), **reward_columns(r)} for r in rows]


def train_grpo(ctx: StageContext, plan: PlanStage, model_in: str, final_dir: Path) -> Path:
    """Run GRPO from ``model_in`` for ``plan.steps`` on the run's prompts; returns the saved model folder."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    rt = ctx.rt
    accumulation, _prompts = grpo_accumulation(
        ctx.cfg.batch_size, ctx.cfg.num_generations, ctx.cfg.grpo_prompts_per_step
    )
    cfg = replace(ctx.cfg, gradient_accumulation_steps=accumulation)  # this stage's step: its prompts' groups
    tok = load_tokenizer(model_in, rt.trust_remote_code)
    funcs, weights = grpo_reward(ctx).trl_reward_funcs()
    agent = agent_kwargs(_env(ctx), tok, funcs, weights)  # --env: whole episodes through TRL's tool loop
    rows, balanced = label_balanced(ctx.train, cfg.seed)
    max_new_tokens = grpo_new_tokens(cfg.grpo_max_completion_length, new_tokens(cfg.max_completion_length))
    args = GRPOConfig(
        **without_dropout(
            trainer_kwargs(cfg, rt, ctx.out / "grpo", plan.steps, plan.learning_rate),
            model_in,
            rt.trust_remote_code,
        ),  # fmt: skip
        num_generations=cfg.num_generations,
        max_completion_length=max_new_tokens,
        temperature=cfg.temperature,
        beta=cfg.beta,
        loss_type=cfg.loss_type,
        scale_rewards=cfg.scale_rewards,
        disable_dropout=True,  # sample and score one policy (LoRA's dropout is off: docs/real-models.md)
        reward_weights=weights,
        shuffle_dataset=not balanced,  # the balanced order is the order
        **vllm_grpo_kwargs(vllm_settings(ctx)),
        # larger generation batches on a GPU; nothing on CPU
        **rollout_kwargs(
            rt.device, cfg.rollout_steps, cfg.batch_size, cfg.gradient_accumulation_steps, cfg.use_vllm
        ),
        **agent.pop("config", {}),
    )
    dataset = Dataset.from_list(grpo_rows(rows, is_conversational(tok)))
    trainer_cls = grpo_trainer_class(GRPOTrainer, cfg.dynamic_sampling_rounds, cfg.seed)
    eval_steps = 0 if cfg.env else cfg.grpo_eval_steps or 0  # episodes are not evaluated as GRPO trains

    def wrap(trainer):
        return _with_best_policy(_timed(trainer), ctx, tok, model_in, eval_steps, max_new_tokens)

    trainer = train_and_save(
        ctx,
        plan,
        "grpo",
        trainer_cls,
        tok,
        final_dir,
        wrap=wrap,
        model=model_in,
        reward_funcs=funcs,
        args=args,
        train_dataset=dataset,
        **agent,
    )
    warn_if_no_signal(ctx.monitor, trainer.state.log_history)
    return final_dir


def grpo_trainer_class(base: type, dynamic_sampling_rounds: int, seed: int) -> type:
    """The trainer GRPO trains with: TRL's ``base`` with dynamic sampling (``--dynamic_sampling_rounds``,
    which TRL lacks: ``dynamic_sampling.py``) and each prompt through the model once a group
    (``shared_prefix.py``). ``tests/stages/test_trl_parity.py`` checks its step gradient against ``base``'s."""
    trainer_cls = base
    if dynamic_sampling_rounds:
        trainer_cls = dynamic_sampling_trainer(base, dynamic_sampling_rounds, seed)
    return shared_prefix_trainer(trainer_cls)


ZERO_STD_LIMIT = 0.9


def grpo_reward(ctx: StageContext):
    """The run's reward combined with GRPO's own weights (``--grpo_reward_weights``)."""
    spec = ctx.cfg.grpo_reward_weights or RUN_WEIGHTS
    return ctx.reward.reweighted(parse_grpo_weights(spec, ctx.reward.components))


def grpo_new_tokens(grpo_length: int | None, run_length: int) -> int:
    """``--grpo_max_completion_length`` (``grpo_length``) as resolved; the run's completion length
    (``run_length``, ``auto_defaults.new_tokens``) where nothing resolved it."""
    return int(grpo_length or run_length)


def label_balanced(rows: list[dict], seed: int) -> tuple[list[dict], bool]:
    """``rows`` in label-stratified order and True: each label's rows shuffled and spread evenly over the
    whole order, so any run of consecutive prompts (an optimizer step's) holds the labels in the data's
    proportions, not two prompts of one kind by chance, and GRPO optimises the task as the data (and the
    held-out set drawn like it) weighs it. Rows without a label are one more stratum, spread the same way
    (at the end, a stage shorter than the data never saw them). The rows as they are and False where the
    data has fewer than two labels."""
    labels, column = data_labels(rows), label_column(rows)  # a class-valued reference is labels too
    if len(labels) < 2:
        return rows, False
    rng = random.Random(seed)
    groups: dict[str | None, list[dict]] = {label: [] for label in labels}
    groups[None] = []  # the unlabelled rows
    for row in rows:
        label = row_label(row, column)
        groups[label if label in groups else None].append(row)
    keyed: list[tuple[float, float, dict]] = []
    for group in groups.values():
        rng.shuffle(group)
        offset = rng.random()  # where in its first slot each label starts: no label always leads
        keyed += [((k + offset) / len(group), rng.random(), row) for k, row in enumerate(group)]
    keyed.sort(key=lambda item: item[:2])
    return [row for _, _, row in keyed], True


def _env(ctx: StageContext):
    """The run's environment class and limits under ``--env`` (``agent/env.py``); ``None`` without it."""
    from ark_trainer.stages.agent.env import env_for

    return env_for(ctx.cfg)


def agent_kwargs(env: tuple | None, tok, funcs: list, weights: list[float]) -> dict:
    """Under ``--env`` (``env``: the environment class and its limits): GRPOTrainer's ``environment_factory``
    and the tool-loop settings; else (``None``) nothing.

    The factory is our limit-applying class (``agent/env.py``): TRL lists its tool methods, resets one per
    rollout with the row's columns, runs the model's calls through it (``--max_turns`` assistant turns:
    ``max_tool_calling_iterations`` is one less) and masks the tool results out of the loss. The reward
    functions receive the instances as ``environments`` (the ``env_reward`` grader reads them). A weight-0
    ``agent_turns`` function makes TRL log the mean assistant turns per episode (``rewards/agent_turns/mean``).
    """
    from ark_trainer.stages.agent.toolcall import attach_response_parser

    if env is None:
        return {}
    env_cls, limits = env
    attach_response_parser(tok)
    funcs.append(agent_turns)
    weights.append(0.0)
    return {"environment_factory": env_cls, "config": {"max_tool_calling_iterations": limits.max_turns - 1}}


def agent_turns(prompts: list, completions: list, **columns) -> list[float]:
    """Assistant turns of each episode (a metric: weight 0)."""
    from ark_trainer.base.chat.episode import view

    return [float(view(c).turns) for c in completions]


def _with_best_policy(trainer, ctx: StageContext, tok, model_in: str, eval_steps: int, max_new_tokens: int):
    """``trainer`` evaluating itself every ``eval_steps`` (``--grpo_eval_steps``) with answers of up to
    ``max_new_tokens`` and ending on its best step (``stages/grpo_eval.py``); as it is where that is off (0:
    also when episodes are played) or there is no held-out set."""
    from ark_trainer.core.runfolder import RunFolder
    from ark_trainer.stages.grpo_eval import best_policy_callback

    if eval_steps and ctx.held_out:  # the dev split: the step is chosen on prompts no report shows
        reward = ctx.reward  # the run's graders: the task accuracy the report shows
        callback = best_policy_callback(
            ctx.held_out, reward, tok, eval_steps, max_new_tokens, ctx.rt.bf16, ctx.monitor,
            record=RunFolder(ctx.out).best_step_path("grpo"),
        )  # fmt: skip
        trainer.add_callback(callback)
    return trainer


def _timed(trainer):
    """``trainer`` with ``generation_time`` logged next to ``step_time`` (ark_trainer/stages/diagnose/timing.py)."""
    time_generation(trainer)
    return trainer


def warn_if_no_signal(monitor: Monitor, history: list[dict]) -> None:
    """GRPO learns nothing from a group whose completions all get the same reward: say so when most of the
    groups it trained on (``metrics.flat_group_share``) were."""
    shares = [s for s in map(flat_group_share, history) if s is not None]
    if shares and sum(shares) / len(shares) >= ZERO_STD_LIMIT:
        monitor.warn(
            f"GRPO had almost no learning signal: on average {sum(shares) / len(shares):.0%} of groups had "
            "zero reward variance; raise --num_generations or --temperature, or use a finer-grained reward"
        )


@register_stage
class GRPOStage:
    """GRPO with TRL's GRPOTrainer, from the previous stage's model (or the base model)."""

    name, label = "grpo", "GRPO"
    options, plays_episodes = GRPOOptions, True
    steps_flag, lr_flag = None, "grpo_learning_rate"  # the last stage: what --max_train_steps leaves
    plots = (
        Plot("grpo_reward.png", "reward", "GRPO reward (± reward_std)", "reward_std"),
        Plot("grpo_kl.png", "kl", "GRPO KL to reference"),
        Plot("grpo_loss.png", "loss", "GRPO loss"),
        Plot(
            "grpo_zero_std.png",
            "frac_reward_zero_std",
            "GRPO share of zero-variance groups",
            limit=ZERO_STD_LIMIT,
        ),
    )

    def run(self, ctx: StageContext, plan: PlanStage, model_in: str, final_dir: Path) -> str:
        import gc

        model = train_grpo(ctx, plan, model_in, final_dir)  # looked up at call time: a test may replace it
        gc.collect()
        return str(model)

    def report_blocks(self, run) -> list:
        """The report's "Training health (GRPO)" section: last and mean of each health metric TRL logged."""
        from ark_trainer.stages.report import mean, num, short
        from ark_trainer.stages.report.render import Heading, Para, Table

        logs = run.metrics(self.name)
        if not logs:
            return [Heading("Training health (GRPO)"), Para("Not run (no GRPO metrics logged).")]
        graders = sorted({k for log in logs for k in log if k.startswith("rewards/") and k.endswith("/mean")})
        rows = []
        for name in (*HEALTH_FIELDS, *graders):
            series = [log[name] for log in logs if num(log.get(name)) is not None]
            if series:
                rows.append([name, short(series[-1]), short(mean(series))])
        steps = [s for s in (num(log.get("step")) for log in logs) if s is not None]
        last_step = f", last step {int(max(steps))}" if steps else ""
        blocks = [Heading("Training health (GRPO)"), Para(f"{len(logs)} log lines{last_step}.")]
        blocks.append(Table(["metric", "last", "mean"], rows))
        if not any("kl" in log for log in logs) and num(run.config.get("beta")) == 0:
            blocks.append(Para("KL not measured: --beta 0 trains without a reference model."))
        warnings = [Para(w, alert=True) for w in self.report_warnings(run)]
        return [*blocks, *warnings, *trl_differences()]

    def flat_reward_fix(self, config: dict) -> str | None:
        """diagnose's ``flat_reward``: what else helps this stage when most groups are flat (``config``: the
        run's ``run.yaml``). Dynamic sampling wraps GRPO's trainer only, with one training process."""
        if config.get("dynamic_sampling_rounds") or int(config.get("num_processes") or 1) != 1:
            return None
        return "--dynamic_sampling_rounds 2 (DAPO: flat groups replaced by freshly sampled ones)"

    def report_warnings(self, run) -> list[str]:
        from ark_trainer.stages.report import mean

        share = mean([flat_group_share(log) for log in run.metrics(self.name)])
        if share is None or share < ZERO_STD_LIMIT:
            return []
        return [
            f"WARNING: on average {share * 100:.1f}% of GRPO groups had zero reward variance "
            f"(≥ {ZERO_STD_LIMIT:.0%} of the groups it trained on): the run got almost no learning signal. "
            "Use graded (not all-or-nothing) rewards, raise num_generations or the sampling temperature, "
            "or check that the reward functions apply to this data."
        ]


def trl_differences() -> list:
    """The report's "Defaults that differ from TRL" (``trl_defaults.py``: the table docs/real-models.md holds)."""
    from ark_trainer.stages import trl_defaults
    from ark_trainer.stages.report.render import Heading, Table

    return [Heading("Defaults that differ from TRL (GRPO)"), Table(trl_defaults.HEADER, trl_defaults.rows())]


HEALTH_FIELDS = (
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "kl",
    "entropy",
    "clip_ratio/region_mean",
    "completions/mean_length",
)  # the report's health table (besides each grader's mean)
