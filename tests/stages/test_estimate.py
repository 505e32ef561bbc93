"""The run's estimate from its plan (``stages/estimate.py``) and ``--time_budget``, on made-up timings."""

from __future__ import annotations

import pytest

from ark_trainer.core.config import TrainConfig, validate
from ark_trainer.core.runtime.estimate import Timings, total_seconds
from ark_trainer.services.planning import stage_options_of
from ark_trainer.stages.estimate import (
    RunSize,
    fit,
    follower,
    regrown_choices,
    run_parts,
    run_size,
    scalable_stages,
    stage_notes,
)
from ark_trainer.stages.plan import resolve_plan
from ark_trainer.stages.registry import config_class

T = Timings(prefill_s=1.0, decode_step_s=0.1, batch=8, micro_step_s=5.0, precision="fp32", prompt_tokens=100,
            completion_tokens=60)  # fmt: skip
SIZE = RunSize(train=200, dev=20, test=20)


def cfg_of(**values) -> TrainConfig:
    values = {"max_completion_length": 60, **values}
    cfg = config_class()(model_path="m", data_path="d.jsonl", output_dir="o", **values)
    validate(cfg)
    return cfg


def handed(cfg: TrainConfig) -> tuple:
    """What the estimate is handed of a run: its shared flags and each stage's own options."""
    return cfg.run_flags(), stage_options_of(cfg)


def grpo_eval_line(cfg: TrainConfig, plan, t, size, automatic: bool) -> str:
    """The GRPO stage's note with the estimate (its ``estimate_notes`` hook), or ""."""
    lines = stage_notes(*handed(cfg), plan, t, size, {"grpo_eval_steps"} if automatic else set())
    return "\n".join(lines)


def test_every_part_of_an_rft_grpo_run_in_order():
    cfg = cfg_of(max_train_steps=9, grpo_eval_steps=3, grpo_prompts_per_step=4)
    names = [p.name for p in run_parts(*handed(cfg), resolve_plan(cfg), T, SIZE)]
    assert names == [
        "eval_base", "eval_base_dev", "rft_sampling", "rft", "eval_rft", "eval_rft_dev", "grpo", "eval_grpo",
        "eval_grpo_dev",
    ]  # fmt: skip
    assert [p.name for p in run_parts(*handed(cfg_of(max_train_steps=9, eval_auto=False)), resolve_plan(cfg), T, SIZE)] == [
        "rft_sampling", "rft", "grpo",
    ]  # fmt: skip


def test_grpo_part_follows_its_flags():
    def grpo_seconds(**flags) -> float:
        cfg = cfg_of(strategy="GRPO", max_train_steps=8, **flags)
        return next(
            p.seconds for p in run_parts(*handed(cfg), resolve_plan(cfg), T, SIZE) if p.name == "grpo"
        )

    base = grpo_seconds(grpo_eval_steps=0, grpo_prompts_per_step=2)
    assert grpo_seconds(grpo_eval_steps=4, grpo_prompts_per_step=2) > base  # its dev evaluations cost
    assert grpo_seconds(grpo_eval_steps=0, grpo_prompts_per_step=8) > base  # more groups a step
    assert grpo_seconds(grpo_eval_steps=0, grpo_prompts_per_step=2, grpo_max_completion_length=16) < base


def test_probe_and_preference_sampling():
    cfg = cfg_of(strategy="auto", max_train_steps=9)
    assert run_parts(*handed(cfg), resolve_plan(cfg), T, SIZE)[0].name == "probe"
    dpo = cfg_of(strategy="DPO", max_train_steps=4)
    assert "dpo_sampling" in [p.name for p in run_parts(*handed(dpo), resolve_plan(dpo), T, SIZE)]
    given = RunSize(200, 20, 20, given_preferences=True)
    assert "dpo_sampling" not in [p.name for p in run_parts(*handed(dpo), resolve_plan(dpo), T, given)]
    rows = [{"prompt": [{"role": "user", "content": "q"}], "chosen": "a", "rejected": "b"}]
    assert run_size(rows, [], [], ["dpo"]).given_preferences
    assert not run_size(rows, [], [], ["rft", "grpo"]).given_preferences


