"""The estimate's formulas on made-up timings (``core/runtime/estimate.py``): no model, no clock."""

from __future__ import annotations

import json

import pytest

from ark_trainer.core.runtime.estimate import (
    GRPOWork,
    Timings,
    budget_sized,
    duration,
    estimate_lines,
    eval_parts,
    expected_left,
    fit_steps,
    generation_seconds,
    grpo_evaluations,
    grpo_parts,
    preference_parts,
    record,
    remaining_seconds,
    rft_parts,
    rft_prompts,
)

# a batch of 4 sequences: 2 s of prompt pass, 0.5 s a token; a micro-step 10 s over 100 + 50 tokens
T = Timings(prefill_s=2.0, decode_step_s=0.5, batch=4, micro_step_s=10.0, precision="fp32", prompt_tokens=100,
            completion_tokens=50)  # fmt: skip


def test_generation_counts_whole_batches_at_full_length():
    assert generation_seconds(T, 8, 10) == 2 * (2.0 + 10 * 0.5)
    assert generation_seconds(T, 9, 10) == 3 * (2.0 + 10 * 0.5)  # a last partial batch costs a whole one
    assert generation_seconds(T, 0, 10) == 0.0


def test_evaluation_is_test_and_dev():
    parts = eval_parts(T, "rft", dev=4, test=8, tokens=10)
    assert [(p.name, p.seconds) for p in parts] == [("eval_rft", 14.0), ("eval_rft_dev", 7.0)]
    assert [p.name for p in eval_parts(T, "base", dev=0, test=8, tokens=10)] == ["eval_base"]


def test_rft_samples_twice_the_prompts_it_trains_on_within_the_file():
    assert rft_prompts(steps=2, batch=4, accumulation=1, available=100) == 16
    assert rft_prompts(steps=2, batch=4, accumulation=1, available=10) == 10
    sampling, training = rft_parts(T, steps=2, batch=4, accumulation=2, samples=4, available=1000, tokens=10)
    assert sampling.name == "rft_sampling" and sampling.seconds == generation_seconds(T, 32 * 4, 10)
    assert training.name == "rft" and training.seconds == 2 * 2 * 10.0
    no_samples, _ = rft_parts(T, steps=2, batch=4, accumulation=1, samples=0, available=1000, tokens=10)
    assert no_samples.seconds == 0.0


def test_grpo_counts_groups_loss_passes_and_dev_evaluations():
    work = GRPOWork(steps=8, prompts_per_step=2, generations=4, tokens=10, accumulation=2, eval_every=4, dev=4,
                    reference=False)  # fmt: skip
    micro = 10.0 * (100 + 10) / 150  # the loss pass over GRPO's shorter completions
    per_step = generation_seconds(T, 8, 10) + 2 * micro
    evals = grpo_evaluations(8, 4)
    assert evals == 3  # the starting model, step 4, step 8
    (part,) = grpo_parts(T, "grpo", work)
    assert part.seconds == pytest.approx(8 * per_step + evals * generation_seconds(T, 4, 10))
    assert "3 dev evaluations" in part.what
    (with_reference,) = grpo_parts(
        T, "grpo", GRPOWork(**{**work.__dict__, "reference": True, "eval_every": 0})
    )
    assert with_reference.seconds == pytest.approx(
        8 * (generation_seconds(T, 8, 10) + 2 * micro * (1 + 1 / 3))
    )
    assert grpo_evaluations(8, 0) == 0


def test_preference_stages_sample_unless_the_data_has_answers():
    sampled = preference_parts(T, "dpo", steps=3, accumulation=1, sampled_prompts=8, samples=2, tokens=10)
    assert [p.name for p in sampled] == ["dpo_sampling", "dpo"]
    assert sampled[1].seconds == 3 * 2.0 * 10.0  # chosen and rejected: two passes a micro-step
    given = preference_parts(T, "kto", steps=3, accumulation=1, sampled_prompts=0, samples=2, tokens=10)
    assert [p.name for p in given] == ["kto"]


