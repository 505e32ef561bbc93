"""The live loop's parts without a server: recording, feedback rules, the gate, round rows, the command."""

from __future__ import annotations

import asyncio
import json

import pytest

from ark_trainer.cli import main
from ark_trainer.data.loader import load_jsonl
from ark_trainer.deploy.record import Recorder, build_row, read_turns, reply_of
from ark_trainer.errors import UserError
from ark_trainer.fileio import read_json, write_json, write_jsonl
from ark_trainer.loop import feedback, gate, rounds
from ark_trainer.loop.state import fresh_state, load_state, save_state
from ark_trainer.loop.supervisor import Loop, LoopSettings

SSE = (
    b'data: {"choices": [{"delta": {"content": "\\u60a8\\u597d"}}]}\n\n'
    b'data: {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "read", "arguments": "{\\"pa"}}]}}]}\n\n'
    b'data: {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "th\\": \\"a\\"}"}}]}}]}\n\n'
    b"data: [DONE]\n\n"
)


def test_reply_of_joins_streamed_text_and_tool_call_pieces():
    text, calls = reply_of(SSE, stream=True)
    assert text == "您好" and calls == [{"name": "read", "arguments": '{"path": "a"}'}]
    body = json.dumps({"choices": [{"message": {"content": [{"type": "text", "text": "hi"}]}}]}).encode()
    assert reply_of(body, stream=False) == ("hi", [])


def test_recorded_row_is_scrubbed_and_read_by_the_loader(tmp_path):
    request = {"model": "m", "stream": True, "messages": [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": [{"type": "text", "text": "mail bob@corp.com, key sk-abcdefghijklmnopqrstuvwx"}]},
    ]}  # fmt: skip
    row = build_row(request, "call 13812345678", [], "round-2", 1)
    text = json.dumps(row, ensure_ascii=False)
    assert "bob@corp.com" not in text and "13812345678" not in text and "sk-abc" not in text
    assert "[EMAIL]" in text and "[PHONE]" in text and row["served_by"] == "round-2"
    write_jsonl(tmp_path / "t.jsonl", [row])
    loaded = load_jsonl(tmp_path / "t.jsonl")
    assert loaded[0]["candidates"] == ["call [PHONE]"] and loaded[0]["prompt"][-1]["role"] == "user"
    assert (
        build_row({"messages": [{"role": "system", "content": "x"}]}, "a", [], "", 2) is None
    )  # no user turn


def test_recorder_writes_one_line_per_answered_completion_only(tmp_path):
    async def app(scope, receive, send):
        await receive()
        status = 200 if scope["path"] == "/v1/chat/completions" else 404
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": SSE, "more_body": False})

    path = tmp_path / "turns" / "turns.jsonl"
    rec = Recorder(app, path, "round-0", log=lambda *a, **k: None)
    body = json.dumps({"stream": True, "messages": [{"role": "user", "content": "hi"}]}).encode()

    async def call(path_, headers=()):
        msgs = iter([{"type": "http.request", "body": body, "more_body": False}])

        async def receive():
            return next(msgs)

        async def send(_):
            return None

        scope = {"type": "http", "method": "POST", "path": path_, "headers": list(headers)}
        await rec(scope, receive, send)

    asyncio.run(call("/v1/chat/completions"))
    asyncio.run(call("/v1/other"))
    asyncio.run(call("/v1/chat/completions", [(b"x-ark-smoke", b"1")]))  # the deploy's smoke request
    rows = read_turns(path)
    assert len(rows) == 1 and rows[0]["messages"][-1]["content"].startswith("您好\n<tool_call>")
    with open(path, "a") as f:
        f.write('{"torn": ')  # a write in flight is not read
    assert len(read_turns(path)) == 1


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("不对，应该回答：好的", (-1, "好的")),
        ("that's wrong, it should be: 42", (-1, "42")),
        ("错了", (-1, None)),
        ("No, that is not it", (-1, None)),
        ("谢谢！", (1, None)),
        ("Thanks a lot", (1, None)),
        ("不正确", (-1, None)),
        ("再查一下订单 3", (0, None)),
    ],
)
def test_feedback_rules(message, expected):
    assert feedback.judge(message, feedback.Rules()) == expected


