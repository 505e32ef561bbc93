"""The long-running loop (``services/loop/supervisor.py``): its gate on a labelled (QC) held-out set, a rollback asked
for as the supervisor leaves, rounds restarted or decided after a crash, and rounds on schedule.

``auto`` (the default main metric) is ``task_accuracy`` on labelled rows, said when the loop starts.
``loop --rollback N`` issued while the supervisor decides its last round must not wait for a supervisor
that will not look again; a supervisor's pid reused by another process neither stalls a rollback nor is
signalled.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from ark_trainer.base.fileio import read_json, write_json, write_jsonl
from ark_trainer.services.loop import control, gate, serving, supervisor
from ark_trainer.services.loop.control import request_rollback
from ark_trainer.services.loop.state import fresh_state, load_state, save_state
from ark_trainer.services.loop.supervisor import ROLLBACK_REQUEST, Loop, LoopSettings
from ark_trainer.stages.registry import config_class
from tests.conftest import save_tiny_qwen
from tests.loop.heldout_rows import QC_ROWS


def test_the_loop_resolves_auto_to_task_accuracy_on_qc_heldout_and_says_so(tmp_path, monkeypatch):
    model = save_tiny_qwen(tmp_path / "model")
    held = tmp_path / "held.jsonl"
    write_jsonl(held, QC_ROWS)
    said: list[str] = []
    monkeypatch.setattr(serving, "serve", lambda *a, **k: None)
    flags = {"model_path": str(model), "eval_dataset": str(held)}
    loop = Loop(tmp_path / "loop", LoopSettings(), flags, log=lambda m, **k: said.append(m))
    loop.start()
    assert loop.main_metric == "task_accuracy"
    assert load_state(tmp_path / "loop")["settings"]["main_metric"] == "task_accuracy"
    assert any(
        "main metric is task_accuracy (--main_metric auto: the held-out rows are labelled)" in m for m in said
    )


def test_every_round_trains_with_the_loops_one_reward_and_answer_length(tmp_path, monkeypatch):
    """The QC held-out set calls for the QC preset: the round's train gets it, not a preset of its own
    turns (which refused the data: "reward grades nothing"); the round answers in the loop's length."""
    from ark_trainer.rewards.composite import preset_path
    from ark_trainer.services.loop import rounds

    held = tmp_path / "held.jsonl"
    write_jsonl(held, QC_ROWS)
    monkeypatch.setattr(serving, "serve", lambda *a, **k: None)
    said: list[str] = []
    flags = {"model_path": str(save_tiny_qwen(tmp_path / "model")), "eval_dataset": str(held)}
    loop = Loop(tmp_path / "loop", LoopSettings(), flags, log=lambda m, **k: said.append(m))
    loop.start()
    state = load_state(tmp_path / "loop")
    assert state["reward_config"] == str(preset_path("qc")) and state["reply_tokens"] == 64
    argv = " ".join(rounds.train_argv(tmp_path, tmp_path / "m", loop.round_flags, 1))
    assert f"--reward_config {preset_path('qc')}" in argv and "--max_completion_length 64" in argv
    assert (
        f"--eval_answer_cache {tmp_path / 'loop' / 'eval_cache'}" in argv
    )  # the served model's answers, once
    assert any("one reward scores the turns" in m for m in said)
    assert any("answers of up to 64 tokens" in m for m in said)
    user = Loop(
        tmp_path / "l2", LoopSettings(), {**flags, "max_completion_length": 40}, log=lambda *a, **k: None
    )
    user.start()
    assert "--max_completion_length 40" in " ".join(
        rounds.train_argv(tmp_path, tmp_path, user.round_flags, 1)
    )


def _round(folder: Path, current: dict, candidate: dict) -> None:
    """A round's train output as ``train`` leaves it (plan, both evaluations, a complete model)."""
    save_tiny_qwen(folder / "model")
    write_json(folder / "plan.json", {"stages": [{"name": "rft", "steps": 2}]})
    write_json(folder / "eval" / "base.json", current)
    write_json(folder / "eval" / "rft.json", candidate)


