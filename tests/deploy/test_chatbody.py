"""The shape of a chat body (``services/deploy/chatbody.py``): a wrong body is one line naming the field, checked
before transformers sees the body; the bodies clients send pass.
"""

from __future__ import annotations

import pytest

from ark_trainer.services.deploy.chatbody import body_problem
from tests.deploy.chat_bodies import (
    BAD_BODIES,
    LOGIT_BIAS_BODIES,
    PAST_THE_VOCABULARY,
    USER,
    call_gate,
    encoded,
)

# the sampling parameters and tool fields transformers read without checking (HTTP 500 and a traceback in
# server.log), message shapes it failed on, and sizes that held the server for minutes
MORE_BAD_BODIES = [
    ({"messages": None}, "messages: expected a non-empty list of {role, content} messages, got null"),
    ({"messages": [[USER]]}, "messages[0]: expected an object with 'role' and 'content', got list"),
    ({"messages": [USER], "max_tokens": "lots"}, "max_tokens: expected an integer in [1, 2147483647], got string"),
    ({"messages": [USER], "max_completion_tokens": -5}, "max_completion_tokens: expected an integer in [1, 2147483647], got -5"),
    ({"messages": [USER], "temperature": "hot"}, "temperature: expected a number in [0, 2], got string"),
    ({"messages": [USER], "temperature": -1}, "temperature: expected a number in [0, 2], got -1"),
    ({"messages": [USER], "top_p": 5}, "top_p: expected a number in [0, 1], got 5"),
    ({"messages": [USER], "frequency_penalty": "x"}, "frequency_penalty: expected a number in [-2, 2], got string"),
    ({"messages": [USER], "presence_penalty": 9}, "presence_penalty: expected a number in [-2, 2], got 9"),
    ({"messages": [USER], "seed": "x"}, "seed: expected an integer in [-9223372036854775808, 9223372036854775807], got string"),
    ({"messages": [USER], "seed": 10**30}, "seed: expected an integer in [-9223372036854775808, 9223372036854775807], got 1000000000000000000000000000000"),
    ({"messages": [USER], "n": 1000000}, "n: expected an integer in [1, 128], got 1000000"),
    ({"messages": [USER], "n": "two"}, "n: expected an integer in [1, 128], got string"),
    ({"messages": [USER], "top_logprobs": 1000000}, "top_logprobs: expected an integer in [0, 20], got 1000000"),
    ({"messages": [USER], "stream": "yes"}, "stream: expected true or false, got string"),
    ({"messages": [USER], "logprobs": 1}, "logprobs: expected true or false, got number"),
    ({"messages": [USER], "stop": {"a": 1}}, "stop: expected text or a list of up to 4 texts, got object"),
    ({"messages": [USER], "stop": ["a"] * 5}, "stop: expected text or a list of up to 4 texts, got list"),
    ({"messages": [USER], "tools": "x"}, "tools: expected a list of {type: function, function: {name, ...}} objects, got string"),
    ({"messages": [USER], "tools": {"type": "function"}}, "tools: expected a list of {type: function, function: {name, ...}} objects, got object"),
    ({"messages": [USER], "tools": ["ls"]}, "tools[0]: expected a {type: function, function: {name, ...}} object, got string"),
    ({"messages": [USER], "tools": [{"type": "function", "function": "ls"}]}, "tools[0].function: expected an object with a name, got string"),
    ({"messages": [USER], "tool_choice": 5}, "tool_choice: expected none, auto, required or an object, got number"),
    ({"messages": [USER], "response_format": "json"}, "response_format: expected an object, got string"),
    ({"messages": [USER], "model": 5}, "model: expected text, got number"),
    ({"messages": [{"role": "user", "content": "hi", "name": {"a": 1}}]}, "messages[0].name: expected text, got object"),
    ({"messages": [USER, {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": "ls"}]}]},
     "messages[1].tool_calls[0].function: expected an object with a name and arguments (text), got string"),
    ({"messages": [USER, {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "ls", "arguments": {"p": 1}}}]}]},
     "messages[1].tool_calls[0].function: expected an object with a name and arguments (text), got object"),
    ({"messages": [{"role": "system", "content": "s"}]}, "messages: holds no user or assistant message; send the user's turn"),
    ({"messages": [USER] * 10_001}, "messages: 10001 messages; at most 10000 in one request"),
]  # fmt: skip
GOOD_BODIES = [
    {"messages": [USER]},
    {"model": "m", "stream": True, "messages": [{"role": "system", "content": "s"}, USER]},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "x"}}]}]},
    {"messages": [USER, {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function",
                  "function": {"name": "ls", "arguments": "{}"}}]}, {"role": "tool", "content": "ok", "tool_call_id": "c"}]},
    {"messages": [{"role": "developer", "content": "d"}, USER]},
    {"messages": [USER], "temperature": 0.7, "top_p": 0.9, "max_tokens": 64, "n": 1, "seed": 3, "stop": ["\\n"],
     "stream": True, "tools": [{"type": "function", "function": {"name": "ls", "parameters": {}}}], "tool_choice": "auto",
     "frequency_penalty": 0.5, "presence_penalty": -0.5, "logprobs": False, "response_format": {"type": "text"}, "model": "m"},
    {"messages": [{"role": "system", "content": "s"}, {"role": "assistant", "content": "hello"}]},
    {"messages": [USER], "logit_bias": {"50256": -100, "0": 100, "7": 0.5, "12": -3}},
]  # fmt: skip


