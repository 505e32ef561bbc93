"""Agent episodes: the environment contract (``stages/agent/env.py``), its limits, the episode loop, and the env and
limits read from the YAML config too. (Episode graders: ``tests/rewards/test_episode.py``; the report:
``test_report.py``; RFT on episodes: ``test_rft.py``.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ark_trainer.base.chat.episode import view
from ark_trainer.base.errors import UserError
from ark_trainer.core.metrics import agent_metrics
from ark_trainer.stages.agent.env import Limits, limited_env_class, load_env
from ark_trainer.stages.agent.rollout import start, step
from ark_trainer.stages.registry import config_class
from tests.agent.calc_env import ENV_SOURCE, call, row

ROOT = Path(__file__).resolve().parents[2]
SHOP = ROOT / "examples" / "agent_env" / "shop_env.py"


def test_tools_run_within_the_limits_and_errors_reach_the_model(calc):
    ep = start(row(target=5), calc)
    step(ep, call("add", a=2, b=3) + call("boom") + call("slow") + call("essay"), last_turn=False)
    results = [m["content"] for m in ep.messages if m["role"] == "tool"]
    assert results[0] == "5"
    assert results[1] == "error: RuntimeError: the tool broke"
    assert results[2].startswith("error: slow took longer than 0.3s")
    assert results[3] == "x" * 20 + "… [cut: 80 more characters]"
    assert ep.env.tool_errors == 2 and ep.env.n_invalid == 0
    step(ep, "The answer is 5.", last_turn=False)
    assert ep.done and ep.ended == "answered" and ep.final_answer == "The answer is 5."
    record = ep.record()
    assert record["env_reward"] == 1.0 and record["turns"] == 2 and len(record["tool_calls"]) == 4


def test_unknown_tools_bad_arguments_and_malformed_calls_are_invalid(calc):
    ep = start(row(target=5), calc)
    step(
        ep,
        call("multiply", a=2)
        + call("add", a=2)
        + call("add", a=1, b=2, c=3)
        + "<tool_call>{oops</tool_call>",
        False,
    )
    results = [m["content"] for m in ep.messages if m["role"] == "tool"]
    assert results[0].startswith("error: no tool named 'multiply'")
    assert results[1].startswith("error: add needs the argument 'b'")
    assert results[2].startswith("error: add has no argument 'c'")
    assert results[3].startswith("error: malformed tool call")
    assert ep.env.n_invalid == 4 and ep.env.tool_errors == 0
    v = view(ep.completion, calc._spec.schemas)
    assert (v.attempts, v.n_valid, v.n_invalid) == (4, 0, 4)
    assert "<tool_call>\n{oops\n</tool_call>" in ep.messages[1]["content"]  # the text the model wrote stays


def test_the_last_turn_calls_no_tool_and_episode_metrics(calc):
    ep = start(row(target=5), calc)
    step(ep, call("add", a=2, b=3), last_turn=True)
    assert ep.done and ep.ended == "max_turns" and ep.env.calls == []
    good = start(row(target=5), calc)
    step(good, call("add", a=2, b=3), last_turn=False)
    step(good, "5", last_turn=False)
    views = [view(e.completion, calc._spec.schemas) for e in (ep, good)]
    metrics = agent_metrics(views, [ep.env._reward(), good.env._reward()])
    assert metrics == {
        "task_success": 0.5,
        "tool_call_validity": 1.0,
        "mean_turns": 1.5,
        "mean_tool_calls": 1.0,
        "n": 2,
    }


def test_plain_function_tools(tmp_path):
    path = tmp_path / "fns.py"
    path.write_text(
        'def mul(a: int, b: int) -> int:\n    """Multiply.\n\n    Args:\n        a: x\n        b: y\n    """\n'
        "    return a * b\n\ndef tools():\n    return [mul]\n"
    )
    cls = limited_env_class(load_env(f"{path}:tools"), Limits())
    env = cls()
    assert env.reset(prompt=[]) is None
    assert env.mul(a=3, b=4) == "12" and env._reward() is None
    from transformers.utils import get_json_schema

    assert get_json_schema(env.mul)["function"]["parameters"]["required"] == ["a", "b"]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("missing.py:make_env", "--env: no such file 'missing.py'"),
        ("{env}:nothing", "has no 'nothing'"),
        ("{env}:no_reset", "without reset(self, **row)"),
        ("{env}:no_tools", "the environment has no tools"),
        ("{env}:undocumented", "tool 'f':"),
        ("no_such_module_xyz:make", "--env: cannot import 'no_such_module_xyz'"),
        ("justaname", "--env: expected module:factory"),
    ],
)
def test_loading_errors_are_one_line(tmp_path, monkeypatch, source, message):
    path = tmp_path / "calc_env.py"
    path.write_text(ENV_SOURCE)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError) as exc:
        load_env(source.format(env=path))
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_the_documented_example_loads():
    spec = load_env(f"{SHOP}:make_env")
    assert sorted(spec.tools) == ["lookup_order", "refund_order"]
    env = limited_env_class(spec, Limits())()
    env.reset(prompt=[], order_id="A1", expected_status="shipped")
    assert env._reward() == 0.0
    assert env.lookup_order(order_id="A1") == "order A1: shipped" and env._reward() == 1.0


def test_env_and_limits_come_from_the_yaml_config_too(tmp_path):
    from ark_trainer.core.config import resolve_config

    config = tmp_path / "run.yaml"
    config.write_text(f"env: {SHOP}:make_env\nmax_turns: 3\ntool_timeout: 2.5\n")
    base = {"model_path": "m", "data_path": "d", "output_dir": "o", "config": str(config)}
    cfg = resolve_config(config_class(), base)
    assert (cfg.env, cfg.max_turns, cfg.tool_timeout, cfg.max_tool_output) == (
        f"{SHOP}:make_env",
        3,
        2.5,
        500,
    )
    with pytest.raises(UserError) as exc:
        resolve_config(config_class(), {**base, "max_turns": "0", "strategy": "auto"})
    assert exc.value.messages[0].startswith("--max_turns: ")
    with pytest.raises(UserError, match="--strategy: auto does not probe agent episodes"):
        resolve_config(config_class(), {**base, "strategy": "auto"})
