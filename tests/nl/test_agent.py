""" "The current agent" from OpenClaw's state, and an OpenClaw agent driving plan/run.

Unit tests write OpenClaw's config and ark-trainer's deployment registry by hand; the slow tests use the
real OpenClaw CLI: a tiny model is deployed with ``ark-trainer deploy``, the agent "has had"
conversations (transcripts written in OpenClaw's session-file format), and the reference's own sentence
trains that model on them.

Run: PYTHONPATH=src python -m pytest tests/nl/test_agent.py -q
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

import ark_trainer
from ark_trainer.base.fileio import write_json
from ark_trainer.cli import main
from ark_trainer.services.nl.plan import plan_request
from tests.openai_stub import _chunk

REQUEST = "对当前客服质检Agent执行RFT+GRPO训练，优化合规性与用户满意度"
TINY = {
    "max_train_steps": 2,
    "rft_steps": 1,
    "batch_size": 4,
    "num_generations": 4,
    "max_completion_length": 8,
    "rft_num_samples": 2,
    "eval_auto": False,
    "logging_steps": 1,
    "save_steps": 1,
}
TURNS = [
    ("你们的快递怎么还没到？", "非常抱歉让您久等了，我马上为您查询物流。"),
    ("退款什么时候到账", "抱歉给您添麻烦了，退款会在3个工作日内到账，我帮您跟进。"),
    ("我要投诉你们客服态度差", "非常抱歉，我们会立即处理您的投诉，请问订单号是多少？"),
]


def _state() -> Path:
    return Path(os.environ["OPENCLAW_STATE_DIR"])


def _config(primary: str) -> Path:
    path = _state() / "openclaw.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"agents": {"defaults": {"model": {"primary": primary}}}}))
    return path


def _fake_deployment(tmp_path: Path) -> Path:
    """A registry record as `ark-trainer deploy` leaves it, for a run folder holding a model."""
    out = tmp_path / "deployed"
    (out / "model").mkdir(parents=True)
    (out / "model" / "config.json").write_text("{}")
    record = {"state": "deployed", "out": str(out), "model_ref": "ark/ark-deployed", "name": "ark-deployed"}
    write_json(_state() / "ark-trainer" / "deployments.json", [record])
    _config("ark/ark-deployed")
    return out


def write_transcripts(agent: str = "main") -> None:
    """Conversations in OpenClaw's session-file format (a session header, then one entry per line)."""
    folder = _state() / "agents" / agent / "sessions"
    folder.mkdir(parents=True, exist_ok=True)
    for i, (user, reply) in enumerate(TURNS):
        entries = [{"type": "session", "id": f"chat-{i}", "timestamp": "2026-11-30T10:00:00Z"}]
        for n, (role, text) in enumerate((("user", user), ("assistant", reply))):
            message = {"role": role, "content": [{"type": "text", "text": text}], "timestamp": 1764496800000}
            entries.append(
                {"type": "message", "id": f"m{n}", "parentId": f"m{n - 1}" if n else None, "message": message}
            )
        (folder / f"chat-{i}.jsonl").write_text(
            "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries)
        )


def test_the_current_agent_gives_model_data_and_label_free_rewards(tmp_path):
    out = _fake_deployment(tmp_path)
    plan = plan_request(REQUEST, {"output_dir": str(tmp_path / "run")})
    assert plan.missing == [] and plan.collect_agent == "main"
    assert plan.cfg.model_path == str(out / "model")
    assert plan.cfg.data_path == str(tmp_path / "run" / "data" / "openclaw_conversations.jsonl")
    assert plan.cfg.reward_config.endswith("conversations.yaml")
    assert plan.cfg.reward_weights == "qc_compliance=1,qc_satisfaction=1"
    said = "\n".join(plan.assumptions)
    assert "ark/ark-deployed" in said and "agents.defaults.model.primary" in said and str(out) in said
    assert "conversations, collected when the run starts" in said and "scrubbed" in said


def test_an_agent_on_a_hosted_model_says_a_checkpoint_is_needed(capsys):
    _config("openai/gpt-5.1")
    assert main(["plan", REQUEST, "--json"]) == 0  # never a dead end
    shown = json.loads(capsys.readouterr().out)
    assert shown["ready"] is False and len(shown["missing"]) == 1
    line = shown["missing"][0]
    assert line.startswith("--model_path:") and "openai/gpt-5.1" in line and "local checkpoint" in line
    assert main(["run", REQUEST, "--yes"]) == 2  # run refuses, one line per missing item
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not started: --model_path" in err[0] and "Traceback" not in err[0]


