"""The GRPO stage's own settings, chosen from the model, the data and the reward (``core/auto_defaults.py``):
the reward it is scored by, what it samples, how many prompts a step holds, and their order."""

from __future__ import annotations

import pytest

from ark_trainer.base.errors import UserError
from ark_trainer.base.run_options import RunOptions, RunOptionsAfterStages
from ark_trainer.core import auto_defaults as ad
from ark_trainer.core.auto_defaults import ModelFacts
from ark_trainer.rewards.composite import CompositeReward
from ark_trainer.rewards.qc import qc_decision_text
from ark_trainer.stages.common import warmup_steps
from ark_trainer.stages.grpo import auto as grpo_auto
from ark_trainer.stages.grpo.auto import grpo_accumulation, parse_grpo_weights, resolve_grpo_defaults
from ark_trainer.stages.grpo.options import GRPOOptions
from ark_trainer.stages.grpo.stage import label_balanced
from ark_trainer.stages.registry import config_class

REAL = ModelFacts(135_000_000, False, "a real model")
TOY = ModelFacts(200_000, True, "a toy model")
TYPES = ("辱骂", "泄露隐私", "违规承诺", "未致歉", "推诿", "无")


class CharTokenizer:
    """One token per character: lengths a test can count."""

    def __call__(self, texts, add_special_tokens=False):
        return {"input_ids": [list(t) for t in texts]}


def _rows(n=60):
    rows = []
    for i in range(n):
        label = TYPES[i % len(TYPES)]
        verdict = "合规" if label == "无" else "违规"
        reply = "非常抱歉给您带来不便，我们马上为您核实处理，请您放心。" * 2
        rows.append(
            {
                "question": f"对话{i}",
                "label": label,
                "candidates": [f"结论：{verdict}\n类型：{label}\n回复：{reply}"],
            }
        )
    return rows


@pytest.fixture(scope="module")
def qc_reward():
    return CompositeReward.from_spec(None)  # the QC preset


def _cfg(**flags):
    return config_class()(model_path="m", data_path="d", output_dir="o", max_completion_length=96, **flags)


def _options(cfg):
    """What GRPO's defaults read of a config: the shared run flags and GRPO's options."""
    return cfg.options(RunOptions), cfg.options(RunOptionsAfterStages), cfg.options(GRPOOptions)


def test_the_qc_decision_is_the_verdict_and_type_lines():
    assert qc_decision_text("结论：违规\n类型：推诿\n回复：抱歉") == "结论：违规\n类型：推诿"
    assert (
        qc_decision_text("Verdict: violation\nType: deflection\nReply: sorry")
        == "Verdict: violation\nType: deflection"
    )
    assert qc_decision_text("结论：合规\n回复：好的") == "结论：合规"
    assert qc_decision_text("我不知道") is None


def test_a_real_model_on_labelled_qc_data_trains_grpo_on_the_exact_type_and_samples_only_the_decision(
    qc_reward,
):
    chosen = resolve_grpo_defaults(*_options(_cfg()), CharTokenizer(), _rows(), qc_reward.components, REAL)
    weights = chosen["grpo_reward_weights"].value
    assert parse_grpo_weights(weights, qc_reward.components) == {
        "qc_verdict": 0,
        "qc_compliance": 0,
        "qc_satisfaction": 0,
        "qc_format": 0,
        "qc_type": 1,
    }
    assert "qc_type" in chosen["grpo_reward_weights"].reason
    longest = max(len(qc_decision_text(r["candidates"][0]) or "") for r in _rows())
    length = chosen["grpo_max_completion_length"].value
    assert longest <= length < 96 and length % 8 == 0  # qc_type reads the decision lines only
    assert "decision" in chosen["grpo_max_completion_length"].reason
    assert (
        chosen["grpo_max_completion_length"].basis == grpo_auto.DECISION_BASIS
    )  # plan.json says so (the diagnosis reads it)
    assert ad.describe(chosen, REAL)["grpo_max_completion_length"]["basis"] == grpo_auto.DECISION_BASIS
    assert chosen["grpo_prompts_per_step"].value == len(TYPES)  # one per label, within 4..16
    assert "label" in chosen["grpo_prompts_per_step"].reason
    verdict = _cfg(grpo_reward_weights="qc_verdict=1,qc_compliance=0,qc_satisfaction=0,qc_format=0")
    decision = resolve_grpo_defaults(*_options(verdict), CharTokenizer(), _rows(), qc_reward.components, REAL)
    assert "grpo_reward_weights" not in decision and decision["grpo_max_completion_length"].value == length


