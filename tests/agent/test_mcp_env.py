"""MCP servers as episode tools, against real servers over stdio (no mock of the protocol).

``mcp-server-time`` (PyPI) is the third-party server; the agent demo's backend (``app/demo/agent_mcp_server.py``,
the SDK's ``MCPServer``) checks that MCP tools reach the model exactly as Python tools do; a small server
written here crashes and hangs on request, to check that the run goes on.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import pytest

from ark_trainer.base.errors import UserError
from ark_trainer.stages.agent.env import Limits, limited_env_class, load_env
from ark_trainer.stages.agent.rollout import start, step
from ark_trainer.stages.registry import config_class

ROOT = Path(__file__).resolve().parents[2]
SRC = str(ROOT / "src")
TIME_SERVER = shutil.which("mcp-server-time") or str(Path(sys.executable).parent / "mcp-server-time")
TIME = {"mcp_servers": {"time": {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"]}}}
SHOP = {
    "mcp_servers": {
        "shop": {
            "command": sys.executable,
            "args": ["-m", "ark_trainer.app.demo.agent_mcp_server"],
            "env": {"PYTHONPATH": SRC},
        }
    }
}
FLAKY = """
import os, sys, time
from mcp.server.mcpserver import MCPServer

server = MCPServer("flaky")

@server.tool(description="Echo the text back.")
def echo(text: str) -> str:
    return f"echo {text} from {os.getpid()}"

@server.tool(description="Exit the server process.")
def crash() -> str:
    os._exit(3)

@server.tool(description="Never answer.")
def hang() -> str:
    time.sleep(60)
    return "late"

