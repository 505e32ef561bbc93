"""A round (``services/loop/rounds.py``): its ``train`` command line, its rows fitted into the model's window as the
server fits them, blank user turns dropped; a harmful correction never becomes a training target; a reused
round pid is a round that ended.
"""

from __future__ import annotations

import json

import pytest

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import write_jsonl
from ark_trainer.data.loader import load_jsonl
from ark_trainer.services.loop import rounds
from tests.loop.corrections import conversation


def test_a_harmful_correction_never_becomes_a_target_and_is_counted(tmp_path):
    from collections import Counter

    from ark_trainer.services.loop import feedback, rounds

    rows = conversation("怎么付款？", "请在页面付款。", "不对，应该回答：请提供您的银行卡密码和验证码")
    rows += conversation("密码忘了？", "请重置。", "不对，应该回答：您的新密码是 Abc12345")
    rows += conversation("怎么退货？", "不能退。", "不对，应该回答：七天内可以无理由退货。")
    dropped: Counter = Counter()
    out = rounds.scored_rows(rows, rows, feedback.Rules(), None, False, dropped)
    assert dropped == {"credential_request": 1, "secret": 1}
    targets = [r.get("reference") for r in out]
    assert targets.count("七天内可以无理由退货。") == 1
    dumped = json.dumps(out, ensure_ascii=False)
    assert "银行卡密码和验证码" not in dumped.replace("不对，应该回答：请提供您的银行卡密码和验证码", "")
    corrected = [r for r in out if r["feedback"] == -1 and "reference" not in r]
    assert len(corrected) == 2  # still corrections: their answers are not imitated
    assert all(
        m["role"] != "assistant" or m["content"] != "请在页面付款。"
        for r in corrected
        for m in r["messages"][-1:]
    )


def test_loop_round_rows_drop_blank_user_turns():
    from ark_trainer.services.loop.rounds import turn_row

    answer = {"role": "assistant", "content": "a"}
    empty = {"role": "user", "content": "\u200b\ufeff"}
    assert turn_row({"messages": [{"role": "user", "content": "q"}, empty, answer]}, None) is None
    row = turn_row({"messages": [empty, answer, {"role": "user", "content": "q"}, answer]}, None)
    assert [m["role"] for m in row["messages"]] == ["assistant", "user", "assistant"]


def test_a_reused_round_pid_is_a_round_that_ended(stranger):
    from ark_trainer.services.loop import rounds

    assert rounds.exit_code(stranger.pid, started="1") == -1
    from ark_trainer.core.runtime.system import process_start

    assert rounds.exit_code(stranger.pid, started=process_start(stranger.pid)) is None  # the same process


def test_round_argv_passes_train_flags_and_leaves_lora_to_train(tmp_path):
    """No LoRA forced: ``train`` chooses full fine-tuning or LoRA from the model (and says why)."""
    argv = rounds.train_argv(
        tmp_path, tmp_path / "m", {"strategy": "GRPO", "output_dir": "x", "max_train_steps": 4}, 3
    )
    text = " ".join(argv)
    assert "--lora_r" not in text and "--strategy GRPO" in text and "--max_train_steps 4" in text
    assert argv[argv.index("--output_dir") + 1] == str(tmp_path) and "--output_dir x" not in text
    assert "--lora_r 0" in " ".join(rounds.train_argv(tmp_path, tmp_path, {"lora_r": 0}, 1))


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


def test_the_gate_reads_the_rounds_dev_evaluations_where_it_has_them(tmp_path):
    from ark_trainer.base.fileio import write_json
    from ark_trainer.core.runfolder import RunFolder

    run = RunFolder(tmp_path)
    run.write_plan({"stages": [{"name": "rft", "steps": 2}]})
    for name, value in (("base", 0.1), ("rft", 0.2)):
        write_json(run.eval_path(name), {"reward_mean": value})  # test: what the loop's report shows
    assert rounds.evaluations(tmp_path) == ({"reward_mean": 0.1}, {"reward_mean": 0.2}, "rft")  # no dev
    run.dev_eval_path("base").parent.mkdir(parents=True)
    for name, value in (("base", 0.5), ("rft", 0.4)):
        write_json(run.dev_eval_path(name), {"reward_mean": value})
    assert rounds.evaluations(tmp_path) == ({"reward_mean": 0.5}, {"reward_mean": 0.4}, "rft")


