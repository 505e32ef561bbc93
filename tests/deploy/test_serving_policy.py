"""The serving policy: what a model is shown of an OpenClaw turn, by the prompt shape it was trained on.

The requests here are the recorded one (``ark_trainer/openclaw/openclaw_turn.json``: a real
``openclaw agent --local`` turn of the installed OpenClaw, captured at the server), so the rules are
checked on what OpenClaw really sends.
"""

from __future__ import annotations

import json

import pytest

from ark_trainer.deploy.policy import (
    PromptShape,
    apply_policy,
    read_shape,
    shape_for,
    shape_of_rows,
    unwrap_request,
    write_shape,
)
from ark_trainer.deploy.record import usage_of
from ark_trainer.openclaw.deploy import knobs_said, provider_patch
from ark_trainer.openclaw.parity import gap, openclaw_messages, table_lines
from ark_trainer.openclaw.shape import MARKER, load_shape, turn_request

QUESTION = "What is the capital of France?"


@pytest.fixture
def turn():
    return turn_request(load_shape(), QUESTION, "ark-x")


def test_the_shipped_request_is_a_real_openclaw_turn():
    shape = load_shape()
    body = shape["request"]
    assert shape["openclaw"].startswith("OpenClaw ") and shape["marker"] == MARKER
    system = body["messages"][0]
    assert system["role"] == "system" and "running inside OpenClaw" in system["content"]
    assert len(system["content"]) > 20_000 and len(body["tools"]) >= 10 and body["stream"] is True
    assert MARKER in body["messages"][1]["content"] and body["messages"][1]["content"].startswith("[")


def test_bare_shows_the_users_request_alone(turn):
    messages, tools = apply_policy(turn["messages"], turn["tools"], PromptShape("bare"))
    assert messages == [{"role": "user", "content": QUESTION}] and tools is None
    assert turn["messages"][0]["role"] == "system"  # the request itself is not changed


def test_bare_with_its_own_system_prompt_or_a_bounded_head(turn):
    own = PromptShape("bare", "You are a QC inspector.")
    messages, _ = apply_policy(turn["messages"], turn["tools"], own, system_chars=500)
    assert messages[0] == {"role": "system", "content": "You are a QC inspector."}
    messages, _ = apply_policy(turn["messages"], turn["tools"], PromptShape("bare"), system_chars=120)
    assert messages[0]["role"] == "system" and len(messages[0]["content"]) == 120
    assert messages[0]["content"] == turn["messages"][0]["content"][:120]


def test_tools_keeps_the_schemas_and_the_conversation(turn):
    call = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "ls", "arguments": "{}"}}],
    }
    result = {"role": "tool", "content": "AGENTS.md"}
    messages, tools = apply_policy([*turn["messages"], call, result], turn["tools"], PromptShape("tools"))
    assert tools == turn["tools"]
    assert messages == [{"role": "user", "content": QUESTION}, call, result]


def test_openclaw_turns_keep_the_wrapping_and_openclaw_keeps_everything(turn):
    messages, tools = apply_policy(turn["messages"], turn["tools"], PromptShape("openclaw-turns"))
    assert [m["role"] for m in messages] == ["user"] and tools is None
    assert messages[0]["content"].startswith("[") and "\n\nRuntime: agent=" in messages[0]["content"]
    assert apply_policy(turn["messages"], turn["tools"], PromptShape("openclaw")) == (
        turn["messages"],
        turn["tools"],
    )


def test_unwrap_removes_only_openclaws_wrapping():
    assert unwrap_request("[Tue 2026-12-01 20:01 UTC] hi [x]\n\nRuntime: agent=main | os=Linux") == "hi [x]"
    assert unwrap_request("[note] keep this") == "[note] keep this"
    assert unwrap_request("line\n\nRuntime: not ours") == "line\n\nRuntime: not ours"


def test_the_shape_of_training_prompts():
    bare = [{"prompt": [{"role": "user", "content": "客服：您好"}]}] * 3
    assert shape_of_rows(bare, with_tools=False).shape == "bare"
    assert shape_of_rows(bare, with_tools=True).shape == "tools"
    sys_rows = [{"prompt": [{"role": "system", "content": "S"}, {"role": "user", "content": "q"}]}] * 2
    assert shape_of_rows(sys_rows, False) == PromptShape("bare", "S", "2 training prompts: bare task prompts")
    wrapped = [
        {"prompt": [{"role": "user", "content": "[Tue 2026-12-01 20:01 UTC] q\n\nRuntime: agent=main"}]}
    ]
    assert shape_of_rows(wrapped * 3, False).shape == "openclaw-turns"
    with_system = [
        {
            "prompt": [
                {"role": "system", "content": "You are a personal assistant running inside OpenClaw."},
                *wrapped[0]["prompt"],
            ]
        }
    ]
    assert shape_of_rows(with_system * 3, False).shape == "openclaw"


def test_shape_for_a_model_folder(tmp_path):
    assert read_shape(tmp_path) is None
    assert shape_for(tmp_path, 8192).shape == "bare"  # no record, a window too small for OpenClaw's prompt
    assert shape_for(tmp_path, 32768).shape == "openclaw"
    write_shape(tmp_path, PromptShape("tools", "S", "test"))
    assert shape_for(tmp_path, 8192) == PromptShape("tools", "S", "test")
    assert shape_for(tmp_path, 8192, "openclaw").shape == "openclaw"
    assert json.loads((tmp_path / "ark_prompt_shape.json").read_text())["shape"] == "tools"