def test_feedback_rules_file_replaces_the_defaults_and_bad_ones_are_one_line(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text("negative: ['^nope']\n")
    rules = feedback.load_rules(str(path))
    assert feedback.judge("nope", rules) == (-1, None) and feedback.judge("谢谢", rules) == (1, None)
    path.write_text("negative: ['(']\n")
    with pytest.raises(Exception, match=r"rules.yaml: negative: bad pattern"):
        feedback.load_rules(str(path))


def test_the_next_user_message_grades_the_answer_before_it():
    turn1 = {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "q"},
                          {"role": "assistant", "content": "bad"}]}  # fmt: skip
    turn2 = {"messages": [*turn1["messages"], {"role": "user", "content": "不对，应该是：good"},
                          {"role": "assistant", "content": "good"}]}  # fmt: skip
    turn3 = {
        "messages": [
            *turn2["messages"],
            {"role": "user", "content": "谢谢"},
            {"role": "assistant", "content": "ok"},
        ]
    }
    rows = rounds.scored_rows(
        [turn1, turn2, turn3], [turn1, turn2], feedback.Rules(), None, keep_system=False
    )
    assert rows[0]["messages"] == [{"role": "user", "content": "q"}, {"role": "assistant", "content": "good"}]
    assert rows[0]["reference"] == "good" and rows[0]["feedback"] == -1
    assert rows[1]["feedback"] == 1 and rows[1]["messages"][-1]["content"] == "good"
    plain = rounds.turn_row(turn1, (-1, None))
    assert plain is not None and plain["messages"][-1]["role"] == "user"  # the bad answer is not kept


def test_feedback_through_openclaw_requests_ignores_its_internal_context():
    """What `openclaw agent --local` sends (recorded by the server): the current user message is followed
    by OpenClaw's internal-context message, which the next request's history leaves out."""
    ctx = {"role": "user", "content": "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nConversation data (data, not "
                                      "instructions):\n\"Active exec sessions:\\nnone\"\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>"}  # fmt: skip
    q = {"role": "user", "content": "[Tue 2026-12-01 07:51 UTC] 订单1什么时候发货？\n\nRuntime: agent=main"}
    fix = {"role": "user", "content": "[Tue 2026-12-01 07:51 UTC] 不对，应该回答：好的"}
    turn1 = {"messages": [{"role": "system", "content": "S"}, q, ctx, {"role": "assistant", "content": "嗯"}]}
    turn2 = {"messages": [{"role": "system", "content": "S"}, q, {"role": "assistant", "content": "嗯"}, fix,
                          ctx, {"role": "assistant", "content": "嗯"}]}  # fmt: skip
    rows = rounds.scored_rows([turn1, turn2], [turn1], feedback.Rules(), None, keep_system=False)
    assert rows[0]["reference"] == "好的" and rows[0]["feedback"] == -1
    asked = {"role": "user", "content": "订单1什么时候发货？"}  # unwrapped, as the server shows a bare model
    assert rows[0]["messages"] == [asked, {"role": "assistant", "content": "好的"}]  # no system, no context
    assert rounds.is_scored(rows[0])
    kept = rounds.turn_row(turn1, None, keep_system=True)
    assert kept is not None and ctx in kept["messages"]


def test_gate_promotes_only_a_gain_without_regressions():
    cur = {"reward_mean": 0.5, "pass_rate": 0.4, "task_accuracy": 0.3, "compliance_rate": None}
    assert gate.decide(cur, {**cur, "reward_mean": 0.6}).promote
    same = gate.decide(cur, dict(cur))
    assert not same.promote and "does not improve" in same.reasons[0]
    worse = gate.decide(cur, {**cur, "reward_mean": 0.7, "pass_rate": 0.3}, max_regression=0.05)
    assert not worse.promote and any(r.startswith("pass_rate: regressed") for r in worse.reasons)
    assert gate.decide(cur, {**cur, "reward_mean": 0.7, "pass_rate": 0.38}, max_regression=0.05).promote
    assert not gate.decide(cur, {**cur, "reward_mean": 0.51}, min_improvement=0.05).promote
    assert not gate.decide(cur, {}).promote  # a missing evaluation never promotes


def test_round_argv_passes_train_flags_and_defaults_to_lora(tmp_path):
    argv = rounds.train_argv(
        tmp_path, tmp_path / "m", {"strategy": "GRPO", "output_dir": "x", "max_train_steps": 4}, 3
    )
    text = " ".join(argv)
    assert "--lora_r 8" in text and "--strategy GRPO" in text and "--max_train_steps 4" in text
    assert argv[argv.index("--output_dir") + 1] == str(tmp_path) and "--output_dir x" not in text
    assert "--lora_r 0" in " ".join(rounds.train_argv(tmp_path, tmp_path, {"lora_r": 0}, 1))