def test_a_better_round_on_qc_rows_is_promoted_though_reward_mean_is_flat(tmp_path, monkeypatch):
    """The defect: both models scored reward_mean 0 (the round's reward, picked from its turns, grades no
    QC row), task_accuracy 0.5 -> 0.9; the default gate said "0.0000 does not improve on 0.0000"."""
    monkeypatch.setattr(serving, "serve", lambda *a, **k: None)
    held = tmp_path / "held.jsonl"
    write_jsonl(held, QC_ROWS)
    flags = {"model_path": str(save_tiny_qwen(tmp_path / "model")), "eval_dataset": str(held)}
    folder = tmp_path / "loop"
    loop = Loop(folder, LoopSettings(), flags, log=lambda *a, **k: None)  # every setting at its default
    loop.start()
    loop.state["training"] = {"round": 1, "pid": 2**22 + 9, "started_at": "t", "turns_to": 6, "n_eval": 8,
                              "n_newest": 2}  # fmt: skip
    answers = [{"completion": "x", "reward": 0.0}] * 8
    _round(folder / "rounds" / "1", {"reward_mean": 0.0, "task_accuracy": 0.5, "answers": answers},
           {"reward_mean": 0.0, "task_accuracy": 0.9, "answers": answers})  # fmt: skip
    loop._check_round()
    decision = read_json(folder / "rounds" / "1" / "decision.json")
    assert decision["promoted"], decision["reasons"]
    assert decision["reasons"][0].startswith("task_accuracy: 0.5000 -> 0.9000")
    assert load_state(folder)["serving"] == 1
    assert "main metric `task_accuracy`" in (folder / "report.md").read_text(encoding="utf-8")


def _promoted_loop(tmp_path: Path, supervisor_pid: int | None) -> Path:
    folder = tmp_path / "loop"
    state = fresh_state(str(save_tiny_qwen(tmp_path / "m0")), {"main_metric": "reward_mean", "poll": 0.1})
    save_tiny_qwen(folder / "rounds" / "1" / "model")
    state.update(serving=1, supervisor_pid=supervisor_pid)
    state["history"] = [{"round": 1, "promoted": True, "reasons": ["ok"], "main": 1.0, "decided_at": "t"}]
    save_state(folder, state)
    serving.point_model(folder, folder / "rounds" / "1" / "model")
    return folder


@pytest.fixture
def served(monkeypatch) -> list[int]:
    """The rounds the (fake) server was switched to."""
    calls: list[int] = []
    monkeypatch.setattr(serving, "serve", lambda loop, round_id, *a, **k: calls.append(round_id))
    return calls


def _leaves_without_looking(folder: Path, after: float) -> threading.Thread:
    """A supervisor (this process) that is deciding its last round, then stops without a tick."""

    def stop():
        time.sleep(after)
        state = load_state(folder)
        state["supervisor_pid"] = None
        save_state(folder, state)

    thread = threading.Thread(target=stop)
    thread.start()
    return thread


def test_rollback_as_the_last_round_is_decided_switches_itself(tmp_path, served):
    import os

    folder = _promoted_loop(tmp_path, supervisor_pid=os.getpid())  # alive, and about to leave
    thread = _leaves_without_looking(folder, after=0.5)
    started = time.time()
    request_rollback(folder, 0, log=lambda *a: None, timeout=30)
    thread.join()
    assert time.time() - started < 10
    assert served == [0] and load_state(folder)["serving"] == 0
    assert not (folder / ROLLBACK_REQUEST).exists()
    assert Path(os.readlink(folder / "model")) == Path(load_state(folder)["model_path"])


def test_rollback_after_the_supervisor_died_switches_itself(tmp_path, served):
    folder = _promoted_loop(tmp_path, supervisor_pid=2**22 + 11)  # a pid that is not running
    request_rollback(folder, 0, log=lambda *a: None, timeout=30)
    assert served == [0] and load_state(folder)["serving"] == 0


