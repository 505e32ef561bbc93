"""Agent episodes: the environment contract, its limits, the episode loop, episode graders, agent eval."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ark_trainer.agent.env import Limits, ToolEnv, limited_env_class, load_env
from ark_trainer.agent.rollout import start, step
from ark_trainer.chat.episode import view
from ark_trainer.errors import UserError
from ark_trainer.metrics import agent_metrics

ROOT = Path(__file__).resolve().parents[2]
SHOP = ROOT / "examples" / "agent_env" / "shop_env.py"

ENV_SOURCE = '''
import time

class Calc:
    def reset(self, target=None, **row):
        self.target, self.said = target, None

    def add(self, a: int, b: int) -> int:
        """Add two numbers.

        Args:
            a: The first number.
            b: The second number.
        """
        self.said = a + b
        return a + b

    def boom(self) -> str:
        """Always fails."""
        raise RuntimeError("the tool broke")

    def slow(self) -> str:
        """Takes too long."""
        time.sleep(2)
        return "late"

    def essay(self) -> str:
        """A long text."""
        return "x" * 100

    def get_reward(self) -> float:
        return 1.0 if self.said == self.target else 0.0

def make_env():
    return Calc()

def no_reset():
    return object()

class Bare:
    def reset(self, **row):
        pass

def no_tools():
    return Bare()

def undocumented():
    def f(x):
        return x
    return [f]
'''


@pytest.fixture
def calc(tmp_path) -> type[ToolEnv]:
    path = tmp_path / "calc_env.py"
    path.write_text(ENV_SOURCE)
    return limited_env_class(
        load_env(f"{path}:make_env"), Limits(max_turns=3, tool_timeout=0.3, max_tool_output=20)
    )


def call(name: str, **args) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


def row(**cols) -> dict:
    return {"prompt": [{"role": "user", "content": "add 2 and 3"}], **cols}


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


GRADERS = """graders:
  - name: looked_up
    type: tool_called
    tool: add
    args_from: {a: first}
    args: {b: 3}
  - name: clean
    type: no_invalid_calls
    weight: 0.5
  - name: quick
    type: max_turns
    turns: 2
    weight: 0.5
  - name: says_five
    type: string_check
    reference: "5"
    operation: like
