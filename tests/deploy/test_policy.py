"""The serving policy: what a model is shown of an OpenClaw turn, by the prompt shape it was trained on.

The requests here are the recorded one (``ark_trainer/services/openclaw/openclaw_turn.json``: a real
``openclaw agent --local`` turn of the installed OpenClaw, captured at the server), so the rules are
checked on what OpenClaw really sends.
"""

from __future__ import annotations

import json

import pytest

from ark_trainer.services.deploy.policy import (
    PromptShape,
    apply_policy,
    read_shape,
    shape_for,
    shape_of_rows,
    system_prompt_seen,
    unwrap_request,
    write_shape,
)
from ark_trainer.services.openclaw.shape import load_shape, turn_request

QUESTION = "What is the capital of France?"


@pytest.fixture
def turn():
    return turn_request(load_shape(), QUESTION, "ark-x")


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


def test_the_reply_budget_is_the_trained_answer_length(tmp_path):
    from ark_trainer.services.deploy.policy import reply_budget

    # no record: the data's answers when known, else train's fallback; never a share of the window
    assert reply_budget(tmp_path, 8192) == 64 and reply_budget(tmp_path, 32768) == 64
    assert reply_budget(tmp_path, 8192, data_tokens=88) == 88
    write_shape(tmp_path, PromptShape("bare", None, "test", 96))
    assert reply_budget(tmp_path, 8192) == 96 and read_shape(tmp_path).reply_tokens == 96
    assert reply_budget(tmp_path, 128) == 64  # at most half the window


def test_a_client_asking_more_than_the_trained_reply_is_clamped():
    from ark_trainer.services.deploy.serve import reply_limit

    assert reply_limit(4096, 96, room=400) == 96  # OpenClaw's or a client's larger ask: the trained length
    assert reply_limit(40, 96, room=400) == 40  # a smaller ask is kept
    assert reply_limit(None, 96, room=400) == 96
    assert reply_limit(40, 96, room=400, fitted=True) == 96  # sized for a prompt the server cut
    assert reply_limit(4096, 96, room=30) == 30  # never past the window


def _prompt(system: str | None, user: str = "label this") -> list[dict]:
    head = [{"role": "system", "content": system}] if system is not None else []
    return [*head, {"role": "user", "content": user}]


def test_what_becomes_of_the_rows_system_prompt_is_said_for_every_model():
    """Kept where the server shows the very text the rows carry, else lost with the reason: a base model
    (no recorded shape), rows whose system prompts differ, a shape that shows OpenClaw's own."""
    desk = "You review support chats."
    rows = [_prompt(desk), _prompt(desk, "another")]
    trained = shape_of_rows([{"prompt": p} for p in rows], with_tools=False)
    assert trained.system_prompt == desk
    seen = system_prompt_seen(trained, rows)
    assert (seen["rows"], seen["kept"]) == (2, 2) and "shown in OpenClaw's system prompt's place" in seen[
        "note"
    ]
    shown, _ = apply_policy([{"role": "system", "content": "OpenClaw's"}, {"role": "user", "content": "x"}],
                            None, trained)  # fmt: skip
    assert shown[0] == {"role": "system", "content": desk}  # what the note promises, the server does
    base = shape_for("/nonexistent", 8192)  # no ark_prompt_shape.json: a base model deployed directly
    seen = system_prompt_seen(base, rows)
    assert (
        seen["kept"] == 0 and "lost on 2 of 2 rows" in seen["note"] and "records no training" in seen["note"]
    )
    mixed = [_prompt(desk), _prompt("Another desk's prompt.")]
    differing = shape_of_rows([{"prompt": p} for p in mixed], with_tools=False)
    assert differing.system_prompt is None
    assert "lost on 2 of 2 rows" in system_prompt_seen(differing, mixed)["note"]
    assert "lost on 1 of 2 rows" in system_prompt_seen(trained, mixed)["note"]
    assert "differs from the one the model was trained with" in system_prompt_seen(trained, mixed)["note"]
    full = PromptShape("openclaw", None, "loop --keep_system_prompt")
    assert "OpenClaw's own system prompt instead" in system_prompt_seen(full, rows)["note"]
    none = system_prompt_seen(trained, [_prompt(None)])
    assert none == {"rows": 0, "kept": 0, "note": "the rows carry no system prompt: none to lose"}