def test_a_supervisor_that_is_stopping_serves_the_pending_request(tmp_path, served):
    import os

    folder = _promoted_loop(tmp_path, supervisor_pid=os.getpid())
    loop = Loop(folder, LoopSettings(max_rounds=1), {}, log=lambda *a, **k: None)
    loop.state = load_state(folder)
    write_json(folder / ROLLBACK_REQUEST, {"round": 0, "asked_at": "t"})
    loop.run()  # max_rounds reached: no tick, straight to the shutdown
    assert served == [0] and load_state(folder)["serving"] == 0
    assert load_state(folder)["supervisor_pid"] is None and not (folder / ROLLBACK_REQUEST).exists()


def test_a_running_supervisor_still_serves_the_request(tmp_path, served):
    import os

    folder = _promoted_loop(tmp_path, supervisor_pid=os.getpid())
    loop = Loop(folder, LoopSettings(), {}, log=lambda *a, **k: None)
    loop.state = load_state(folder)

    def tick_once():
        while not (folder / ROLLBACK_REQUEST).exists():
            time.sleep(0.05)
        loop.tick()

    thread = threading.Thread(target=tick_once)
    thread.start()
    request_rollback(folder, 0, log=lambda *a: None, timeout=30)
    thread.join()
    assert served == [0] and load_state(folder)["serving"] == 0


def test_only_one_side_claims_a_request(tmp_path):
    folder = tmp_path
    write_json(folder / ROLLBACK_REQUEST, {"round": 2, "asked_at": "t"})
    assert supervisor.claim_rollback_request(folder) == 2
    assert supervisor.claim_rollback_request(folder) is None


@pytest.mark.slow
def test_a_round_on_labelled_qc_data_is_promoted_when_it_is_better(tmp_path, monkeypatch):
    """Real models, real evaluations, the real gate: the loop serves an untrained demo model (random
    weights, the demo's tokenizer); the round's candidate is the demo model after its warm-up (an
    already-better model). Both are evaluated, as the round's ``train`` evaluates them, on the frozen QC
    held-out set plus the newest turns, with the reward a round builds from its turns (the reference preset:
    it grades no QC row, so reward_mean measures only the newest turns). The default gate promotes on
    task_accuracy, which the labelled held-out rows measure."""
    import shutil

    import torch

    from ark_trainer.app.demo.data import write_demo_data
    from ark_trainer.app.demo.model import build_base_model
    from ark_trainer.base.fileio import read_jsonl
    from ark_trainer.core.models.device import resolve_runtime
    from ark_trainer.data.loader import load_jsonl
    from ark_trainer.rewards.builder import build_reward
    from ark_trainer.stages.evaluate import evaluate_model

    monkeypatch.setattr(serving, "serve", lambda *a, **k: None)  # the deploy is tested elsewhere
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train, held = write_demo_data(tmp_path / "data", n_train=48, n_eval=12, seed=3)
        small = {"hidden_size": 32, "num_layers": 2, "n_warmup_rows": 320, "vocab_size": 1000,
                 "warmup_batch_size": 16, "progress": False, "seed": 3}  # fmt: skip
        untrained = build_base_model(tmp_path / "untrained", read_jsonl(train), warmup_steps=0, **small)
        better = build_base_model(tmp_path / "better", read_jsonl(train), warmup_steps=100, **small)

        loop = Loop(tmp_path / "loop", LoopSettings(eval_newest=2), {"model_path": str(untrained),
                    "eval_dataset": str(held)}, log=lambda *a, **k: None)  # fmt: skip
        loop.start()
        assert loop.main_metric == "task_accuracy"

        # round 1 as _start_round leaves it: the newest turns (corrected with the gold answer) after the
        # frozen held-out rows in eval.jsonl; what train then writes: plan, model, both evaluations
        folder = tmp_path / "loop" / "rounds" / "1"
        turns = [{"messages": [{"role": "user", "content": r["question"]}, {"role": "assistant", "content": "结论：合规"}],
                  "reference": "结论：合规", "feedback": -1} for r in read_jsonl(train)[:2]]  # fmt: skip
        write_jsonl(folder / "data.jsonl", turns)
        write_jsonl(folder / "eval.jsonl", read_jsonl(held) + turns)
        rows = load_jsonl(folder / "eval.jsonl")
        reward = build_reward({}, load_jsonl(folder / "data.jsonl"), "cpu")  # what the round's train builds
        rt = resolve_runtime(config_class()(data_path=str(train), device="cpu"))
        kw = {"max_new_tokens": 48, "pass_threshold": 0.8}
        base = evaluate_model(untrained, "base", rows, reward, rt, folder / "eval" / "base.json", **kw)
        cand = evaluate_model(better, "rft", rows, reward, rt, folder / "eval" / "rft.json", **kw)
    finally:
        torch.set_num_threads(threads)
    shutil.copytree(better, folder / "model")
    write_json(folder / "plan.json", {"stages": [{"name": "rft", "steps": 4}]})
    assert cand["task_accuracy"] > base["task_accuracy"], (base["task_accuracy"], cand["task_accuracy"])

    loop.state["training"] = {"round": 1, "pid": 2**22 + 13, "started_at": "t", "turns_to": 2,
                              "n_eval": len(rows), "n_newest": 2}  # fmt: skip
    loop._check_round()
    decision = read_json(folder / "decision.json")
    assert decision["promoted"], decision
    assert decision["reasons"][0].startswith("task_accuracy: ")
    assert load_state(tmp_path / "loop")["serving"] == 1
    # the round's reward grades none of the held-out QC rows: reward_mean sees only the 2 newest turns
    frozen = [True] * (len(rows) - 2) + [False] * 2  # the held-out rows first, then the 2 newest turns
    assert gate.with_heldout(base, frozen)["heldout_reward_mean"] is None
    assert gate.with_heldout(cand, frozen)["heldout_reward_mean"] is None