@pytest.mark.parametrize(
    ("flags", "facts", "rows", "why"),
    [
        ({}, TOY, None, "toy"),  # a decision-only reward cost the toy's reply compliance
        ({"reward_weights": "qc_compliance=1"}, REAL, None, "--reward_weights"),  # the user's priorities
        ({}, REAL, "unlabelled", "graders and weights"),  # nothing for the indicator to grade
    ],
)
def test_grpo_keeps_the_run_weights_for_a_toy_given_weights_or_unlabelled_data(
    qc_reward, flags, facts, rows, why
):
    data = [{k: v for k, v in r.items() if k != "label"} for r in _rows()] if rows else _rows()
    chosen = resolve_grpo_defaults(
        *_options(_cfg(**flags)), CharTokenizer(), data, qc_reward.components, facts
    )
    assert (
        chosen["grpo_reward_weights"].value == grpo_auto.RUN_WEIGHTS
        and why in chosen["grpo_reward_weights"].reason
    )
    assert chosen["grpo_max_completion_length"].value == 96  # the run's graders read the reply too


def test_a_toy_keeps_one_batch_a_step_and_the_run_weights_stay_where_grpo_cannot_tell_the_decision(qc_reward):
    toy = resolve_grpo_defaults(
        *_options(_cfg(batch_size=32, num_generations=8)), CharTokenizer(), _rows(), qc_reward.components, TOY
    )
    assert toy["grpo_prompts_per_step"].value == 4 and "toy" in toy["grpo_prompts_per_step"].reason
    own = resolve_grpo_defaults(
        *_options(_cfg(reward_config="r.yaml")), CharTokenizer(), _rows(), qc_reward.components, REAL
    )
    assert own["grpo_reward_weights"].value == grpo_auto.RUN_WEIGHTS
    assert own["grpo_max_completion_length"].value == 96  # the run's graders read the whole answer
    unlabelled = [{k: v for k, v in r.items() if k != "label"} for r in _rows()]
    assert (
        resolve_grpo_defaults(*_options(_cfg()), CharTokenizer(), unlabelled, qc_reward.components, REAL)[
            "grpo_prompts_per_step"
        ].value
        == grpo_auto.GRPO_PROMPTS_FALLBACK
    )


def test_an_episode_run_samples_whole_episodes_on_the_run_reward(qc_reward):
    cfg = _cfg(env="pkg.mod:make_env", max_turns=4, max_tool_output=500)
    chosen = resolve_grpo_defaults(*_options(cfg), CharTokenizer(), _rows(), qc_reward.components, REAL)
    assert chosen["grpo_reward_weights"].value == grpo_auto.RUN_WEIGHTS
    assert chosen["grpo_max_completion_length"].value == 4 * 96 + 3 * 500
    assert "tool results" in chosen["grpo_max_completion_length"].reason


def test_flags_the_user_sets_are_kept(qc_reward):
    cfg = _cfg(grpo_reward_weights="run", grpo_max_completion_length=50, grpo_prompts_per_step=3)
    assert resolve_grpo_defaults(*_options(cfg), CharTokenizer(), _rows(), qc_reward.components, REAL) == {}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("qc_verdcit=1", "unknown reward 'qc_verdcit'"),
        ("qc_verdict=0,qc_compliance=0,qc_satisfaction=0,qc_format=0", "at least one reward"),
        ("qc_verdict", "expected name=weight"),
        ("qc_verdict=-1", "expected name=weight"),
    ],
)
def test_bad_grpo_weights_are_one_line_naming_the_flag(qc_reward, spec, message):
    with pytest.raises(UserError, match=message) as err:
        parse_grpo_weights(spec, qc_reward.components)
    assert str(err.value).startswith("--grpo_reward_weights")


def test_the_grpo_reward_keeps_the_graders_and_changes_only_the_weights(qc_reward):
    verdict_only = qc_reward.reweighted(
        parse_grpo_weights("qc_verdict=1,qc_compliance=0,qc_satisfaction=0,qc_format=0", qc_reward.components)
    )
    answer = "结论：违规\n类型：辱骂\n回复：滚"  # right type, rude reply
    assert verdict_only(["p"], [answer], label=["辱骂"]) == [1.0]
    assert qc_reward(["p"], [answer], label=["辱骂"])[0] < 1.0
    assert qc_reward.reweighted({c.name: c.weight for c in qc_reward.components}) is qc_reward


