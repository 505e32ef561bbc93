"""GRPO (group relative policy optimization) with TRL's GRPOTrainer.

Starts from the RFT model (or the base model under ``--strategy GRPO``), samples ``--num_generations``
completions per prompt, scores them with the same composite reward as RFT and evaluation, and trains for
the remaining steps into ``OUT/grpo/``. TRL logs the health signals the report shows: reward mean/std,
the share of groups with zero reward variance (``frac_reward_zero_std``), KL, entropy and clip ratios.

What it samples and is scored by is the stage's own (its automatic defaults, ``auto.py``, in
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

from ark_trainer.base.scale import rollout_kwargs, vllm_grpo_kwargs
from ark_trainer.base.strategies import Strategy
from ark_trainer.core.auto_defaults import new_tokens
from ark_trainer.core.metrics import flat_group_share
from ark_trainer.core.models.loading import load_tokenizer
from ark_trainer.core.models.prompts import is_conversational, model_prompt
from ark_trainer.core.runtime.monitor import Monitor
from ark_trainer.rewards.composite import reward_columns
from ark_trainer.stages.common import train_and_save, trainer_kwargs, vllm_settings, without_dropout
from ark_trainer.stages.diagnose.timing import time_generation
from ark_trainer.stages.grpo import estimate, report
from ark_trainer.stages.grpo.auto import (
    AUTO_FLAGS,
    RUN_WEIGHTS,
    choose,
    data_labels,
    grpo_accumulation,
    label_column,
    parse_grpo_weights,
    row_label,
)
from ark_trainer.stages.grpo.dynamic_sampling import dynamic_sampling_trainer
from ark_trainer.stages.grpo.options import GRPOOptions
from ark_trainer.stages.grpo.report import ZERO_STD_LIMIT
from ark_trainer.stages.grpo.shared_prefix import shared_prefix_trainer
from ark_trainer.stages.registry import Plot, StageContext

if TYPE_CHECKING:
    from ark_trainer.base.run_options import RunFlags
    from ark_trainer.core.auto_defaults import AutoDefault, StageFacts
    from ark_trainer.stages.plan import PlanStage


def grpo_rows(rows: list[dict], conversational: bool) -> list[dict]:
    """Dataset rows for GRPOTrainer: the prompt plus every extra column (passed on to the rewards)."""
    return [{"prompt": model_prompt(r["prompt"], conversational), **reward_columns(r)} for r in rows]


def train_grpo(ctx: StageContext, plan: PlanStage, model_in: str, final_dir: Path) -> Path:
    """Run GRPO from ``model_in`` for ``plan.steps`` on the run's prompts; returns the saved model folder."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    rt, opts = ctx.rt, ctx.options
    assert isinstance(opts, GRPOOptions)  # the registry hands each stage its own options
    accumulation, _prompts = grpo_accumulation(
        ctx.run.batch_size, opts.num_generations, opts.grpo_prompts_per_step
    )
    run = replace(ctx.run, gradient_accumulation_steps=accumulation)  # this stage's step: its prompts' groups
    tok = load_tokenizer(model_in, rt.trust_remote_code)
    funcs, weights = grpo_reward(ctx).trl_reward_funcs()
    agent = agent_kwargs(_env(ctx), tok, funcs, weights)  # --env: whole episodes through TRL's tool loop
    rows, balanced = label_balanced(ctx.train, run.seed)
    max_new_tokens = grpo_new_tokens(opts.grpo_max_completion_length, new_tokens(run.max_completion_length))
    args = GRPOConfig(
        **without_dropout(
            trainer_kwargs(run, rt, ctx.out / "grpo", plan.steps, plan.learning_rate),
            model_in,
            rt.trust_remote_code,
        ),  # fmt: skip
        num_generations=opts.num_generations,
        max_completion_length=max_new_tokens,
        temperature=opts.temperature,
        beta=opts.beta,
        loss_type=opts.loss_type,
        scale_rewards=opts.scale_rewards,
        disable_dropout=True,  # sample and score one policy (LoRA's dropout is off: docs/real-models.md)
        reward_weights=weights,
        shuffle_dataset=not balanced,  # the balanced order is the order
        **vllm_grpo_kwargs(vllm_settings(run)),
        # larger generation batches on a GPU; nothing on CPU
        **rollout_kwargs(
            rt.device, opts.rollout_steps, run.batch_size, run.gradient_accumulation_steps, run.use_vllm
        ),
        **agent.pop("config", {}),
    )
    dataset = Dataset.from_list(grpo_rows(rows, is_conversational(tok)))
    trainer_cls = grpo_trainer_class(GRPOTrainer, opts.dynamic_sampling_rounds, run.seed)
    eval_steps = 0 if run.env else opts.grpo_eval_steps or 0  # episodes are not evaluated as GRPO trains

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