def test_steps_left_at_their_defaults_are_scalable():
    cfg = cfg_of()
    assert scalable_stages(*handed(cfg), resolve_plan(cfg)) == {"rft", "grpo"}
    explicit_rft = cfg_of(rft_steps=50)
    assert scalable_stages(*handed(explicit_rft), resolve_plan(explicit_rft)) == {"grpo"}
    explicit_total = cfg_of(max_train_steps=40)
    assert scalable_stages(*handed(explicit_total), resolve_plan(explicit_total)) == set()


def test_a_budget_scales_the_automatic_steps_and_says_what():
    cfg = cfg_of(grpo_eval_steps=0)
    plan = resolve_plan(cfg)
    expected = total_seconds(run_parts(*handed(cfg), plan, T, SIZE))
    assert (
        fit(*handed(cfg), plan, T, SIZE, budget_s=expected + 1).flags == {}
    )  # fits: nothing changed, nothing said
    budget = expected / 4
    fitted = fit(*handed(cfg), plan, T, SIZE, budget_s=budget)
    assert set(fitted.flags) == {"max_train_steps", "rft_steps"}
    assert fitted.flags["max_train_steps"] == fitted.steps["rft"] + fitted.steps["grpo"] < 1000
    assert total_seconds(run_parts(*handed(cfg), plan, T, SIZE, fitted.steps)) <= budget
    assert (
        "scaled down" in fitted.message and "rft 333 →" in fitted.message and "grpo 667 →" in fitted.message
    )
    scaled = cfg_of(grpo_eval_steps=0, **fitted.flags)
    assert (
        total_seconds(run_parts(*handed(scaled), resolve_plan(scaled), T, SIZE)) <= budget
    )  # the plan it becomes


def test_explicit_steps_over_the_budget_get_one_line():
    cfg = cfg_of(max_train_steps=500)
    fitted = fit(*handed(cfg), resolve_plan(cfg), T, SIZE, budget_s=60)
    assert fitted.flags == {} and fitted.steps == {}
    assert (
        "\n" not in fitted.message
        and "set explicitly" in fitted.message
        and "expected to take" in fitted.message
    )


def test_a_budget_that_even_one_step_cannot_meet_says_so():
    cfg = cfg_of()
    fitted = fit(*handed(cfg), resolve_plan(cfg), T, SIZE, budget_s=1)  # the evaluations alone take longer
    assert fitted.steps == {"rft": 1, "grpo": 1} and "still over the budget" in fitted.message


def test_grpo_eval_steps_chosen_again_for_the_scaled_steps(tmp_path):
    auto = {"grpo_eval_steps": {"value": 167, "reason": "167: 4 held-out evaluations ..."}}
    extra = {"auto_defaults": auto}
    cfg = cfg_of(grpo_eval_steps=167)
    run, options = handed(cfg)
    follow = follower(run, extra, str(tmp_path))  # an empty folder: a model of unknown size, not a toy
    assert follow is not None
    grpo = options["grpo"]
    assert follow("grpo", grpo, 20) == {"grpo_eval_steps": 5}  # four evaluations
    assert follow("grpo", grpo, 4) == {"grpo_eval_steps": 0}  # none in a short stage
    assert follow("rft", options["rft"], 20) == {}  # a stage without automatic flags that follow its steps
    chosen = regrown_choices(
        options, extra, {"max_train_steps": 30, "rft_steps": 10}, {"rft": 10, "grpo": 20}, follow
    )
    assert chosen["grpo_eval_steps"] == 5  # 20 GRPO steps, four evaluations
    assert auto["max_train_steps"]["value"] == 30 and "--time_budget" in auto["grpo_eval_steps"]["reason"]
    assert auto["grpo_eval_steps"]["reason"] == "5: for the GRPO steps sized to --time_budget"
    explicit = follower(run, {"auto_defaults": {"lora_r": {}}}, str(tmp_path))  # --grpo_eval_steps given
    assert explicit is not None and explicit("grpo", grpo, 20) == {}
    assert follower(run, {"auto_defaults": {}}, str(tmp_path)) is None  # nothing chosen automatically
    untouched = regrown_choices(options, {}, {"max_train_steps": 30}, {"rft": 10, "grpo": 20}, None)
    assert untouched == {"max_train_steps": 30}