@pytest.mark.parametrize(
    ("batch", "gens", "prompts", "expected"),
    [(8, 4, 7, (4, 8)), (8, 4, 2, (1, 2)), (32, 8, 4, (1, 4)), (6, 4, 3, (2, 3)), (2, 4, 1, (2, 1))],
)
def test_grpo_steps_hold_whole_groups_of_at_least_the_prompts_asked(batch, gens, prompts, expected):
    steps, got = grpo_accumulation(batch, gens, prompts)
    assert (steps, got) == expected and got >= prompts and (batch * steps) % gens == 0


def test_prompts_come_in_the_data_proportions_of_their_labels():
    rows = [r for r in _rows(120) if r["label"] != "辱骂"] + [r for r in _rows(120) if r["label"] == "无"]
    ordered, balanced = label_balanced(rows, seed=0)  # 无: 40 of 120 rows, the four others 20 each
    assert balanced and sorted(map(id, ordered)) == sorted(map(id, rows))
    for start in range(0, 120, 12):  # every window of 12 prompts holds about 4 无 and 2 of each other label
        window = [r["label"] for r in ordered[start : start + 12]]
        assert 3 <= window.count("无") <= 5 and all(
            1 <= window.count(t) <= 3 for t in TYPES if t not in ("无", "辱骂")
        )
    assert label_balanced(rows, seed=0)[0] == ordered and label_balanced(rows, seed=1)[0] != ordered
    same, flag = label_balanced([{"question": "a"}, {"question": "b"}], seed=0)
    assert not flag and [r["question"] for r in same] == ["a", "b"]


REFUND_DESK = (
    "compliant",
    "violation: promised refund",
    "violation: asked for card number",
    "violation: rude",
)


def _reference_rows(n=40, free_text=False):
    return [
        {
            "prompt": [{"role": "user", "content": f"ticket {i}"}],
            "reference": f"the answer to ticket {i}" if free_text else REFUND_DESK[i % len(REFUND_DESK)],
        }
        for i in range(n)
    ]


def test_a_class_valued_reference_is_labels_to_balance():
    """A refund desk's rows carry one of four short answers each: those are labels. GRPO balances its steps
    over them instead of saying the data has no labels to balance."""
    rows = _reference_rows()
    assert grpo_auto.data_labels(rows) == list(REFUND_DESK)
    chosen = grpo_auto.grpo_prompts(*_options(_cfg())[::2], rows, REAL)
    assert chosen.value == 4 and "reference" in chosen.reason and "no labels" not in chosen.reason
    ordered, balanced = label_balanced(rows, seed=0)
    assert balanced
    for start in range(0, 40, 4):  # each step's four prompts: one of each answer
        assert sorted(r["reference"] for r in ordered[start : start + 4]) == sorted(REFUND_DESK)
    free = _reference_rows(free_text=True)  # one answer per row: no classes
    assert grpo_auto.data_labels(free) == [] and not label_balanced(free, seed=0)[1]
    assert "no labels" in grpo_auto.grpo_prompts(*_options(_cfg())[::2], free, REAL).reason


def test_warm_up_rounds_down_so_a_short_stage_does_not_spend_a_step_at_rate_zero():
    assert warmup_steps(0.05, 4) == 0 and warmup_steps(0.05, 140) == 7 and warmup_steps(0.0, 100) == 0


def test_a_real_model_evaluates_four_times_during_a_stage_long_enough_for_it():
    from ark_trainer.stages.grpo.auto import grpo_eval_every

    cfg = _cfg()
    assert (
        grpo_eval_every(cfg, 40, REAL).value == 10
        and "4 held-out evaluations" in grpo_eval_every(cfg, 40, REAL).reason
    )
    assert grpo_eval_every(cfg, 4, REAL).value == 0  # a short stage: the stage's own evaluation decides
    assert (
        grpo_eval_every(cfg, 40, TOY).value == 0
        and grpo_eval_every(_cfg(eval_auto=False), 40, REAL).value == 0
    )
    assert grpo_eval_every(_cfg(env="pkg.mod:make_env"), 40, REAL).value == 0
