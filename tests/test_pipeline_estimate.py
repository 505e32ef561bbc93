"""The run's estimate in the pipeline: measured, said, recorded in plan.json, fitted to --time_budget; the
measurement itself on a tiny model; ``status`` shows the time left from it."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import yaml

from ark_trainer.base.fileio import read_json
from ark_trainer.core.auto_defaults import ModelFacts
from ark_trainer.core.config import resolve_config
from ark_trainer.core.runtime.estimate import Timings
from ark_trainer.stages.registry import config_class

T = Timings(prefill_s=1.0, decode_step_s=0.1, batch=8, micro_step_s=5.0, precision="fp32", prompt_tokens=100,
            completion_tokens=60)  # fmt: skip


def _prepared(a: dict, out: Path, *extra: str):
    from ark_trainer.services.pipeline import write_run_files
    from ark_trainer.services.planning import prepare

    flags = {
        "model_path": str(a["model"]),
        "data_path": str(a["train"]),
        "output_dir": str(out),
        "device": "cpu",
    }
    flags.update(zip(extra[::2], extra[1::2], strict=True))
    p = prepare(resolve_config(config_class(), flags))
    write_run_files(p)
    return p


def _as_real_model(monkeypatch) -> None:
    """The tiny test model taken for a real one (the estimate skips toys), measured as ``T``."""
    import ark_trainer.core.auto_defaults as auto_defaults
    import ark_trainer.stages.estimate as est

    monkeypatch.setattr(
        auto_defaults, "model_facts", lambda path: ModelFacts(135_000_000, False, "a real model")
    )
    monkeypatch.setattr(est, "measured", lambda run, rt, model_path, rows: T)


def test_a_toy_run_measures_nothing(assets, tmp_path, caplog, monkeypatch):
    import ark_trainer.stages.estimate as est
    from ark_trainer.services.pipeline import _estimate

    monkeypatch.setattr(est, "measured", lambda *a: (_ for _ in ()).throw(AssertionError("measured a toy")))
    p = _prepared(assets, tmp_path / "out", "max_train_steps", "4", "time_budget", "1")
    with caplog.at_level(logging.INFO, logger="ark_trainer"):
        _estimate(p)
    assert "estimate" not in read_json(p.out / "plan.json")
    assert "--time_budget: not applied to a toy model" in caplog.text


def test_the_estimate_is_said_and_recorded(assets, tmp_path, caplog, monkeypatch):
    from ark_trainer.services.pipeline import _estimate

    p = _prepared(assets, tmp_path / "out", "max_train_steps", "4")
    _as_real_model(monkeypatch)
    with caplog.at_level(logging.INFO, logger="ark_trainer"):
        _estimate(p)
    record = read_json(p.out / "plan.json")["estimate"]
    assert record["timings"]["micro_step_s"] == 5.0 and record["total_seconds"] > 0
    assert [part["stage"] for part in record["parts"]][:2] == ["eval_base", "eval_base_dev"]
    assert "expected time on this machine" in caplog.text and "whole run:" in caplog.text
    assert yaml.safe_load((p.out / "run.yaml").read_text())["max_train_steps"] == 4  # explicit: kept


def test_a_time_budget_scales_the_default_steps_into_run_yaml_and_plan_json(
    assets, tmp_path, caplog, monkeypatch
):
    from ark_trainer.services.pipeline import _estimate

    p = _prepared(assets, tmp_path / "out", "time_budget", "5")  # --max_train_steps left at 1000
    _as_real_model(monkeypatch)
    with caplog.at_level(logging.INFO, logger="ark_trainer"):
        _estimate(p)
    saved = yaml.safe_load((p.out / "run.yaml").read_text())
    plan = read_json(p.out / "plan.json")
    assert saved["max_train_steps"] < 1000 and saved["rft_steps"] is not None
    assert sum(s["steps"] for s in plan["stages"]) == saved["max_train_steps"] == p.run.max_train_steps
    assert plan["estimate"]["total_seconds"] <= 5 * 60
    assert "scaled down to fit" in plan["estimate"]["budget"] and "scaled down to fit" in caplog.text
    assert "sized to --time_budget" in plan["auto_defaults"]["max_train_steps"]["reason"]


def test_the_same_command_line_continues_a_run_whose_steps_the_budget_sized(
    assets, tmp_path, monkeypatch, capsys
):
    from ark_trainer.services.pipeline import _estimate
    from ark_trainer.stages.registry import stages
    from tests.conftest import refused, resume_check

    out = tmp_path / "out"
    p = _prepared(assets, out, "time_budget", "5")
    _as_real_model(monkeypatch)
    _estimate(p)
    (out / "events.jsonl").write_text(
        json.dumps({"event": "stage_end", "stage": "eval_base", "status": "ok"}) + "\n"
    )
    flags = {"model_path": str(assets["model"]), "data_path": str(assets["train"]), "output_dir": str(out),
             "device": "cpu", "time_budget": "5"}  # fmt: skip
    assert resume_check(
        resolve_config(config_class(), flags), out, list(stages().values())
    )  # continued, not refused
    capsys.readouterr()  # the estimate's own lines (a console handler an earlier test left may print them)
    lines = refused(capsys, ["train", *(f"--{k}={v}" for k, v in {**flags, "time_budget": "9"}.items())])
    assert any("already holds a run" in line for line in lines)  # another budget: another run, refused


def test_explicit_steps_over_the_budget_are_kept_with_a_warning(assets, tmp_path, caplog, monkeypatch):
    from ark_trainer.services.pipeline import _estimate

    p = _prepared(assets, tmp_path / "out", "max_train_steps", "300", "time_budget", "1")
    _as_real_model(monkeypatch)
    with caplog.at_level(logging.INFO, logger="ark_trainer"):
        _estimate(p)
    assert p.run.max_train_steps == 300
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "set explicitly" in warned[0].getMessage()


def test_measure_on_a_tiny_model(assets):
    from ark_trainer.core.models.device import resolve_runtime
    from ark_trainer.core.runtime.measure import measure

    rt = resolve_runtime(resolve_config(config_class(), {"model_path": str(assets["model"]), "device": "cpu", "data_path": "d",
                                         "output_dir": "o"}))  # fmt: skip
    prompts = [[{"role": "user", "content": f"客服：您好 {i}。"}] for i in range(3)]
    t = measure(str(assets["model"]), rt, prompts, tokens=12, batch_size=2)
    assert t.batch == 8 and t.completion_tokens == 12 and t.prompt_tokens > 0  # 3 prompts, repeated to 8
    assert min(t.prefill_s, t.decode_step_s, t.micro_step_s) >= 0 and t.precision


def test_status_and_the_dashboard_show_the_time_left(tmp_path, capsys, monkeypatch):
    import os
    import time

    from ark_trainer.cli import main

    (tmp_path / "plan.json").write_text(
        json.dumps(
            {"estimate": {"parts": [{"stage": "eval_base", "seconds": 60}, {"stage": "rft", "seconds": 600}]}}
        )
    )
    (tmp_path / "events.jsonl").write_text(
        json.dumps({"event": "stage_end", "stage": "eval_base", "status": "ok"}) + "\n"
    )
    from ark_trainer.core.runtime.system import process_start

    beat = {"state": "running", "stage": "rft", "step": 0, "total": 10, "pid": os.getpid(), "updated_ts": time.time(),
            "interval": 5, "stage_elapsed_seconds": 120, "pid_started": process_start(os.getpid())}  # fmt: skip
    (tmp_path / "heartbeat.json").write_text(json.dumps(beat))
    assert main(["status", str(tmp_path)]) == 0
    assert "expected time left for the whole run: about 8 min" in capsys.readouterr().out
    from ark_trainer.services.dashboard.payload import run_summary

    assert run_summary("k", tmp_path)["run_left_seconds"] == 480  # the dashboard's head line shows it too


def test_evaluations_decode_what_the_answers_need_and_the_estimate_counts_that(
    assets, tmp_path, caplog, monkeypatch
):
    """A budget of 160 for answers of a few tokens: every evaluation (and its estimate) stops at what the
    answers need; a resumed attempt keeps the first attempt's choice."""
    import ark_trainer.stages.evaluate as evaluate
    from ark_trainer.core.runtime.monitor import Monitor
    from ark_trainer.services.pipeline import _estimate, _Evaluator

    _as_real_model(monkeypatch)
    p = _prepared(assets, tmp_path / "out", "max_train_steps", "4", "max_completion_length", "160")
    chosen = read_json(p.out / "plan.json")["eval_length"]
    assert chosen["value"] == p.eval_tokens and 16 <= p.eval_tokens < 64
    assert "not at --max_completion_length 160" in chosen["reason"]
    with caplog.at_level(logging.INFO, logger="ark_trainer"):
        _estimate(p)
    parts = {part["stage"]: part for part in read_json(p.out / "plan.json")["estimate"]["parts"]}
    assert parts["eval_base"]["what"].endswith(f"× {p.eval_tokens} tokens")
    assert "× 160 tokens" in parts["rft_sampling"]["what"]
    asked: list[int] = []

    def fake_eval(model_path, name, rows, reward, rt, path, max_new_tokens, **kw):
        asked.append(max_new_tokens)
        return {"answers": [{"reward": 0.0}] * len(rows), **dict.fromkeys(("reward_mean", "pass_rate",
                "task_accuracy", "compliance_rate", "preference_alignment"), 0.0)}  # fmt: skip

    monkeypatch.setattr(evaluate, "evaluate_model", fake_eval)
    _Evaluator(p, p.rt, Monitor(p.out)).run("base", p.model_path)
    assert asked and set(asked) == {p.eval_tokens}
    again = _prepared(assets, tmp_path / "out", "max_train_steps", "4", "max_completion_length", "160",
                      "resume", "True")  # fmt: skip
    assert again.plan_extra["eval_length"] == chosen