def test_the_fit_counts_the_evaluations_an_automatic_eval_interval_adds():
    cfg = cfg_of(grpo_eval_steps=0)
    plan = resolve_plan(cfg)

    def follow(name, options, steps):  # a made-up automatic interval for GRPO
        return {"grpo_eval_steps": max(steps // 4, 1)} if name == "grpo" else {}

    budget = total_seconds(run_parts(*handed(cfg), plan, T, SIZE)) / 4
    fitted = fit(*handed(cfg), plan, T, SIZE, budget, follow)
    assert total_seconds(run_parts(*handed(cfg), plan, T, SIZE, fitted.steps, follow)) <= budget
    assert fitted.steps != fit(*handed(cfg), plan, T, SIZE, budget).steps  # the evaluations left fewer steps


@pytest.mark.parametrize("strategy", ["KTO", "RLOO", "RFT+DPO"])
def test_other_strategies_are_estimated(strategy):
    cfg = cfg_of(strategy=strategy, max_train_steps=6)
    parts = run_parts(*handed(cfg), resolve_plan(cfg), T, SIZE)
    assert total_seconds(parts) > 0 and all(p.seconds >= 0 for p in parts)


def test_evaluations_are_counted_at_the_evaluation_length():
    cfg = cfg_of(strategy="RFT+GRPO", max_train_steps=4, max_completion_length=512)
    plan = resolve_plan(cfg)

    def eval_seconds(size: RunSize) -> float:
        return sum(p.seconds for p in run_parts(*handed(cfg), plan, T, size) if p.name.startswith("eval_"))

    whole, short = eval_seconds(SIZE), eval_seconds(RunSize(200, 20, 20, eval_tokens=16))
    assert short < whole / 10  # 16 tokens a prompt, not 512
    base = next(
        p
        for p in run_parts(*handed(cfg), plan, T, RunSize(200, 20, 20, eval_tokens=16))
        if p.name == "eval_base"
    )
    assert base.what == "20 prompts × 16 tokens"
    rft = next(
        p
        for p in run_parts(*handed(cfg), plan, T, RunSize(200, 20, 20, eval_tokens=16))
        if p.name == "rft_sampling"
    )
    assert "× 512 tokens" in rft.what  # sampling keeps the run's completion length


def test_evaluation_during_grpo_is_priced_with_how_to_skip_it():
    cfg = cfg_of(strategy="GRPO", max_train_steps=8, grpo_eval_steps=2, grpo_max_completion_length=32)
    plan = resolve_plan(cfg)
    line = grpo_eval_line(cfg, plan, T, SIZE, automatic=True)
    # 5 evaluations (step 0, 2, 4, 6, 8) of 20 dev prompts: 3 batches × (1 s + 32 × 0.1 s) each = 63 s
    assert line.startswith(
        "evaluation during GRPO (--grpo_eval_steps 2, chosen automatically): 5 evaluations"
    )
    assert "20 dev prompts × 32 tokens, about 63 s" in line and "--grpo_eval_steps 0 skips them" in line
    grpo = next(p for p in run_parts(*handed(cfg), plan, T, SIZE) if p.name == "grpo")
    assert "5 dev evaluations of 20 prompts × 32 tokens, 63 s" in grpo.what
    assert "as given" in grpo_eval_line(cfg, plan, T, SIZE, automatic=False)
    off = cfg_of(strategy="GRPO", max_train_steps=8, grpo_eval_steps=0)
    assert grpo_eval_line(off, resolve_plan(off), T, SIZE, automatic=True) == ""
    rft = cfg_of(strategy="RFT+DPO", max_train_steps=8, grpo_eval_steps=2)
    assert grpo_eval_line(rft, resolve_plan(rft), T, SIZE, automatic=True) == ""