@pytest.mark.parametrize(("body", "reason"), BAD_BODIES)
def test_a_wrong_body_is_one_line_naming_the_field(body, reason):
    problem = body_problem(encoded(body))
    assert problem is not None and problem.startswith(reason), problem
    assert "\n" not in problem


@pytest.mark.parametrize(("body", "reason"), MORE_BAD_BODIES)
def test_sampling_and_tool_fields_of_the_wrong_type_are_one_line(body, reason):
    problem = body_problem(encoded(body))
    assert problem == reason or (problem or "").startswith(reason), problem
    status, answer, reached = call_gate(encoded(body))
    assert status == 400 and reached is None and answer["error"]["message"] == problem


@pytest.mark.parametrize("body", GOOD_BODIES)
def test_right_bodies_pass(body):
    assert body_problem(encoded(body)) is None


@pytest.mark.parametrize(("body", "reason"), LOGIT_BIAS_BODIES)
def test_a_logit_bias_transformers_would_fail_on_is_a_400_in_one_line(body, reason):
    problem = body_problem(encoded(body))
    assert (problem or "").startswith(reason) and "\n" not in problem, problem
    status, answer, reached = call_gate(encoded(body))
    assert status == 400 and reached is None and answer["error"]["message"] == problem


def test_a_logit_bias_token_past_the_served_models_vocabulary_is_a_400(tmp_path):
    from ark_trainer.services.deploy.gate import config_vocab_size

    (tmp_path / "config.json").write_text('{"vocab_size": 49152}')
    vocab = config_vocab_size(tmp_path)
    assert vocab == 49152
    for body, reason in PAST_THE_VOCABULARY:
        problem = body_problem(encoded(body), vocab)
        assert (problem or "").startswith(reason) and "below the vocabulary size 49152" in problem, problem
        status, answer, reached = call_gate(encoded(body), vocab_size=vocab)
        assert status == 400 and reached is None and answer["error"]["message"] == problem
    assert body_problem(encoded({"messages": [USER], "logit_bias": {"49151": 5}}), vocab) is None
    for text in ("", "[1]", '{"vocab_size": "big"}', '{"vocab_size": -1}', '{"vocab_size": true}'):
        (tmp_path / "config.json").write_text(text)
        assert config_vocab_size(tmp_path) is None, text  # unknown: ids are checked against int32 only
    assert config_vocab_size(tmp_path / "missing") is None