def test_a_reused_supervisor_pid_neither_stalls_a_rollback_nor_gets_killed(tmp_path, served, stranger):
    folder = _promoted_loop(tmp_path, supervisor_pid=stranger.pid)
    state = load_state(folder)
    state["supervisor_started"] = "1"  # the supervisor that crashed started long before this process
    save_state(folder, state)
    started = time.time()
    request_rollback(folder, 0, log=lambda *a: None, timeout=20)
    assert time.time() - started < 5 and served == [0] and load_state(folder)["serving"] == 0
    from ark_trainer.services.loop.report import status_lines

    assert "supervisor: not running" in status_lines(folder, load_state(folder))
    control.stop_loop(folder)
    assert stranger.poll() is None  # never signalled: it is not the supervisor


def _crashed_loop(tmp_path, training: dict) -> Loop:
    folder = tmp_path / "loop"
    state = fresh_state(str(tmp_path), {"main_metric": "reward_mean"})
    state.update(training=training, next_round=2)
    save_state(folder, state)
    loop = Loop(folder, LoopSettings(), {}, log=lambda *a, **k: None)
    loop.state = state
    return loop


def test_a_round_whose_process_died_half_way_is_started_again(tmp_path):
    loop = _crashed_loop(
        tmp_path, {"round": 1, "pid": 2**22 + 7, "started_at": "t", "turns_to": 9, "n_eval": 3}
    )
    loop._check_round()
    assert loop.state["training"] is None and loop.state["next_round"] == 1 and loop.state["history"] == []
    assert load_state(tmp_path / "loop")["next_round"] == 1  # saved: a restart starts round 1 again