def grpo_reward(ctx: StageContext):
    """The run's reward combined with GRPO's own weights (``--grpo_reward_weights``)."""
    spec = ctx.options.grpo_reward_weights or RUN_WEIGHTS
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
    """The run's environment class and limits under ``--env`` (``stages/agent/env.py``); ``None`` without it."""
    from ark_trainer.stages.agent.env import env_for

    return env_for(ctx.run)


def agent_kwargs(env: tuple | None, tok, funcs: list, weights: list[float]) -> dict:
    """Under ``--env`` (``env``: the environment class and its limits): GRPOTrainer's ``environment_factory``
    and the tool-loop settings; else (``None``) nothing.

    The factory is our limit-applying class (``stages/agent/env.py``): TRL lists its tool methods, resets one per
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
    ``max_new_tokens`` and ending on its best step (``stages/grpo/grpo_eval.py``); as it is where that is off (0:
    also when episodes are played) or there is no held-out set."""
    from ark_trainer.core.runfolder import RunFolder
    from ark_trainer.stages.grpo.grpo_eval import best_policy_callback

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


class GRPOStage:
    """GRPO with TRL's GRPOTrainer, from the previous stage's model (or the base model)."""

    name, label = "grpo", "GRPO"
    options, plays_episodes = GRPOOptions, True
    auto_flags = AUTO_FLAGS  # chosen by auto_defaults when a run leaves them unset
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

    def auto_defaults(self, run: RunFlags, options: GRPOOptions, facts: StageFacts) -> dict[str, AutoDefault]:
        """The values of the stage's automatic flags ``options`` leave unset (``auto.py``), by flag."""
        return choose(run, options, facts)

    def estimate_parts(self, run: RunFlags, options: GRPOOptions, steps: int, t, size) -> list:
        """What ``steps`` steps of the stage cost, its evaluations on dev too (``estimate.py``)."""
        return estimate.parts(run, options, steps, t, size)

    def follow_steps(self, run: RunFlags, options: GRPOOptions, steps: int, facts) -> dict[str, AutoDefault]:
        """Its automatic flags that follow its steps, chosen for ``steps`` (``estimate.py``)."""
        return estimate.follow_steps(run, steps, facts)

    def estimate_notes(
        self, run: RunFlags, options: GRPOOptions, steps: int, t, size, automatic
    ) -> list[str]:
        """What its evaluations on dev cost, said with the estimate (``estimate.py``)."""
        note = estimate.eval_note(run, options, steps, t, size, "grpo_eval_steps" in automatic)
        return [note] if note else []

    def report_blocks(self, run) -> list:
        """The report's "Training health (GRPO)" section (``report.py``)."""
        return report.blocks(run)

    def flat_reward_fix(self, config: dict) -> str | None:
        """diagnose's ``flat_reward``: what else helps this stage when most groups are flat (``config``: the
        run's ``run.yaml``). Dynamic sampling wraps GRPO's trainer only, with one training process."""
        if config.get("dynamic_sampling_rounds") or int(config.get("num_processes") or 1) != 1:
            return None
        return "--dynamic_sampling_rounds 2 (DAPO: flat groups replaced by freshly sampled ones)"

    def report_warnings(self, run) -> list[str]:
        """The report's warnings about this stage (``report.py``)."""
        return report.warnings(run)


def register_stages(register) -> None:
    """The plug-in hook (``ark_trainer.base.plugins``) that registers this module's stage."""
    register(GRPOStage)


def register_strategies(register) -> None:
    """The plug-in hook (``ark_trainer.base.plugins``) that adds the strategies ending with GRPO."""
    register(
        "RFT+GRPO",
        Strategy(
            ("rft", "grpo"),
            "two steps: RFT first calibrates the model's preferences on reward-selected answers, then GRPO "
            "optimises the task reward from there (stable, precise alignment; the choice for customer-service "
            "QC)",
            ("rftgrpo", "rft_grpo", "rft-grpo", "rft grpo"),
            phrases=(
                r"先\s*(?:做|用)?\s*rft[\s,，、]*(?:再|然后|后|接着)\s*(?:做|用)?\s*grpo"
                r"|rft(?:(?!学习率|lr|learning|温度|temp|batch|[0-9])[^\n]){0,20}?(?<![a-z_])grpo(?![a-z_])",
            ),
        ),
    )
    register(
        "GRPO",
        Strategy(
            ("grpo",),
            "one step: GRPO straight from the base model (faster iteration for a model whose preferences "
            "are already good)",
            ("only grpo", "only_grpo", "only-grpo", "onlygrpo", "grpo only"),
            phrases=(
                r"(?:only|just)\s+(?:use\s+|do\s+)?(?:a\s+)?grpo|grpo[\s_-]*only"
                r"|(?:仅|只|单独|只用|只做|仅用|仅做)\s*(?:用|做)?\s*grpo",
                r"快速迭代|fast(?:er)?\s+iteration|quick(?:ly)?\s+iterat\w*|one[\s-]step",
            ),
            words=(r"(?<![a-z_])grpo(?![a-z_])",),
        ),
    )