def test_the_provider_entry_carries_the_shapes_knobs_and_an_honest_budget():
    bare = provider_patch("m", 1, 8192, 512, None, "k", "bare")
    model = bare["models"]["providers"]["ark"]["models"][0]
    assert model["contextWindow"] == 8192 and model["maxTokens"] == 512 and model["contextTokens"] == 32768
    assert model["compat"] == {"supportsTools": False}
    assert bare["agents"]["defaults"]["contextInjection"] == "never"
    assert knobs_said(bare) == [
        "models.providers.ark.models[].contextTokens=32768",
        "models.providers.ark.models[].compat.supportsTools=false",
        'agents.defaults.contextInjection="never"',
    ]
    tools = provider_patch("m", 1, 512, 128, "work", "k", "tools")
    assert "compat" not in tools["models"]["providers"]["ark"]["models"][0]
    assert tools["agents"]["entries"]["work"] == {"model": {"primary": "ark/m"}, "contextInjection": "never"}
    whole = provider_patch("m", 1, 32768, 512, None, "k", "openclaw")
    assert "contextTokens" not in whole["models"]["providers"]["ark"]["models"][0]
    assert whole["agents"] == {"defaults": {"model": {"primary": "ark/m"}}} and knobs_said(whole) == []


def test_a_held_out_prompt_in_openclaws_request():
    shape = load_shape()
    prompt = [
        {"role": "system", "content": "own"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "answer"},
        {"role": "user", "content": "客服：您好"},
    ]
    body = openclaw_messages(shape, prompt, "ark-x")
    roles = [m["role"] for m in body["messages"]]
    assert roles[:4] == ["system", "user", "assistant", "user"] and body["model"] == "ark-x"
    assert (
        body["messages"][0]["content"] == shape["request"]["messages"][0]["content"]
    )  # OpenClaw's, not "own"
    assert (
        body["messages"][3]["content"].startswith("[")
        and "] 客服：您好\n\nRuntime:" in body["messages"][3]["content"]
    )
    assert MARKER not in json.dumps(body, ensure_ascii=False)


def test_the_gap_and_its_table():
    bare = {"n": 4, "task_accuracy": 0.75, "pass_rate": 0.5, "reward_mean": 0.4, "compliance_rate": None}
    through = {"n": 4, "task_accuracy": 0.5, "pass_rate": 0.5, "reward_mean": 0.3, "compliance_rate": 1.0}
    g = gap(through, bare)
    assert g["task_accuracy"] == -0.25 and g["pass_rate"] == 0 and g["compliance_rate"] is None
    lines = table_lines({**through, "name": "grpo-openclaw", "bare": bare, "gap": g})
    assert lines[1].split() == ["task_accuracy", "75.0%", "50.0%", "-25.0"]


def test_usage_of_a_streamed_and_a_plain_answer():
    sse = (
        b'data: {"choices": [{"delta": {"content": "hi"}, "finish_reason": null}]}\n\n'
        b'data: {"choices": [{"delta": {}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 9, "completion_tokens": 2}}\n\n'
        b"data: [DONE]\n\n"
    )
    assert usage_of(sse, True) == {"prompt_tokens": 9, "completion_tokens": 2, "finish_reason": "stop"}
    plain = json.dumps({"choices": [{"finish_reason": "length"}], "usage": {"completion_tokens": 5}}).encode()
    assert usage_of(plain, False) == {"completion_tokens": 5, "finish_reason": "length"}


def test_the_reply_budget_is_the_trained_answer_length(tmp_path):
    from ark_trainer.deploy.policy import reply_budget

    assert (
        reply_budget(tmp_path, 8192) == 512 and reply_budget(tmp_path, 512) == 128
    )  # a quarter, at most 512
    write_shape(tmp_path, PromptShape("bare", None, "test", 96))
    assert reply_budget(tmp_path, 8192) == 96 and read_shape(tmp_path).reply_tokens == 96
    assert reply_budget(tmp_path, 128) == 64  # at most half the window


def test_the_report_section_reads_the_served_policys_file_only(tmp_path):
    from ark_trainer.fileio import write_json
    from ark_trainer.report.parity import parity_blocks, parity_files
    from ark_trainer.report.render import Table, to_markdown

    bare = {"n": 2, "task_accuracy": 1.0, "pass_rate": 1.0, "reward_mean": 0.9}
    result = {**bare, "name": "grpo-openclaw", "bare": bare, "gap": gap(bare, bare)}
    write_json(tmp_path / "eval" / "grpo-openclaw.json", result)
    write_json(tmp_path / "eval" / "grpo-openclaw-as-openclaw.json", {**result, "name": "other"})
    assert [r["name"] for r in parity_files(tmp_path)] == ["grpo-openclaw"]
    blocks = parity_blocks(tmp_path)
    assert any(
        isinstance(b, Table) for b in blocks
    ) and "| task_accuracy | 100.0% | 100.0% | +0.0 |" in to_markdown(blocks)