def test_a_round_that_finished_while_the_supervisor_was_down_is_decided_on_restart(tmp_path):
    loop = _crashed_loop(tmp_path, {"round": 1, "pid": 2**22 + 7, "started_at": "t", "turns_to": 9,
                                    "n_eval": 2, "n_newest": 1})  # fmt: skip
    folder = tmp_path / "loop" / "rounds" / "1"
    (folder / "model").mkdir(parents=True)
    (folder / "model" / "config.json").write_text("{}")
    (folder / "model" / "model.safetensors").write_bytes(b"x")
    write_json(folder / "plan.json", {"stages": [{"name": "rft", "steps": 4}]})
    answers = [{"reward": 1.0}, {"reward": 0.0}]
    write_jsonl(folder / "eval.jsonl", [{"prompt": "held"}, {"prompt": "newest"}])  # frozen row, newest turn
    write_jsonl(
        folder / "data" / "test.jsonl",
        [{"prompt": [{"role": "user", "content": t}]} for t in ("held", "newest")],
    )
    write_json(folder / "eval" / "base.json", {"reward_mean": 0.5, "answers": answers})
    write_json(folder / "eval" / "rft.json", {"reward_mean": 0.5, "answers": answers[::-1]})
    loop._check_round()
    decision = read_json(folder / "decision.json")
    assert not decision["promoted"] and decision["stage"] == "rft"
    assert any(r.startswith("heldout_reward_mean: regressed 1.0000 -> 0.0000") for r in decision["reasons"])
    state = load_state(tmp_path / "loop")
    assert state["serving"] == 0 and state["turns_used"] == 9 and state["history"][0]["promoted"] is False
    assert (tmp_path / "loop" / "report.md").is_file()


def test_every_starts_a_round_on_schedule_with_fewer_turns_than_min_new_turns(tmp_path, monkeypatch):
    """--min_new_turns 30 not reached: no round until --every seconds have passed since the last one, and
    never without a scored turn; without --every, only the turn count starts one."""
    (tmp_path / "loop").mkdir()
    (tmp_path / "loop" / "heldout.jsonl").write_text('{"question": "q", "reference": "a"}\n')
    started: list[int] = []

    def loop_with(every: float, scored: int) -> Loop:
        loop = _crashed_loop(tmp_path, None)  # type: ignore[arg-type]
        loop.s = LoopSettings(min_new_turns=30, every=every)
        monkeypatch.setattr(loop, "_new_rows", lambda: ([{"reward": 1.0}] * scored, scored))
        monkeypatch.setattr(loop, "_start_round", lambda rows, total: started.append(len(rows)))
        return loop

    clock = [1000.0]
    monkeypatch.setattr("ark_trainer.services.loop.supervisor.time.time", lambda: clock[0])
    loop = loop_with(every=60, scored=3)
    loop.last_round_at = 1000.0
    clock[0] = 1059.0
    loop.tick()
    assert started == []  # 59 s: not yet
    clock[0] = 1060.0
    loop.tick()
    assert started == [3]  # due by the schedule with 3 turns
    loop = loop_with(every=60, scored=0)
    loop.last_round_at, clock[0] = 0.0, 5000.0
    loop.tick()
    assert started == [3]  # scheduled, but nothing new to train on
    loop = loop_with(every=0, scored=29)
    loop.last_round_at, clock[0] = 0.0, 9e9
    loop.tick()
    assert started == [3]  # no schedule: 29 < 30 turns
    loop = loop_with(every=0, scored=30)
    loop.tick()
    assert started == [3, 30]


def test_a_failed_round_gives_its_turns_back_and_is_no_round(tmp_path, monkeypatch):
    loop = _crashed_loop(
        tmp_path, {"round": 1, "pid": 2**22 + 7, "started_at": "t", "turns_to": 9, "n_eval": 2}
    )
    loop.s = LoopSettings(max_rounds=1)
    monkeypatch.setattr("ark_trainer.services.loop.rounds.exit_code", lambda pid, started=None: 2)
    loop._check_round()
    state = load_state(tmp_path / "loop")
    assert state["turns_used"] == 0 and state["training"] is None  # its 9 turns go to the next round
    assert state["history"][0]["failed"] and not loop._done()  # --max_rounds 1 still has its round to run
    started: list[int] = []
    monkeypatch.setattr(loop, "_start_round", lambda rows, total: started.append(total))
    (tmp_path / "loop" / "heldout.jsonl").write_text('{"question": "q", "reference": "a"}\n')
    monkeypatch.setattr(loop, "_new_rows", lambda: ([{"messages": []}] * 40, 9))
    loop._maybe_start_round()
    assert started == []  # not again on the very turns it failed on
    monkeypatch.setattr(loop, "_new_rows", lambda: ([{"messages": []}] * 41, 10))
    loop._maybe_start_round()
    assert started == []  # one new turn: not yet (a failure that repeats is not retried on every turn)
    monkeypatch.setattr(loop, "_new_rows", lambda: ([{"messages": []}] * 60, 9 + 30))
    loop._maybe_start_round()
    assert started == [39]  # --min_new_turns (30) more: tried again, with the old turns too