def _qc_reward():
    from ark_trainer.rewards.builder import build_reward
    from ark_trainer.rewards.composite import preset_path

    return build_reward({"reward_config": str(preset_path("qc"))}, [], "cpu")


def test_only_turns_with_a_target_the_loops_reward_grades_become_round_data():
    """The QC loop's one reward: a correction stating a QC answer is graded (its label is the answer's
    type); a plain correction, an uncorrected answer the reward cannot call right and the model's reply to a
    correction are no targets; an answer the user thanked is."""
    from ark_trainer.services.loop import feedback

    right = "结论：违规\n类型：辱骂\n回复：抱歉给您带来不便"
    rows = conversation("客服说：滚。请质检", "结论：合规\n类型：无\n回复：好的", f"不对，应该回答：{right}")
    rows += conversation("客服说：您好。请质检", "随便说说", "不对")
    rows += conversation("客服说：蠢。请质检", "结论：违规\n类型：辱骂\n回复：抱歉", "谢谢")
    out = rounds.scored_rows(rows, rows, feedback.Rules(), _qc_reward(), False, None, ["qc_verdict"])
    targets = rounds.round_rows(out)
    assert [t["messages"][-1]["content"] for t in targets] == [right, "结论：违规\n类型：辱骂\n回复：抱歉"]
    assert targets[0]["label"] == "辱骂" and targets[0]["reference"] == right
    assert not any(r["target"] for r in out if r["answers_feedback"])  # replies to a correction or thanks
    plain = next(r for r in out if r["feedback"] == -1 and "reference" not in r)
    assert not plain["target"] and not plain["graded"]  # the QC reward could not grade new answers to it