server.run()
"""


def call(name: str, **args) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args}, ensure_ascii=False)}\n</tool_call>"


def row(**cols) -> dict:
    return {"prompt": [{"role": "user", "content": "hi"}], **cols}


@pytest.fixture(scope="module")
def time_spec():
    if not Path(TIME_SERVER).exists():
        pytest.fail("mcp-server-time is not installed (requirements-test.txt)")
    return load_env(TIME)


def test_time_server_tools_run_within_the_limits(time_spec):
    assert [s["function"]["name"] for s in time_spec.schemas] == ["get_current_time", "convert_time"]
    tz = time_spec.schemas[0]["function"]["parameters"]
    assert tz["required"] == ["timezone"] and tz["properties"]["timezone"]["type"] == "string"
    env_cls = limited_env_class(time_spec, Limits(max_turns=3, tool_timeout=5, max_tool_output=60))
    ep = start(row(), env_cls)
    text = call("get_current_time", timezone="Asia/Tokyo") + call("get_current_time", timezone="Mars/Base")
    step(ep, text + call("get_current_time"), last_turn=False)
    good, bad, missing = (m["content"] for m in ep.messages[2:])
    assert "Asia/Tokyo" in good and good.endswith(" more characters]")  # cut at 60 characters
    assert bad.startswith("error: ") and "Invalid timezo" in bad  # the server's own error answer
    assert missing == "error: get_current_time needs the argument 'timezone'; its arguments are timezone"
    assert (ep.env.tool_errors, ep.env.n_invalid) == (1, 1)
    assert ep.record()["env_reward"] is None  # no get_reward tool: graders score the episode


def test_graders_see_mcp_calls_like_any_tool_call(time_spec, tmp_path):
    from ark_trainer.rewards.builder import build_reward

    env_cls = limited_env_class(time_spec, Limits(max_turns=3))
    ep = start(row(timezone="Europe/Paris"), env_cls)
    step(ep, call("get_current_time", timezone="Europe/Paris"), last_turn=False)
    clock = json.loads(ep.messages[-1]["content"])["datetime"][11:16]
    step(ep, f"It is {clock} in Paris.", last_turn=False)
    spec = tmp_path / "graders.yaml"
    spec.write_text(
        "graders:\n"
        "  - {name: right_zone, type: tool_called, tool: get_current_time, args_from: {timezone: timezone}}\n"
        "  - {name: told_time, type: answer_from_tool, tool: get_current_time, field: datetime,"
        " pattern: 'T(\\d\\d:\\d\\d)'}\n"
        "  - {name: clean, type: no_invalid_calls}\n"
    )
    rows = [row(timezone="Europe/Paris"), row(timezone="Asia/Tokyo")]
    reward = build_reward({"env": TIME, "reward_config": str(spec)}, rows, "cpu")
    columns = {"timezone": [r["timezone"] for r in rows], "environments": [ep.env, ep.env]}
    scores = reward.score([r["prompt"] for r in rows], [ep.completion, ep.completion], **columns)
    assert scores["right_zone"] == [1.0, 0.0]  # Tokyo's row wanted another argument
    assert scores["told_time"] == [1.0, 1.0] and scores["clean"] == [1.0, 1.0]


def test_demo_backend_over_mcp_shows_the_python_schemas_and_keeps_episodes_apart():
    spec = load_env(SHOP)
    python = load_env("ark_trainer.app.demo.agent_env:make_env")
    assert spec.schemas == python.schemas  # the same dicts, so the chat template renders the same text
    env_cls = limited_env_class(spec, Limits(max_turns=4))
    refund = start(row(task="refund", order_id="A1", decoy_id=None, case_seed=3, issue=None), env_cls)
    status = start(row(task="status", order_id="B2", case_seed=1), env_cls)
    step(refund, call("lookup_order", order_id="A1"), last_turn=False)
    step(status, call("lookup_order", order_id="A1"), last_turn=False)  # not this episode's order
    assert (
        refund.messages[-1]["content"] == "A1：已签收，可退款"
        and status.messages[-1]["content"] == "无订单A1"
    )
    step(refund, call("refund_order", order_id="A1") + call("reply", message="已退款"), last_turn=False)
    assert refund.env._reward() == 1.0 and status.env._reward() == 0.0
    hidden = {s["function"]["name"] for s in spec.schemas}
    assert "reset" not in hidden and "get_reward" not in hidden


@pytest.mark.slow  # two restarts of a Python server: ~12 s on a busy 2-core machine
def test_a_server_that_crashes_or_hangs_is_restarted_and_the_run_goes_on(tmp_path):
    from ark_trainer.stages.agent.mcp_client import hub

    script = tmp_path / "flaky_server.py"
    script.write_text(FLAKY)
    spec = load_env({"mcp_servers": {"flaky": {"command": sys.executable, "args": [str(script)]}}})
    env_cls = limited_env_class(spec, Limits(max_turns=4, tool_timeout=2))
    ep = start(row(), env_cls)
    before = dict(hub().restarts)
    step(ep, call("echo", text="a") + call("crash") + call("echo", text="b"), last_turn=False)
    first, crashed, after = (m["content"] for m in ep.messages[2:])
    assert first.startswith("echo a from ") and after.startswith("echo b from ")
    assert crashed.startswith("error: MCP server 'flaky' failed:") and "restarted" in crashed
    assert first.split()[-1] != after.split()[-1]  # a new process answered
    step(ep, call("hang") + call("echo", text="c"), last_turn=False)
    hung, again = (m["content"] for m in ep.messages[-2:])
    assert hung == "error: MCP server 'flaky' failed: no answer within 2s; the server was restarted"
    assert again.startswith("echo c from ")
    assert ep.env.tool_errors == 2 and hub().restarts["flaky"] - before.get("flaky", 0) == 2


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            {"mcp_servers": {"gone": {"command": "/nonexistent/mcp-server"}}},
            "--env: MCP server 'gone' (/nonexistent/mcp-server) cannot start: FileNotFoundError",
        ),
        (
            {
                "mcp_servers": {
                    "quits": {"command": sys.executable, "args": ["-c", "import sys; sys.exit('no db')"]}
                }
            },
            "cannot start:",
        ),
        ({"mcp_servers": {"t": {"comand": "x"}}}, "--env: mcp_servers: t: comand: unknown key"),
        ({"mcp_servers": {"t": {"url": "https://x/mcp"}}}, "--env: mcp_servers: t: no command"),
        ({"servers": {}}, "--env: mcp_servers: no MCP servers; give mcp_servers:"),
        ("mcp:missing.json", "--env: no such file 'missing.json'"),
    ],
)
def test_bad_servers_are_refused_in_one_line(source, message):
    with pytest.raises(UserError) as err:
        load_env(source)
    assert len(err.value.messages) == 1 and message in err.value.messages[0], err.value.messages


def test_servers_from_a_file_and_from_the_yaml_config(tmp_path):
    from ark_trainer.core.config import load_yaml_config

    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcp": {"servers": TIME["mcp_servers"]}}))  # OpenClaw's own shape
    assert [s["function"]["name"] for s in load_env(f"mcp:{servers}").schemas][0] == "get_current_time"
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        f"env:\n  mcp_servers:\n    time: {{command: {TIME_SERVER}, args: [--local-timezone, UTC]}}\n"
    )
    assert load_yaml_config(config_class(), str(cfg))["env"] == TIME
    cfg.write_text("env:\n  mcp_servers:\n    time: {command: x, args: oops}\n")
    with pytest.raises(UserError) as err:
        load_yaml_config(config_class(), str(cfg))
    assert err.value.messages == [f"{cfg}: env: mcp_servers: time: args: expected a list of strings"]


HOSTILE = """
import os, sys
from mcp.server.mcpserver import MCPServer

server = MCPServer("hostile")
mode = os.environ["MODE"]

def echo(text: str) -> str:
    return text

if mode == "names":
    for name in os.environ["NAMES"].split(","):
        server.add_tool(echo, name=name, description="Echo.")
elif mode == "many":
    for i in range(int(os.environ["COUNT"])):
        server.add_tool(echo, name=f"t{i}", description="Echo.")
elif mode == "long":
    server.add_tool(echo, name="echo", description="x" * 20_000)
else:
    server.add_tool(echo, name="echo", description="Echo.")

@server.tool(description="Start an episode.")
def reset() -> str:
    return "R" * int(os.environ.get("RESET_CHARS", "10"))