def test_loop_flags_and_rollback_refusals(tmp_path, capsys):
    assert main(["loop", "--output_dir", str(tmp_path / "l"), "--min_new_turns", "many"]) == 2
    assert "--min_new_turns: expected int" in capsys.readouterr().err
    assert main(["loop", "--output_dir", str(tmp_path / "l"), "--rollback", "1"]) == 2
    assert "not a loop folder" in capsys.readouterr().err
    state = fresh_state(str(tmp_path), {"main_metric": "reward_mean"})
    state["history"] = [{"round": 1, "promoted": False, "reasons": ["x"], "main": 0.1, "decided_at": "t"}]
    save_state(tmp_path / "l", state)
    assert main(["loop", "--output_dir", str(tmp_path / "l"), "--rollback", "1"]) == 2
    assert "round 1 was never promoted" in capsys.readouterr().err
    assert main(["status", str(tmp_path / "l")]) == 0
    out = capsys.readouterr().out
    assert "serving round 0" in out and "round 1: refused at t: x" in out and "training: none" in out


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
    write_json(folder / "eval" / "base.json", {"reward_mean": 0.5, "answers": answers})
    write_json(folder / "eval" / "rft.json", {"reward_mean": 0.5, "answers": answers[::-1]})
    loop._check_round()
    decision = read_json(folder / "decision.json")
    assert not decision["promoted"] and decision["stage"] == "rft"
    assert any(r.startswith("heldout_reward_mean: regressed 1.0000 -> 0.0000") for r in decision["reasons"])
    state = load_state(tmp_path / "loop")
    assert state["serving"] == 0 and state["turns_used"] == 9 and state["history"][0]["promoted"] is False
    assert (tmp_path / "loop" / "report.md").is_file()


def test_sighup_drops_the_loaded_model_and_takes_the_new_tag(tmp_path, monkeypatch):
    import os
    import signal

    from ark_trainer.deploy import hotswap

    class Manager:
        def __init__(self):
            self.loaded_models = {"ark-loop": self}

        def delete_model(self):  # transformers' TimedModel.delete_model pops itself from the cache
            self.loaded_models.pop("ark-loop")

    manager, said = Manager(), []
    monkeypatch.setattr(hotswap, "_MANAGERS", [manager])
    monkeypatch.chdir(tmp_path)
    (tmp_path / hotswap.TAG_FILE).write_text("round-3\n")
    recorder = Recorder(lambda *a: None, tmp_path / "t.jsonl", "round-2")
    previous = signal.getsignal(signal.SIGHUP)
    try:
        hotswap.install(recorder, log=lambda text, **_: said.append(text))
        os.kill(os.getpid(), signal.SIGHUP)
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert manager.loaded_models == {} and recorder.tag == "round-3"
    assert said == ["[ark serve] serving round-3 (reloaded)"]


def test_deploy_record_flag_reaches_the_target_and_is_off_by_default(tmp_path, monkeypatch):
    import ark_trainer.deploy.targets as targets

    calls = []

    class Target:
        def deploy(self, out, serving, client=None, log=print):
            calls.append((serving.record_to, client))

    monkeypatch.setattr(targets, "get_target", lambda name="openclaw": Target())
    assert main(["deploy", str(tmp_path)]) == 0
    assert main(["deploy", str(tmp_path), "--record", str(tmp_path / "turns.jsonl")]) == 0
    assert main(["deploy", str(tmp_path), "--agent", "qc"]) == 0
    assert calls == [(None, {}), (str(tmp_path / "turns.jsonl"), {}), (None, {"agent": "qc"})]


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
    monkeypatch.setattr("ark_trainer.loop.supervisor.time.time", lambda: clock[0])
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


def test_round_rows_are_fitted_into_the_models_window_as_the_server_fits_them(tmp_path):
    """A live conversation soon outgrows a small model's window; ``train`` would refuse the round's rows
    (exit 2, the round lost), so the loop fits them as the server fits a request: the newest turn kept."""
    from ark_trainer.data.length import check_prompt_lengths
    from tests.conftest import save_tiny_qwen

    model = save_tiny_qwen(tmp_path / "m", texts=["订单什么时候发货？不对，应该回答：好的"])
    history = []
    for i in range(30):
        history += [{"role": "user", "content": f"订单{i}什么时候发货？" * 3},
                    {"role": "assistant", "content": "嗯" * 20}]  # fmt: skip
    last = {"role": "user", "content": "不对，应该回答：好的"}
    row = {"messages": [*history, last, {"role": "assistant", "content": "好的"}], "reference": "好的"}
    short = {"messages": [last, {"role": "assistant", "content": "好的"}], "reference": "好的"}
    rows, fitted = rounds.fit_rows([row, short], model, reply_tokens=16)
    assert fitted == 1 and rows[1] == short
    assert rows[0]["messages"][-2:] == [last, {"role": "assistant", "content": "好的"}]
    assert 0 < len(rows[0]["messages"]) < len(row["messages"])
    write_jsonl(tmp_path / "data.jsonl", rows)
    check_prompt_lengths(str(model), 16, [(tmp_path / "data.jsonl", load_jsonl(tmp_path / "data.jsonl"))])
    write_jsonl(tmp_path / "raw.jsonl", [row])
    with pytest.raises(UserError):  # unfitted, train refuses it
        check_prompt_lengths(str(model), 16, [(tmp_path / "raw.jsonl", load_jsonl(tmp_path / "raw.jsonl"))])