def test_plan_without_anything_marks_both_and_run_names_both(capsys):
    assert main(["plan", "RFT+GRPO 五千步"]) == 0
    text = capsys.readouterr().out
    assert "# MISSING --model_path" in text and "# MISSING --data_path" in text
    assert yaml.safe_load(text)["max_train_steps"] == 5000
    assert main(["run", "RFT+GRPO 五千步", "--yes"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert [line.split("run: not started: ")[1].split(":")[0] for line in err] == [
        "--model_path",
        "--data_path",
    ]


def test_collected_rows_are_graded_by_the_conversations_preset():
    from ark_trainer.rewards.applies import check_applies
    from ark_trainer.rewards.composite import CompositeReward, preset_path

    reward = CompositeReward.from_spec(str(preset_path("conversations")), [])
    rows = [{"prompt": [{"role": "user", "content": u}], "candidates": [r]} for u, r in TURNS]
    assert check_applies(reward, rows, "test") == ["qc_compliance", "qc_satisfaction"]


@pytest.mark.slow
def test_the_reference_sentence_trains_the_deployed_model_on_its_conversations(openclaw, tmp_path, capsys):
    """The whole flow with the real CLI: deploy → conversations → the sentence → a trained model."""
    import torch

    from ark_trainer.base.fileio import read_json
    from ark_trainer.core.folders import claim_folder
    from tests.conftest import save_tiny_qwen

    deployed = claim_folder(tmp_path / "demo")  # a run of ours: deploy writes its deploy/ inside it
    torch.manual_seed(
        0
    )  # a random model may greedily repeat a special token, which the smoke request refuses
    save_tiny_qwen(deployed / "model", texts=[t for pair in TURNS for t in pair], max_position_embeddings=512)
    _state().mkdir(parents=True, exist_ok=True)
    assert main(["deploy", str(deployed)]) == 0
    try:
        record = read_json(deployed / "deploy" / "deploy.json")
        write_transcripts("main")
        config = tmp_path / "tiny.yaml"
        config.write_text(yaml.safe_dump(TINY))
        out = tmp_path / "run"
        capsys.readouterr()
        assert main(["run", REQUEST, "--yes", "--config", str(config), "--output_dir", str(out)]) == 0
        printed = capsys.readouterr().out
        assert f"{record['model_ref']}" in printed and "agents.defaults.model.primary" in printed
        assert "collected 3 rows from agent main" in printed
        data = out / "data" / "openclaw_conversations.jsonl"
        assert len(data.read_text().splitlines()) == 3
        plan = read_json(out / "plan.json")
        # the objectives' graders, weighted 1 each (the preset says 0.5)
        assert plan["rewards"]["graders"] == {"qc_compliance": 1.0, "qc_satisfaction": 1.0}
        run = yaml.safe_load((out / "run.yaml").read_text())
        assert run["model_path"] == str(deployed / "model") and run["data_path"] == str(data)
        assert (out / "model" / "config.json").is_file()
    finally:
        assert main(["deploy", "--rollback"]) == 0


class _ScriptedAgentModel(BaseHTTPRequestHandler):
    """An OpenAI-compatible model that follows SKILL.md: ``plan --json``, then ``run --yes``, then a reply.

    Streams (SSE) as OpenClaw asks; the step is the number of tool results in the conversation so far.
    """

    server: ThreadingHTTPServer

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        self.server.requests.append(body)
        done = sum(m.get("role") == "tool" for m in body["messages"])
        first = next(_text(m) for m in body["messages"] if m.get("role") == "user")
        # OpenClaw sends "[Tue 2026-12-01 01:37 UTC] <the user's words>\n\nRuntime: …"
        words = re.sub(r"^\[[^\]]*\]\s*", "", first.strip().splitlines()[0])
        extra = self.server.extra
        commands = [
            f"ark-trainer plan {shlex.quote(words)} --json {extra}",
            f"ark-trainer run {shlex.quote(words)} --yes {extra}",
        ]
        if done < len(commands):
            args = {"command": commands[done], "yieldMs": 240000, "timeoutSeconds": 300}
            call = {"index": 0, "id": f"call_{done}", "type": "function"}
            call["function"] = {"name": "exec", "arguments": json.dumps(args)}
            deltas = [({"role": "assistant", "tool_calls": [call]}, None), ({}, "tool_calls")]
        else:
            deltas = [({"role": "assistant", "content": "训练已开始。"}, None), ({}, "stop")]
        data = b"".join(_chunk(body.get("model", "m"), d, f) for d, f in deltas) + b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


@pytest.mark.slow
def test_an_openclaw_agent_plans_and_starts_a_run_through_the_skill(openclaw, tmp_path, monkeypatch):
    """A real ``openclaw agent --local`` turn: the scripted model calls exec with plan, then run --yes."""
    from ark_trainer.app.demo.data import write_demo_data
    from tests.conftest import save_tiny_qwen

    train, _ = write_demo_data(tmp_path / "data", n_train=8, n_eval=2, seed=3)
    model = save_tiny_qwen(tmp_path / "base", max_position_embeddings=1024)
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump({**TINY, "strategy": "Only GRPO"}))
    out = tmp_path / "run"
    # OpenClaw's exec tool drops PYTHONPATH, so `ark-trainer` on PATH is a shim for the package under test
    bindir = tmp_path / "bin"
    bindir.mkdir()
    src = Path(ark_trainer.__file__).resolve().parents[1]
    shim = bindir / "ark-trainer"
    shim.write_text(f'#!/bin/sh\nPYTHONPATH={src} exec {sys.executable} -m ark_trainer "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    skill = (Path(ark_trainer.__file__).parent / "services" / "openclaw" / "skill" / "SKILL.md").read_text()
    assert 'ark-trainer plan "<the user\'s words, verbatim>" --json' in skill
    assert 'ark-trainer run "<the user\'s words, verbatim>" --yes' in skill
    assert main(["skill", "install"]) == 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ScriptedAgentModel)
    server.requests, server.extra = [], f"--config {shlex.quote(str(config))}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    provider = {"baseUrl": url, "apiKey": "k", "api": "openai-completions"}
    provider["models"] = [{"id": "script", "name": "script", "contextWindow": 32768, "maxTokens": 256}]
    state = _state()
    state.mkdir(parents=True, exist_ok=True)
    (state / "openclaw.json").write_text(
        json.dumps(
            {
                "models": {"providers": {"scripted": provider}},
                "agents": {"defaults": {"model": {"primary": "scripted/script"}}},
            }
        )
    )
    words = f"只做GRPO，用 {train} 训练 {model}，输出到 {out}"
    try:
        answer = openclaw.run_json(
            ["agent", "--local", "--json", "--timeout", "400", "--message", words], timeout=480
        )
    finally:
        server.shutdown()
    assert [t["function"]["name"] for t in server.requests[0]["tools"] if t["function"]["name"] == "exec"]
    assert "ark-trainer" in json.dumps(server.requests[0]["messages"][0], ensure_ascii=False)  # the skill
    plan_result = _text([m for m in server.requests[1]["messages"] if m.get("role") == "tool"][-1])
    assert '"strategy": "GRPO"' in plan_result and f'"output_dir": "{out}"' in plan_result
    assert (out / "run.yaml").is_file()  # the run started
    run_result = _text([m for m in server.requests[2]["messages"] if m.get("role") == "tool"][-1])
    assert f"done: model in {out / 'model'}" in run_result  # and, with 2 steps, finished
    assert yaml.safe_load((out / "run.yaml").read_text())["model_path"] == str(model)
    assert answer["meta"]["agentMeta"]["terminalReceipt"] or answer["payloads"]


def test_an_agent_named_by_id_uses_its_own_model(tmp_path):
    out = _fake_deployment(tmp_path)
    config = {
        "agents": {
            "defaults": {"model": {"primary": "openai/gpt-5.1"}},
            "list": [{"id": "main", "default": True}, {"id": "qc-bot", "model": "ark/ark-deployed"}],
        }
    }
    (_state() / "openclaw.json").write_text(json.dumps(config))
    plan = plan_request("agent qc-bot, only GRPO, 优化合规性", {"output_dir": str(tmp_path / "r")})
    assert plan.collect_agent == "qc-bot" and plan.cfg.model_path == str(out / "model")
    assert any("agent qc-bot's model" in a for a in plan.assumptions)
    plan = plan_request("对当前Agent做两阶段训练", {"output_dir": str(tmp_path / "r")})
    assert plan.collect_agent == "main" and "openai/gpt-5.1" in plan.missing[0]


def test_run_keeps_conversations_collected_earlier(tmp_path, capsys):
    _fake_deployment(tmp_path)  # its "model" is not loadable, so the run stops after the collect step
    from ark_trainer.core.folders import claim_folder

    claim_folder(tmp_path / "run")  # the earlier run made the folder (and marked it ours)
    data = tmp_path / "run" / "data" / "openclaw_conversations.jsonl"
    data.parent.mkdir(parents=True)
    data.write_text('{"prompt": "earlier", "candidates": ["kept"]}\n')
    before = data.read_bytes()
    assert main(["run", REQUEST, "--yes", "--output_dir", str(tmp_path / "run")]) == 2
    assert "using the conversations collected earlier" in capsys.readouterr().out
    assert data.read_bytes() == before
