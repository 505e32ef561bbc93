"""``ark-trainer diagnose``: each finding code on a run made to show it.

Real tiny runs (the module fixtures below, shared across tests) show the codes a run can be made to show in
seconds on CPU: ``flat_reward`` and ``truncation`` (a constant reward spec, 6-token completions),
``no_learning`` and ``no_improvement`` (a learning rate of 1e-12: the validator refuses 0), ``non_finite``,
``oom``, ``disk_full`` (fault injection, in process) and ``dead`` (``kill_after_step``, a child process).
The others (``stalled``, ``kl_blowup``, ``entropy_collapse``, ``reward_hacking``, ``eval_regression``,
``slow_generation``, and the healthy run) take minutes of real training or a watchdog timeout to show, so
their run folders are written by the test: a real run's folder with its GRPO metrics and evals replaced by
synthetic ones that have the same keys TRL 1.16 logs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ark_trainer.base.fileio import read_jsonl, write_jsonl
from ark_trainer.cli import main
from ark_trainer.stages.diagnose import CODES, diagnose, to_json
from ark_trainer.stages.diagnose.evals import check_same_answers
from ark_trainer.stages.diagnose.rundata import load
from tests.tiny_runs import assets, flags, run_child  # noqa: F401 - the module fixture is reused

CONSTANT_SPEC = "graders:\n  - name: always_one\n    type: regex\n    pattern: '^'\n"


def codes(run_dir: Path, severities=("error", "warning")) -> dict[str, dict]:
    return {f["code"]: f for f in to_json(diagnose(run_dir))["findings"] if f["severity"] in severities}


def with_eval(args: list[str], **changes) -> list[str]:
    """``flags()`` with evaluation on and some flags changed."""
    args = list(args)
    changes.setdefault("eval_auto", "True")
    for key, value in changes.items():
        i = args.index(f"--{key}")
        args[i + 1] = str(value)
    return args


@pytest.fixture(scope="module")
def constant_run(assets, tmp_path_factory) -> Path:  # noqa: F811
    """GRPO with a reward that is 1 for every answer, and completions cut at 6 tokens."""
    root = tmp_path_factory.mktemp("constant")
    spec = root / "rewards.yaml"
    spec.write_text(CONSTANT_SPEC, encoding="utf-8")
    out = root / "run"
    assert main(["train", *flags(assets, out, "GRPO"), "--reward_config", str(spec)]) == 0
    return out


@pytest.fixture(scope="module")
def still_run(assets, tmp_path_factory) -> Path:  # noqa: F811
    """RFT+GRPO with learning rates of 1e-12: the weights do not move; evaluated base, RFT and GRPO."""
    out = tmp_path_factory.mktemp("still") / "run"
    args = with_eval(
        flags(assets, out, "RFT+GRPO", steps=4), rft_learning_rate="1e-12", grpo_learning_rate="1e-12"
    )
    assert (
        main(["train", *args, "--rft_steps", "2", "--max_completion_length", "12", "--openclaw_env", "True"])
        == 0
    )
    return out


def test_every_code_is_documented_in_the_readme():
    readme = (Path(__file__).resolve().parents[2] / "docs" / "long-runs.md").read_text(encoding="utf-8")
    assert [code for code in CODES if f"`{code}`" not in readme] == []


def test_the_openclaw_skill_asks_the_diagnosis():
    import ark_trainer

    skill = Path(ark_trainer.__file__).parent / "services" / "openclaw" / "skill" / "SKILL.md"
    assert "ark-trainer diagnose OUT --json" in skill.read_text(encoding="utf-8")


def test_a_constant_reward_is_flat_and_short_completions_are_truncated(constant_run):
    found = codes(constant_run)
    assert found["flat_reward"]["severity"] == "error" and "100%" in found["flat_reward"]["evidence"]
    assert "always_one" in found["flat_reward"]["evidence"]
    assert "--num_generations" in found["flat_reward"]["fix"]
    assert "--max_completion_length 6" in found["truncation"]["evidence"]
    assert "--max_completion_length from 6 to 12" in found["truncation"]["fix"]
    # TRL's metrics and the run's own generation_time are what the checks read
    grpo = [
        e
        for e in read_jsonl(constant_run / "events.jsonl")
        if e.get("stage") == "grpo" and e["event"] == "metrics"
    ]
    assert all("generation_time" in e and "completions/clipped_ratio" in e for e in grpo)


@pytest.mark.slow
def test_a_learning_rate_of_nearly_zero_is_no_learning_and_no_improvement(still_run, capsys):
    findings = to_json(diagnose(still_run))["findings"]
    still = {f["stage"]: f for f in findings if f["code"] == "no_learning"}
    assert "learning rate never above" in still["rft"]["evidence"]
    assert "--rft_learning_rate from 1e-12" in still["rft"]["fix"]
    assert "--grpo_learning_rate from 1e-12" in still["grpo"]["fix"]
    same = check_same_answers(load(still_run))  # also a no_learning finding, shadowed by the one above
    assert "same greedy answer as rft on 100%" in same[0].evidence
    found = codes(still_run)
    assert "no_improvement" in found and "--deploy_if_not_better True" in found["no_improvement"]["fix"]
    assert main(["diagnose", str(still_run)]) == 1
    out = capsys.readouterr().out
    assert out.index("no_learning") > 0 and "fix: " in out


@pytest.mark.slow
def test_the_run_diagnoses_itself_and_does_not_deploy_a_model_no_better_than_base(still_run):
    saved = json.loads((still_run / "diagnosis.json").read_text())
    assert {"no_learning", "no_improvement"} <= {f["code"] for f in saved["findings"]}
    report = (still_run / "report.md").read_text(encoding="utf-8")
    top = report.split("\n## ")[0]  # the title and what comes before the first section
    assert "WARNING: final model (grpo) no better than the base on task_accuracy" in top
    assert "--deploy_if_not_better True" in top
    assert "## Diagnosis" in report and "| error | no_learning | rft |" in report
    log = (still_run / "logs" / "train.log").read_text(encoding="utf-8")
    assert "diagnosis: warning no_improvement (grpo)" in log and "diagnosis: error no_learning" in log
    assert "openclaw: not deployed: final model (grpo) no better than the base" in log
    assert "automatic deploy is off" not in log  # deploy_after_train was not reached


@pytest.mark.slow
def test_deploy_if_not_better_deploys_anyway(assets, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    args = with_eval(flags(assets, out, "GRPO", steps=1), grpo_learning_rate="1e-12")
    assert main(["train", *args, "--openclaw_env", "True", "--deploy_if_not_better", "True"]) == 0
    log = (out / "logs" / "train.log").read_text(encoding="utf-8")
    assert "deploying although final model (grpo) no better" in log
    assert "automatic deploy is off" in log  # reached deploy_after_train (the tests turn the server off)


def test_a_failed_run_is_diagnosed_too(assets, tmp_path, monkeypatch):  # noqa: F811
    out = tmp_path / "run"
    monkeypatch.setenv("ARK_FAULT", "raise_at_step:2")
    with pytest.raises(RuntimeError):
        main(["train", *flags(assets, out, "GRPO")])
    saved = json.loads((out / "diagnosis.json").read_text())
    assert saved["status"] == "failed" and saved["findings"][0]["code"] == "failed"
    assert "RuntimeError: fault injection: step 2 raised" in saved["findings"][0]["evidence"]


def test_nan_gradients_are_non_finite_with_the_resume_command(assets, tmp_path, monkeypatch):  # noqa: F811
    out = tmp_path / "run"
    monkeypatch.setenv("ARK_FAULT", "nan_at_step:3")
    main(["train", *flags(assets, out, "GRPO")])
    finding = codes(out)["non_finite"]  # the run stops (diverged) or skips the step (bad_step): both name it
    assert "3" in finding["evidence"] and "NaN" in finding["evidence"] + finding["fix"]
    assert "--grpo_learning_rate from 0.01 to" in finding["fix"] and "new --output_dir" in finding["fix"]


def test_out_of_memory_is_oom_with_a_halved_micro_batch(assets, tmp_path, monkeypatch):  # noqa: F811
    import torch

    out = tmp_path / "run"
    monkeypatch.setenv("ARK_FAULT", "oom_at_step:3")
    with pytest.raises(torch.OutOfMemoryError):  # not a user error: it propagates (for --auto_resume)
        main(["train", *flags(assets, out, "GRPO")])
    result = to_json(diagnose(out))
    assert result["status"] == "failed" and result["findings"][0]["code"] == "oom"
    fix = result["findings"][0]["fix"]
    assert "--batch_size 2 --gradient_accumulation_steps 2" in fix and "grpo/checkpoint-2" in fix


def test_a_full_disk_is_disk_full(assets, tmp_path, monkeypatch):  # noqa: F811
    out = tmp_path / "run"
    monkeypatch.setenv("ARK_FAULT", "disk_full_at_step:4")
    assert main(["train", *flags(assets, out, "GRPO")]) == 2
    finding = codes(out)["disk_full"]
    assert "checkpoint-4" in finding["evidence"] and "--save_total_limit 1" in finding["fix"]


@pytest.mark.slow
def test_a_killed_run_is_dead_with_the_resume_command(assets, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "run"
    assert run_child(flags(assets, out, "GRPO"), fault="kill_after_step:3").returncode != 0
    assert main(["diagnose", str(out), "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "dead" and result["findings"][0]["code"] == "dead"
    assert "--resume True" in result["findings"][0]["fix"] and "checkpoint-2" in result["findings"][0]["fix"]


# --- synthetic run folders (see the module docstring) ---
def metric(step: int, **values) -> dict:
    healthy = {
        "loss": 0.01, "grad_norm": 0.5, "learning_rate": 1e-5, "reward": 0.3 + 0.01 * step, "reward_std": 0.2,
        "frac_reward_zero_std": 0.1, "kl": 0.01 * step, "entropy": 2.0, "completions/clipped_ratio": 0.05,
        "completions/mean_length": 30.0, "rewards/a/mean": 0.3, "rewards/b/mean": 0.3, "step_time": 1.0,
        "generation_time": 0.5,
    }  # fmt: skip
    return {"event": "metrics", "stage": "grpo", "step": step, **healthy, **values}


def evaluation(name: str, accuracy: float, reward: float = 0.5, n: int = 100) -> dict:
    """An eval file whose first ``accuracy`` of ``n`` prompts are right, each with its per-prompt outcomes
    (what the paired tests read), every answer at the mean ``reward``."""
    right = round(accuracy * n)
    answers = [
        {
            "completion": "",
            "reward": reward,
            "outcomes": {"pass_rate": float(i < right), "task_accuracy": float(i < right)},
        }
        for i in range(n)
    ]
    return {
        "name": name, "n": n, "reward_mean": reward, "pass_rate": accuracy, "task_accuracy": accuracy,
        "answers": answers,
    }  # fmt: skip


def synthetic_run(src: Path, dest: Path, steps: list[dict], evals: dict, **events) -> Path:
    """A copy of the real run ``src`` with its GRPO metrics, eval files and heartbeat replaced."""
    shutil.copytree(src, dest)
    kept = [e for e in read_jsonl(src / "events.jsonl") if e["event"] not in ("metrics", "eval", "warning")]
    extra = [{"event": name, **fields} for name, fields in events.items()]
    write_jsonl(dest / "events.jsonl", [*kept[:-1], *steps, *extra, kept[-1]])
    shutil.rmtree(dest / "eval", ignore_errors=True)
    (dest / "eval").mkdir()
    for name, data in evals.items():
        (dest / "eval" / f"{name}.json").write_text(json.dumps(data))
    return dest


HEALTHY_EVALS = {"base": evaluation("base", 0.3), "grpo": evaluation("grpo", 0.5, 0.7)}


def test_a_healthy_run_has_nothing_above_info(constant_run, tmp_path, capsys):
    run = synthetic_run(constant_run, tmp_path / "run", [metric(s) for s in range(1, 21)], HEALTHY_EVALS)
    assert codes(run) == {}
    assert main(["diagnose", str(run)]) == 0
    assert "finished; no findings" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("code", "steps", "evals", "evidence"),
    [
        (
            "no_learning",
            [metric(s, kl=0.0, reward=0.3) for s in range(1, 21)],
            HEALTHY_EVALS,
            "GRPO KL to the",
        ),
        ("kl_blowup", [metric(s, kl=0.2 * s) for s in range(1, 21)], HEALTHY_EVALS, "reached 4 at step 20"),
        (
            "entropy_collapse",
            [metric(s, entropy=2.0 / s**2) for s in range(1, 21)],
            HEALTHY_EVALS,
            "fell from 2",
        ),
        (
            "reward_hacking",
            [metric(s, reward=0.1 * s) for s in range(1, 11)],
            # 30% → 15% of 100 prompts: 15 lost, none gained (exact McNemar p < 0.001)
            {"base": evaluation("base", 0.3), "grpo": evaluation("grpo", 0.15, 0.4)},
            "while held-out",
        ),
        (
            "reward_hacking",
            [metric(s, **{"rewards/a/mean": 0.1 * s, "rewards/b/mean": 1 - 0.1 * s}) for s in range(1, 11)],
            HEALTHY_EVALS,
            "one grader rose",
        ),
        (
            "eval_regression",
            [metric(s) for s in range(1, 11)],
            {"base": evaluation("base", 0.3), "rft": evaluation("rft", 0.6), "grpo": evaluation("grpo", 0.4)},
            "grpo ends worse than rft: pass rate 60.0% → 40.0%, \u221220.0 pts [",
        ),
    ],
)
def test_synthetic_training_problems(constant_run, tmp_path, code, steps, evals, evidence):
    found = codes(synthetic_run(constant_run, tmp_path / "run", steps, evals))
    assert code in found and evidence in found[code]["evidence"]


def test_slow_generation_is_a_warning_on_gpu_and_info_on_cpu(constant_run, tmp_path):
    steps = [metric(s, generation_time=0.95) for s in range(1, 11)]
    cpu = synthetic_run(constant_run, tmp_path / "cpu", steps, HEALTHY_EVALS)
    assert codes(cpu, ("info",))["slow_generation"]["evidence"].startswith("generation took 0.95s")
    gpu = synthetic_run(constant_run, tmp_path / "gpu", steps, HEALTHY_EVALS, scale={"device": "cuda:0"})
    assert "--use_vllm True" in codes(gpu)["slow_generation"]["fix"]


def test_no_improvement_is_judged_on_finished_runs_only(constant_run, tmp_path):
    worse = {"base": evaluation("base", 0.5), "rft": evaluation("rft", 0.4)}
    run = synthetic_run(constant_run, tmp_path / "run", [metric(s) for s in range(1, 11)], worse)
    found = codes(run)["no_improvement"]
    assert "below the base on task_accuracy: 50.0% → 40.0%" in found["evidence"]
    # worse than the base: the advice agrees with eval_regression's (lower the rate), never "ten times higher"
    assert "training made it worse: lower the learning rates" in found["fix"] and "higher" not in found["fix"]
    beat = json.loads((run / "heartbeat.json").read_text())
    (run / "heartbeat.json").write_text(json.dumps({**beat, "state": "failed"}))
    assert "no_improvement" not in codes(run)  # RFT was not meant to be the final model


def test_skipped_steps_and_rollbacks_are_non_finite_warnings(constant_run, tmp_path):
    bad = {"stage": "grpo", "what": "loss", "precision": "fp32"}
    run = synthetic_run(
        constant_run,
        tmp_path / "run",
        [metric(s) for s in range(1, 11)],
        HEALTHY_EVALS,
        bad_step={**bad, "step": 5},
        rollback={"stage": "grpo", "attempt": 1, "at_step": 7, "to_step": 4, "learning_rate": 5e-3},
    )
    finding = codes(run)["non_finite"]
    assert finding["severity"] == "warning"
    assert finding["evidence"] == (
        "1 step(s) skipped for NaN/inf: 5 (loss); 1 rollback(s), the last from step 7 to step 4 with learning rate 0.005"
    )
    assert "--grpo_learning_rate from 0.01 to 0.005" in finding["fix"]


def test_a_stalled_run_names_the_log_with_the_stacks(constant_run, tmp_path):
    run = synthetic_run(constant_run, tmp_path / "run", [metric(1)], HEALTHY_EVALS)
    beat = json.loads((run / "heartbeat.json").read_text())
    (run / "heartbeat.json").write_text(json.dumps({**beat, "state": "stalled", "stage": "grpo", "step": 3}))
    events = read_jsonl(run / "events.jsonl")
    stalled = {
        "event": "stalled",
        "stage": "grpo",
        "step": 3,
        "message": "no progress for 30s (--stall_timeout 30)",
    }
    write_jsonl(run / "events.jsonl", [*events[:-1], stalled])
    finding = to_json(diagnose(run))["findings"][0]
    assert finding["code"] == "stalled" and "no progress for 30s" in finding["evidence"]
    assert "train.log" in finding["fix"] and "--resume True" in finding["fix"]


def test_a_folder_that_is_not_a_run_is_refused_in_one_line(tmp_path, capsys):
    assert main(["diagnose", str(tmp_path / "nope")]) == 2
    assert main(["diagnose", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("error: ") for line in err)


def test_agent_episodes_with_the_same_sign_off_but_other_tool_calls_are_not_the_same_answers():
    """An agent's last text is often the same sign-off ("完成"); what it did is in its tool calls."""
    from types import SimpleNamespace

    def answers(order: str) -> dict:
        call = {"name": "lookup_order", "arguments": {"order_id": order}}
        return {"answers": [{"completion": "完成", "tool_calls": [call]} for _ in range(10)]}

    run = SimpleNamespace(evals={"rft": answers("A1"), "grpo": answers("B2")}, cfg=lambda flag: 0.0005)
    assert check_same_answers(run) == []  # type: ignore[arg-type]
    run.evals["grpo"] = answers("A1")
    assert "same greedy answer as rft on 100%" in check_same_answers(run)[0].evidence  # type: ignore[arg-type]