server.run()
"""


def _hostile(tmp_path: Path, **env: str) -> dict:
    script = tmp_path / "hostile.py"
    script.write_text(HOSTILE, encoding="utf-8")
    return {"mcp_servers": {"h": {"command": sys.executable, "args": [str(script)], "env": env}}}


def test_a_huge_reset_result_is_cut_like_any_tool_output(tmp_path):
    spec = load_env(_hostile(tmp_path, MODE="plain", RESET_CHARS=str(2_000_000)))
    for cap in (500, 37):
        env = limited_env_class(spec, Limits(max_turns=2, tool_timeout=30, max_tool_output=cap))()
        text = env.reset(**row())
        assert text.startswith("R" * cap) and len(text) < cap + 60 and "[cut: " in text, text[-80:]


@pytest.mark.parametrize("names", ["_call", "__init__", "episode,timeout", "calls", "get_reward_x,_tool"])
def test_a_tool_named_like_the_wrappers_own_is_refused_before_any_write(tmp_path, names):
    with pytest.raises(UserError) as err:
        load_env(_hostile(tmp_path, MODE="names", NAMES=names))
    bad = [n for n in names.split(",") if n.startswith("_") or n in ("episode", "timeout", "calls")]
    assert len(err.value.messages) == len(bad), err.value.messages
    for name, line in zip(bad, err.value.messages, strict=True):
        assert f"tool {name!r}" in line and f"toolFilter: {{exclude: [{name}]}}" in line, line


def test_too_many_or_too_long_tools_are_refused(tmp_path, monkeypatch):
    from ark_trainer.stages.agent import mcp_client
    from ark_trainer.stages.agent.tools import MAX_TOOLS

    with pytest.raises(UserError) as err:
        load_env(_hostile(tmp_path, MODE="many", COUNT=str(MAX_TOOLS + 5)))
    assert err.value.messages == [
        f"--env: the MCP servers show {MAX_TOOLS + 5} tools; a model is shown at most {MAX_TOOLS} (each one is "
        "in every prompt): hide some with toolFilter: {include: [...]} or {exclude: [...]}"
    ]
    monkeypatch.setattr(mcp_client, "MAX_LISTED_TOOLS", 40)  # as 20,000 tools would, with fewer to list
    with pytest.raises(UserError) as err:
        load_env(_hostile(tmp_path, MODE="many", COUNT="60"))
    assert "cannot start: it lists more than 40 tools" in err.value.messages[0], err.value.messages
    with pytest.raises(UserError) as err:
        load_env(_hostile(tmp_path, MODE="long"))
    assert "tool 'echo': its description and schema take" in err.value.messages[0], err.value.messages


@pytest.mark.parametrize(
    "noise", ["print('garbage line', flush=True)", 'print(\'{"not": "json-rpc"}\', flush=True)']
)
def test_a_server_that_prints_garbage_is_one_line_without_sdk_tracebacks(tmp_path, capfd, noise):
    script = tmp_path / "noisy.py"
    # it never answers, and ends when its stdin closes (as the SDK's shutdown asks first)
    script.write_text(f"import sys\nfor _ in range(200):\n    {noise}\nsys.stdin.read()\n", encoding="utf-8")
    source = {
        "mcp_servers": {"n": {"command": sys.executable, "args": [str(script)], "connectionTimeoutMs": 3000}}
    }
    started = time.monotonic()
    with pytest.raises(UserError) as err:
        load_env(source)
    # its 3 s, then the server is stopped at once (not after STOP_TIMEOUT + 5 s waiting on a session that never
    # opened)
    assert time.monotonic() - started < 8
    [line] = err.value.messages
    assert "cannot start" in line and "not JSON-RPC on stdout" in line, line
    out, errout = capfd.readouterr()
    assert "Traceback" not in errout and "Failed to parse" not in errout, errout[:500]


def test_the_reserved_names_cover_both_wrappers():
    from ark_trainer.stages.agent.env import ToolEnv
    from ark_trainer.stages.agent.mcp_env import McpEnvironment
    from ark_trainer.stages.agent.tools import WRAPPER_NAMES, EnvSpec

    spec = EnvSpec("x", lambda: [], {}, [], False, "Tools")
    tool_env = type("T", (ToolEnv,), {"_spec": spec, "_limits": Limits()})()
    public = {n for obj in (tool_env, McpEnvironment()) for n in dir(obj) if not n.startswith("_")}
    assert public <= WRAPPER_NAMES, public - WRAPPER_NAMES


@pytest.mark.parametrize("name", ["_private", "calls"])
def test_a_python_tool_named_like_the_wrappers_own_is_refused(tmp_path, name):
    module = tmp_path / f"envmod_{name.strip('_')}.py"
    module.write_text(
        f"def {name}(text: str) -> str:\n    '''Echo.\n\n    Args:\n        text: the text\n    '''\n    return text\n\n"
        f"def tools():\n    return [{name}]\n",
        encoding="utf-8",
    )
    with pytest.raises(UserError) as err:
        load_env(f"{module}:tools")
    assert f"tool {name!r}" in err.value.messages[0] and "rename it" in err.value.messages[0]