"""


def test_episode_graders_see_calls_turns_and_the_final_answer(calc, tmp_path):
    from ark_trainer.rewards.composite import CompositeReward

    spec = tmp_path / "graders.yaml"
    spec.write_text(GRADERS)
    reward = CompositeReward.from_spec(spec)
    good = start(row(target=5, first=2), calc)
    step(good, call("add", a=2, b=3), False)
    step(good, "It is 5.", False)
    wrong = start(row(target=5, first=2), calc)
    step(wrong, call("add", a=1, b=3) + "<tool_call>nope</tool_call>", False)
    step(wrong, call("add", a=1, b=3), False)
    step(wrong, "It is 4.", False)
    no_column = start(row(target=5), calc)
    step(no_column, "5", False)
    eps = [good, wrong, no_column]
    columns = {"first": [2, 2, None], "environments": [e.env for e in eps]}
    table = reward.score([e.row["prompt"] for e in eps], [e.completion for e in eps], **columns)
    assert table["looked_up"] == [1.0, 0.0, None]
    assert table["clean"] == [1.0, 0.0, 1.0]
    assert table["quick"] == [1.0, 0.0, 1.0]
    assert table["says_five"] == [1.0, 0.0, 1.0]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("type: tool_called", "graders.yaml:2: tool: missing"),
        ("type: max_turns\n    turns: 0", "graders.yaml:4: turns: expected a number ≥ 1"),
        (
            "type: tool_called\n    tool: add\n    args_from: {a: 3}",
            "graders.yaml:5: args_from: a: expected a column name",
        ),
        (
            "type: no_invalid_calls\n    turns: 2",
            "graders.yaml:4: turns: unknown key for a no_invalid_calls grader",
        ),
    ],
)
def test_episode_grader_spec_errors_name_file_and_line(tmp_path, entry, message):
    from ark_trainer.rewards.spec import load_graders

    spec = tmp_path / "graders.yaml"
    spec.write_text(f"graders:\n  - name: g\n    {entry}\n")
    with pytest.raises(UserError) as exc:
        load_graders(spec)
    assert message in str(exc.value)


def test_score_dry_run_reads_tool_calls_from_text(tmp_path, capsys):
    from ark_trainer.cli import main

    spec = tmp_path / "graders.yaml"
    spec.write_text(
        "graders:\n  - name: looked_up\n    type: tool_called\n    tool: add\n    args_from: {a: first}\n"
    )
    data = tmp_path / "data.jsonl"
    rows = [
        {"prompt": "add 2 and 3", "first": 2, "completion": call("add", a=2, b=3)},
        {"prompt": "add 2 and 3", "first": 2, "completion": call("add", a=7, b=3)},
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["score", "--data_path", str(data), "--reward_config", str(spec), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["graders"]["looked_up"]["mean"] == 0.5


def test_the_report_shows_agent_metrics_and_episodes_before_and_after(calc, tmp_path):
    from ark_trainer.fileio import write_json
    from ark_trainer.report import build_report

    def played(answer: str, args: dict) -> dict:
        ep = start(row(target=5), calc)
        step(ep, call("add", **args), False)
        step(ep, answer, False)
        return ep.record()

    base = {"n": 2, "reward_mean": 0.0, "task_success": 0.0, "tool_call_validity": 0.5, "mean_turns": 2.0}
    base["episodes"] = [played("It is 4.", {"a": 1, "b": 3})]
    final = {"n": 2, "reward_mean": 1.0, "task_success": 1.0, "tool_call_validity": 1.0, "mean_turns": 2.0}
    final["episodes"] = [played("It is 5.", {"a": 2, "b": 3})]
    write_json(tmp_path / "eval" / "base.json", base)
    write_json(tmp_path / "eval" / "grpo.json", final)
    (tmp_path / "run.yaml").write_text("strategy: GRPO\n")
    md = build_report(tmp_path)[0].read_text()
    assert "| task_success | 0.0% | 100.0% (+100.0 pts" in md
    assert "| tool_call_validity | 50.0% | 100.0% (+50.0 pts" in md
    assert "Task success, final (GRPO) vs base: 0.0% → 100.0% (+100.0 pts)." in md
    section = md[md.index("## Agent episodes") :]
    assert section.index('→ add({"a": 1, "b": 3})') < section.index('→ add({"a": 2, "b": 3})')
    assert "← add: 4" in section and "assistant: It is 5." in section
    assert "GRPO: 2 turns, 1 tool calls, env reward 1" in section


def test_env_and_limits_come_from_the_yaml_config_too(tmp_path):
    from ark_trainer.config import resolve_config

    config = tmp_path / "run.yaml"
    config.write_text(f"env: {SHOP}:make_env\nmax_turns: 3\ntool_timeout: 2.5\n")
    base = {"model_path": "m", "data_path": "d", "output_dir": "o", "config": str(config)}
    cfg = resolve_config(base)
    assert (cfg.env, cfg.max_turns, cfg.tool_timeout, cfg.max_tool_output) == (
        f"{SHOP}:make_env",
        3,
        2.5,
        500,
    )
    with pytest.raises(UserError) as exc:
        resolve_config({**base, "max_turns": "0", "strategy": "auto"})
    assert exc.value.messages[0].startswith("--max_turns: ")
    with pytest.raises(UserError, match="--strategy: auto does not probe agent episodes"):
        resolve_config({**base, "strategy": "auto"})


def test_rft_trains_on_the_assistant_turns_only(calc):
    from ark_trainer.agent.rft import tokenized_episodes
    from ark_trainer.agent.toolcall import AGENT_CHAT_TEMPLATE
    from ark_trainer.demo.model import train_tokenizer

    tok = train_tokenizer(["add the numbers", call("add", a=2, b=3), "It is 5."], vocab_size=300)
    tok.chat_template = AGENT_CHAT_TEMPLATE
    ep = start(row(target=5), calc)
    step(ep, call("add", a=2, b=3), False)
    step(ep, "It is 5.", False)
    [item] = tokenized_episodes(tok, [{"messages": ep.messages, "tools": calc._spec.schemas}])
    learnt = tok.decode([t for t, m in zip(item["input_ids"], item["assistant_masks"], strict=True) if m])
    assert learnt == call("add", a=2, b=3) + "<|im_end|>It is 5.<|im_end|>"  # no prompt, no tool result
