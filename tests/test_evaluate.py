"""``stages/evaluate.py``: each held-out answer of ``OUT/eval/<name>.json`` keeps its outcome on every rate, and
each rate is the mean of those outcomes, so two models can be compared prompt by prompt (``core/stats.py``)."""

from __future__ import annotations

import json

from ark_trainer.core.metrics import OUTCOMES, RATES
from ark_trainer.stages.registry import config_class
from tests.conftest import tiny_qc_assets


def test_each_answer_keeps_its_outcomes_and_the_rates_are_their_means(tmp_path):
    from ark_trainer.core.models.device import Runtime
    from ark_trainer.data.loader import load_jsonl
    from ark_trainer.rewards.builder import build_reward
    from ark_trainer.stages.evaluate import evaluate_model

    assets = tiny_qc_assets(tmp_path)
    rows = load_jsonl(assets["train"])[:6]
    reward = build_reward(config_class()(), rows, "cpu")
    base = [1.0, 0.0, 0.5, 0.0, 1.0, 0.0]  # a base model's rewards to prefer against
    out = tmp_path / "eval.json"
    settings = {"max_new_tokens": 6, "pass_threshold": 0.5, "base_totals": base}
    result = evaluate_model(
        assets["model"], "rft", rows, reward, Runtime("cpu", False, False, []), out, **settings
    )
    answers = json.loads(out.read_text(encoding="utf-8"))["answers"]
    assert len(answers) == 6 and all(set(a[OUTCOMES]) == set(RATES) for a in answers)
    for rate in RATES:
        column = [a[OUTCOMES][rate] for a in answers if a[OUTCOMES][rate] is not None]
        assert result[rate] == (round(sum(column) / len(column), 4) if column else None), rate
    assert [a[OUTCOMES]["pass_rate"] for a in answers] == [float(a["reward"] >= 0.5) for a in answers]
