"""The promotion gate (``loop/gate.py``): a round is promoted only when it is better, never on nan settings."""

from __future__ import annotations

from tests.conftest import refused


def test_a_gate_that_cannot_pass_is_refused_when_the_loop_starts(assets, tmp_path, capsys):
    loop = tmp_path / "loop"
    argv = ["loop", "--output_dir", str(loop), "--model_path", str(assets["model"])]
    argv += ["--eval_dataset", str(assets["train"]), "--min_improvement", "1"]
    lines = refused(capsys, argv)
    assert len(lines) == 1 and lines[0].startswith("error: --min_improvement 1: task_accuracy is a share"), (
        lines
    )
    assert "no round could ever pass the gate" in lines[0]
    assert not loop.exists()


def test_nan_settings_can_never_promote_a_round():
    from ark_trainer.loop.gate import decide

    current = {"task_accuracy": 0.5, "reward_mean": 0.9}
    same, better_but_drifted = dict(current), {"task_accuracy": 0.6, "reward_mean": 0.1}
    assert not decide(current, same, "task_accuracy").promote
    assert not decide(current, better_but_drifted, "task_accuracy").promote
    assert not decide(current, same, "task_accuracy", min_improvement=float("nan")).promote
    assert not decide(current, better_but_drifted, "task_accuracy", max_regression=float("nan")).promote