def test_the_loop_serves_and_stops_through_its_deploy_target(tmp_path, monkeypatch):
    """``loop --deploy_target NAME``: the loop serves through the target registered as NAME, ``loop --stop``
    stops that target's server, and a resume asking for another target is refused in one line."""
    from ark_trainer.base.errors import UserError
    from ark_trainer.services.deploy import targets

    stopped = []

    class Target:
        def stop(self, out):
            stopped.append(out)
            return False

    targets.register_target("test_loop_target", Target())
    try:
        served = []
        monkeypatch.setattr(serving, "serve", lambda loop, n, port, agent, target, **k: served.append(target))
        held = tmp_path / "held.jsonl"
        write_jsonl(held, QC_ROWS)
        flags = {"model_path": str(save_tiny_qwen(tmp_path / "model")), "eval_dataset": str(held)}
        folder = tmp_path / "loop"
        Loop(
            folder, LoopSettings(), {**flags, "deploy_target": "test_loop_target"}, log=lambda m, **k: None
        ).start()
        assert served == ["test_loop_target"]
        with pytest.raises(UserError, match="--deploy_target: .* serves through test_loop_target"):
            Loop(folder, LoopSettings(), {"deploy_target": "openclaw"}, log=lambda m, **k: None).start()
        state = load_state(folder)
        state["supervisor_pid"] = None
        save_state(folder, state)
        control.stop_loop(folder)
        assert stopped == [str(folder.resolve())]
    finally:
        targets.targets().pop("test_loop_target")


def test_the_loop_refuses_an_unknown_deploy_target_before_it_writes_anything(tmp_path, monkeypatch):
    from ark_trainer.base.errors import UserError

    monkeypatch.setattr(serving, "serve", lambda *a, **k: None)
    flags = {"model_path": str(save_tiny_qwen(tmp_path / "model")), "deploy_target": "nowhere"}
    with pytest.raises(UserError, match="--deploy_target: unknown deploy target 'nowhere'; use openclaw"):
        Loop(tmp_path / "loop", LoopSettings(), flags, log=lambda m, **k: None).start()
    assert not (tmp_path / "loop").exists()


def test_stop_says_how_to_restore_the_client_of_the_target_in_use(tmp_path, monkeypatch):
    import ark_trainer.services.deploy.targets as targets

    folder = tmp_path / "loop"
    save_state(folder, fresh_state(str(tmp_path), {"main_metric": "reward_mean"}))  # the default target
    said = control.stop_loop(folder)
    assert said.endswith("; `ark-trainer deploy LOOP --rollback` restores OpenClaw's config"), said

    class Toy:  # a plug-in's target, without a label: named by its name
        def stop(self, out):
            return False

    real = targets.get_target
    monkeypatch.setattr(targets, "get_target", lambda name: Toy() if name == "toyfile" else real(name))
    settings = {"main_metric": "reward_mean", "train_flags": {"deploy_target": "toyfile"}}
    save_state(folder, fresh_state(str(tmp_path), settings))
    said = control.stop_loop(folder)
    assert said.endswith("; `ark-trainer deploy LOOP --target toyfile --rollback` restores toyfile's config")
    assert "OpenClaw" not in said