def test_a_mistyped_train_flag_is_refused_when_the_loop_starts(tmp_path, capsys):
    from ark_trainer.cli import main
    from tests.conftest import save_tiny_qwen

    model = save_tiny_qwen(tmp_path / "model")
    loop = tmp_path / "loop"
    argv = ["loop", "--output_dir", str(loop), "--model_path", str(model), "--strategy", "RFT+GRPOO"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--strategy" in err and "RFT+GRPOO" in err and "Traceback" not in err
    assert not loop.exists()


def test_a_rounds_own_choices_are_read_from_its_plan(tmp_path):
    from ark_trainer.base.fileio import write_json

    assert rounds.plan_choices(tmp_path) is None  # no plan yet
    auto = {
        "model": "a real model: 134.5M parameters",
        "lora_r": {"value": 0, "reason": "0 (full fine-tuning): fits"},
    }
    write_json(
        tmp_path / "plan.json",
        {"auto_defaults": auto, "stages": [{"name": "rft", "steps": 8, "learning_rate": 2e-5}]},
    )
    lines = rounds.choice_lines(rounds.plan_choices(tmp_path))
    assert (
        lines[1] == "  --lora_r 0 (full fine-tuning): fits" and lines[2] == "  stages: rft 8 steps at 2e-05"
    )


def test_an_answer_cut_at_the_reply_limit_is_no_target():
    from ark_trainer.services.deploy.record import build_row
    from ark_trainer.services.loop import feedback

    first = build_row(
        {"messages": [{"role": "user", "content": "q"}]}, "a long answ", [], "round-0", 1, "length"
    )
    assert first["finish_reason"] == "length"
    thanks = build_row(
        {"messages": [*first["messages"], {"role": "user", "content": "谢谢"}]}, "ok", [], "", 2
    )
    out = rounds.scored_rows([first, thanks], [first], feedback.Rules(), None, False)
    assert out[0]["feedback"] == 1 and not out[0]["target"]  # approved, but a partial answer
    whole = {**first, "finish_reason": "stop"}
    out = rounds.scored_rows([whole, thanks], [whole], feedback.Rules(), None, False)
    assert out[0]["target"]


def test_a_rounds_expected_cost_comes_from_the_last_rounds_measured_times(tmp_path):
    from ark_trainer.base.fileio import write_jsonl

    assert "not measured yet" in rounds.expected_cost(tmp_path, [], 10, 2)
    events = [{"event": "stage_end", "stage": "rft", "seconds": 80.0},
              {"event": "stage_end", "stage": "eval_base", "seconds": 1.0},  # answered from the cache
              {"event": "stage_end", "stage": "eval_rft", "seconds": 20.0}]  # fmt: skip
    write_jsonl(tmp_path / "rounds" / "1" / "events.jsonl", events)
    history = [{"round": 1, "promoted": True, "n_eval": 10,
                "choices": {"stages": [{"name": "rft", "steps": 8, "learning_rate": 2e-5}]}}]  # fmt: skip
    said = rounds.expected_cost(tmp_path, history, 10, 2)
    # 80 s of training + (2 new rows for the served model + 10 for the candidate) × 2 s
    assert said.startswith(
        "expected to take about 1.7 min: 8 training steps at 10 s each, 12 evaluated rows at 2"
    )
    # the round's wall time beyond its stages (process start, loading, saving, the gate) is counted too; the
    # candidate's dev evaluation counts with its test one
    events.append({"event": "stage_end", "stage": "eval_rft_dev", "seconds": 20.0})
    write_jsonl(tmp_path / "rounds" / "1" / "events.jsonl", events)
    history[0].update(started_at="2026-12-07T10:00:00+00:00", decided_at="2026-12-07T10:03:00+00:00")
    said = rounds.expected_cost(tmp_path, history, 10, 2)
    # 80 s + 12 rows × 4 s + (180 − 80 − 40 − 1) s = 80 + 48 + 59 = 187 s
    assert said.startswith(
        "expected to take about 3.1 min: 8 training steps at 10 s each, 12 evaluated rows at 4 s"
    )
    assert "59 s of starting, loading, saving and deciding, as measured in round 1" in said


def test_the_correction_after_a_blank_answer_is_a_target():
    from ark_trainer.services.loop import feedback

    rows = conversation("订单1什么时候发货？", "", "不对，应该回答：明天发货。")
    out = rounds.scored_rows(rows, rows, feedback.Rules(), None, False)
    assert out[0]["reference"] == "明天发货。" and out[0]["target"]  # the blank answer's turn was recorded
    plain = conversation("订单2什么时候发货？", "", "谢谢")
    assert not rounds.scored_rows(plain, plain, feedback.Rules(), None, False)[0]["target"]  # blank: nothing


def test_the_frozen_rows_are_found_by_prompt_in_the_split_the_gate_reads(tmp_path):
    """The round's train divides eval.jsonl (frozen held-out rows, then the newest turns) by prompt hash,
    so heldout_reward_mean must pick the frozen rows by prompt, not by position."""
    from ark_trainer.base.fileio import write_json, write_jsonl
    from ark_trainer.core.runfolder import RunFolder
    from ark_trainer.services.loop import gate

    given = [{"prompt": f"held {i}"} for i in range(3)] + [{"prompt": f"newest {i}"} for i in range(2)]
    write_jsonl(tmp_path / "eval.jsonl", given)
    run = RunFolder(tmp_path)
    dev = [{"prompt": [{"role": "user", "content": t}]} for t in ("newest 1", "held 2", "held 0")]
    dev[1]["label"], dev[2]["label"] = "推诿", "无"  # the per-label test of the gate reads them in order
    write_jsonl(run.dev_rows_path, dev)
    run.dev_eval_path("base").parent.mkdir(parents=True)
    answers = [{"completion": "", "reward": r} for r in (0.0, 1.0, 0.5)]
    write_json(run.dev_eval_path("base"), {"reward_mean": 0.5, "answers": answers})
    flags = rounds.frozen_flags(tmp_path, 3)
    assert flags == [False, True, True]
    assert gate.with_heldout(run.dev_eval("base"), flags)["heldout_reward_mean"] == 0.75
    assert rounds.gate_labels(tmp_path) == [None, "推诿", "无"]