def test_lines_and_record():
    parts = eval_parts(T, "base", dev=4, test=8, tokens=10)
    lines = estimate_lines(parts, T)
    assert "fp32" in lines[0] and lines[-1].startswith("  whole run: 21 s")
    rec = record(parts, T, time_budget_minutes=0)
    assert rec["total_seconds"] == 21.0 and rec["parts"][0] == {"stage": "eval_base", "seconds": 14.0,
                                                              "what": "8 prompts × 10 tokens"}  # fmt: skip
    assert json.loads(json.dumps(rec)) == rec


def test_duration():
    assert duration(42) == "42 s"
    assert duration(7 * 60) == "7 min"
    assert duration(65 * 60) == "1 h 05 min"


def test_remaining_counts_parts_not_finished():
    est = {"parts": [{"stage": "eval_base", "seconds": 100}, {"stage": "rft", "seconds": 300},
                     {"stage": "eval_rft", "seconds": 50}]}  # fmt: skip
    assert remaining_seconds(est, {"eval_base"}, "rft", elapsed=100) == 200 + 50
    assert remaining_seconds(est, {"eval_base"}, "rft", elapsed=100, eta=30) == 30 + 50  # the step ETA wins
    assert remaining_seconds(est, set(), "rft", elapsed=900) == 100 + 0 + 50  # overrun: nothing below zero
    assert remaining_seconds({}, set(), None, 0) is None


def test_expected_left_reads_the_run_folder(tmp_path):
    est = {"parts": [{"stage": "eval_base", "seconds": 100}, {"stage": "rft", "seconds": 300}]}
    (tmp_path / "plan.json").write_text(json.dumps({"estimate": est}))
    (tmp_path / "events.jsonl").write_text(
        json.dumps({"event": "stage_end", "stage": "eval_base", "status": "ok"}) + "\n"
    )
    assert expected_left(tmp_path, {"stage": "rft", "stage_elapsed_seconds": 60}) == 240
    (tmp_path / "plan.json").write_text("{}")
    assert expected_left(tmp_path, {"stage": "rft"}) is None


def _cost(steps: dict[str, int]) -> float:
    """A made-up run: 100 s of evaluations, RFT 10 s a step, GRPO 20 s a step."""
    return 100 + 10 * steps["rft"] + 20 * steps["grpo"]


def test_fit_scales_the_automatic_steps_by_one_factor():
    steps = {"rft": 30, "grpo": 60}  # 1600 s
    assert fit_steps(_cost, steps, {"rft", "grpo"}, budget=2000) == steps  # fits: unchanged
    fitted = fit_steps(_cost, steps, {"rft", "grpo"}, budget=600)
    assert _cost(fitted) <= 600
    assert fitted == {"rft": 10, "grpo": 20}  # a third of each: 600 s exactly
    assert _cost({"rft": 10, "grpo": 21}) > 600  # the next larger common factor does not fit


def test_fit_keeps_explicit_steps_and_a_step_each():
    fitted = fit_steps(_cost, {"rft": 30, "grpo": 60}, {"grpo"}, budget=600)
    assert fitted["rft"] == 30 and _cost(fitted) <= 600
    tiny = fit_steps(_cost, {"rft": 30, "grpo": 60}, {"rft", "grpo"}, budget=50)  # nothing fits
    assert tiny == {"rft": 1, "grpo": 1}
    assert fit_steps(_cost, {"rft": 30, "grpo": 60}, set(), budget=50) == {"rft": 30, "grpo": 60}


def test_a_step_count_the_budget_sized_is_the_same_run_when_left_unset_again():
    before = {"time_budget": 30.0, "max_train_steps": 40, "rft_steps": 13, "seed": 1}
    assert budget_sized("max_train_steps", before, {"time_budget": 30.0, "max_train_steps": 1000})
    assert budget_sized("rft_steps", before, {"time_budget": 30.0, "rft_steps": None})
    assert not budget_sized("max_train_steps", before, {"time_budget": 30.0, "max_train_steps": 50})  # given
    assert not budget_sized("max_train_steps", before, {"time_budget": 20.0, "max_train_steps": 1000})
    assert not budget_sized("seed", before, {"time_budget": 30.0, "seed": 2})
    assert not budget_sized("max_train_steps", {**before, "time_budget": 0.0}, {"time_budget": 0.0})
