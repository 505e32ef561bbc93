"""The evaluation's answer cache (``stages/evaluate.py``): a model evaluated before answers the prompts it has seen
from the cache, generating only the new ones; another model (a new fingerprint) generates them all."""

from __future__ import annotations

import os
import time

from ark_trainer.stages.registry import config_class
from tests.conftest import save_tiny_qwen


def test_a_model_evaluated_again_generates_only_its_new_prompts(tmp_path, monkeypatch):
    from ark_trainer.core.models.device import resolve_runtime
    from ark_trainer.rewards.builder import build_reward
    from ark_trainer.stages import evaluate

    model = save_tiny_qwen(tmp_path / "model")
    rows = [{"prompt": [{"role": "user", "content": f"hello {i}"}], "reference": "x"} for i in range(4)]
    reward = build_reward({}, rows, "cpu")
    rt = resolve_runtime(config_class()(data_path="d", device="cpu"))
    asked: list[int] = []
    real = evaluate.generate

    def counted(model, tok, prompts, **kw):
        asked.append(len(prompts))
        return real(model, tok, prompts, **kw)

    monkeypatch.setattr(evaluate, "generate", counted)
    kw = {"max_new_tokens": 6, "pass_threshold": 0.8, "answer_cache": tmp_path / "cache"}
    first = evaluate.evaluate_model(model, "base", rows[:3], reward, rt, tmp_path / "a.json", **kw)
    again = evaluate.evaluate_model(model, "base", rows, reward, rt, tmp_path / "b.json", **kw)
    assert asked == [3, 1]  # the three it had answered came from the cache
    assert [a["completion"] for a in again["answers"][:3]] == [a["completion"] for a in first["answers"]]
    weights = next(model.glob("*.safetensors"))
    os.utime(weights, ns=(time.time_ns(), time.time_ns() + 10**9))  # a new model in the same folder
    evaluate.evaluate_model(model, "rft", rows, reward, rt, tmp_path / "c.json", **kw)
    assert asked == [3, 1, 4]
    evaluate.evaluate_model(
        model, "rft", rows, reward, rt, tmp_path / "d.json", **{**kw, "answer_cache": None}
    )
    assert asked == [3, 1, 4, 4]  # no cache: every prompt generated


def test_a_models_fingerprint_ignores_the_notes_train_adds_after_evaluating_it(tmp_path):
    from ark_trainer.services.deploy.policy import PromptShape, write_shape
    from ark_trainer.stages.evaluate import model_fingerprint

    model = save_tiny_qwen(tmp_path / "model")
    before = model_fingerprint(model)
    write_shape(model, PromptShape("bare", None, "test", 64))  # train records the shape after evaluating
    assert model_fingerprint(model) == before and model_fingerprint(tmp_path / "missing") is None
