"""The run's plan (``stages/plan.py``): resolved once from the validated config, then frozen; ``plan.json`` round-trips."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ark_trainer.core.config import TrainConfig, validate
from ark_trainer.stages.plan import Plan, PlanStage, ProbeChoice, resolve_plan
from ark_trainer.stages.registry import config_class


def cfg_of(**values) -> TrainConfig:
    cfg = config_class()(model_path="m", data_path="d.jsonl", output_dir="o", **values)
    validate(cfg)
    return cfg


def test_the_plan_resolves_steps_and_learning_rates_without_writing_the_config():
    cfg = cfg_of(max_train_steps=10, rft_learning_rate=1e-4, grpo_learning_rate=2e-6)
    before = dataclasses.asdict(cfg)
    plan = resolve_plan(cfg)
    assert plan.stages == (PlanStage("rft", 3, 1e-4, False), PlanStage("grpo", 7, 2e-6, True))
    assert dataclasses.asdict(cfg) == before and cfg.rft_steps is None  # nothing written to the config
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.strategy = "GRPO"  # type: ignore[misc]


def test_only_grpo_and_all_steps_in_the_first_stage():
    assert resolve_plan(cfg_of(strategy="Only GRPO", max_train_steps=9)).stages == (
        PlanStage("grpo", 9, 1e-6, True),
    )
    plan = resolve_plan(cfg_of(max_train_steps=4, rft_steps=4))  # GRPO gets 0 steps: RFT's model is final
    assert [(s.name, s.steps, s.last) for s in plan.stages] == [("rft", 4, True), ("grpo", 0, False)]


def test_auto_is_pending_until_the_probe_chooses():
    cfg = cfg_of(strategy="auto", max_train_steps=9, rft_steps=0)
    pending = resolve_plan(cfg)
    assert pending.pending and [s.steps for s in pending.stages] == [3, 6]
    chosen = resolve_plan(cfg, ProbeChoice("RFT+GRPO", "weak base", {"pass_rate": 0.1}))
    assert not chosen.pending and chosen.requested == "auto" and chosen.probe == {"pass_rate": 0.1}
    assert [s.steps for s in chosen.stages] == [3, 6]  # auto chose RFT, so RFT trains (0 means "not given")
    strong = resolve_plan(cfg, ProbeChoice("GRPO", "strong base", {}))
    assert [(s.name, s.steps) for s in strong.stages] == [("grpo", 9)]


def test_plan_json_holds_the_stages_and_round_trips():
    cfg = cfg_of(max_train_steps=6, rft_steps=2)
    data = resolve_plan(cfg).to_json()
    assert list(data) == ["strategy", "requested", "reason", "task_name", "stages"]
    assert [(s["name"], s["steps"]) for s in data["stages"]] == [("rft", 2), ("grpo", 4)]
    assert Plan.from_json(json.loads(json.dumps(data)), cfg) == resolve_plan(cfg)
