"""The whole loop with the real OpenClaw CLI: train → deploy → agent turn → collect → rollback.

A tiny demo model is trained with ``--openclaw_env True``, which deploys it at the end (``transformers
serve`` on 127.0.0.1 + ``openclaw config patch``). A real embedded agent turn (``openclaw agent --local``)
must be answered by our provider; a second turn on a scripted stub provider (tests/openai_stub.py)
makes a tool call; a legacy transcript is written from a real export. ``data collect`` must bring all
three back, scrubbed, in a file ``train`` accepts; ``deploy --rollback`` must restore the hand-written
JSON5 config byte for byte and stop the server.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from ark_trainer.base.fileio import read_json, read_jsonl
from ark_trainer.cli import main
from ark_trainer.core.runtime.system import pid_alive
from ark_trainer.data.loader import load_jsonl
from ark_trainer.data.scrub import Scrubber
from ark_trainer.services.deploy.process import stop_server
from tests.openai_stub import REPLY, StubServer

CONFIG = """// hand-written OpenClaw config: JSON5, with a comment and trailing commas
{{
  models: {{
    providers: {{
      stub: {{
        baseUrl: "{url}", apiKey: "stub-key", api: "openai-completions",
        models: [{{ id: "stub-model", name: "stub", contextWindow: 32768, maxTokens: 256 }}],
      }},
    }},
  }},
}}
"""


def _train_and_deploy(tmp_path: Path, monkeypatch) -> Path:
    from ark_trainer.app.demo.data import write_demo_data
    from ark_trainer.app.demo.model import build_base_model

    train, _ = write_demo_data(tmp_path / "data", n_train=16, n_eval=4, seed=5)
    tiny = {"hidden_size": 32, "num_layers": 2, "warmup_steps": 4, "n_warmup_rows": 16, "vocab_size": 600}
    base = build_base_model(tmp_path / "base", read_jsonl(train), seed=5, progress=False, **tiny)
    out = tmp_path / "run"
    monkeypatch.setenv("ARK_OPENCLAW_AUTODEPLOY", "1")
    args = shlex.split(
        f"train --strategy 'Only GRPO' --task_name oc --model_path {base} --data_path {train} --output_dir {out} "
        "--openclaw_env True --eval_auto False --max_train_steps 2 --batch_size 4 --num_generations 4 "
        "--max_completion_length 16 --logging_steps 1"
    )
    assert main(args) == 0
    return out


def _agent(openclaw, *args: str) -> dict:
    return openclaw.run_json(["agent", "--local", "--json", "--timeout", "200", *args], timeout=260)


@pytest.mark.slow
def test_train_deploy_agent_collect_rollback(openclaw, tmp_path, monkeypatch, capsys):
    stub = StubServer().start()
    config = Path(os.environ["OPENCLAW_STATE_DIR"]) / "openclaw.json"
    config.parent.mkdir(parents=True)
    config.write_text(CONFIG.format(url=stub.url))
    config.chmod(0o600)
    original = config.read_bytes()
    assert openclaw.run_json(["config", "validate", "--json"], check=False)["valid"] is True
    record = None
    try:
        out = _train_and_deploy(tmp_path, monkeypatch)
        record = read_json(out / "deploy" / "deploy.json")
        assert pid_alive(record["pid"]) and record["smoke"]["chunks"] > 0
        assert openclaw.run_json(["config", "validate", "--json"], check=False)["valid"] is True
        patched = json.loads(config.read_text())
        assert patched["agents"]["defaults"]["model"]["primary"] == record["model_ref"]
        assert patched["models"]["providers"]["stub"]["apiKey"] == "stub-key"  # the user's provider is kept
        model = patched["models"]["providers"]["ark"]["models"][0]
        assert model["contextWindow"] == max(record["window"], 4000)

        # 1. a real agent turn, answered by our server
        answer = _agent(openclaw, "--message", "请质检：客服说请联系 bob@corp.com 处理")
        trace = answer["meta"]["executionTrace"]
        assert (trace["winnerProvider"], trace["winnerModel"]) == ("ark", record["name"])
        receipt = answer["meta"]["agentMeta"]["terminalReceipt"]
        assert receipt["effective"]["responseModel"] == record["name"]  # the model id our server returned
        text = "".join(p.get("text") or "" for p in answer["payloads"][:1])
        assert text.strip()
        # served in the shape it was trained on (bare prompts: the turns, not OpenClaw's 40k-character prompt)
        served = re.findall(
            r"\[ark serve\] turn: asked max_completion_tokens=\d+; prompt (\d+) tokens",
            Path(record["log"]).read_text(),
        )
        assert served and all(int(n) < 200 for n in served), served
        # ...which OpenClaw reached with the deployment's key: without it the server answers 401
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{record['port']}/v1/models", timeout=30)
        assert refused.value.code == 401

        # 2. a tool-calling turn on the stub provider, and a legacy transcript made from its real export
        tools = _agent(
            openclaw,
            "--model",
            "stub/stub-model",
            "--session-id",
            "tools-1",
            "--message",
            "列出文件，发到 alice@example.com",
        )
        assert (
            tools["meta"]["executionTrace"]["winnerProvider"] == "stub"
            and tools["payloads"][0]["text"] == REPLY
        )
        (tmp_path / "ws").mkdir()
        export = openclaw.run_json(
            ["sessions", "export-trajectory", "--session-key", "agent:main:explicit:tools-1", "--json",
             "--workspace", str(tmp_path / "ws"), "--output", "t1"], timeout=120,
        )  # fmt: skip
        branch = json.loads((Path(export["outputDir"]) / "session-branch.json").read_text())
        legacy = Path(os.environ["OPENCLAW_STATE_DIR"]) / "agents" / "old" / "sessions" / "legacy-1.jsonl"
        legacy.parent.mkdir(parents=True)
        lines = [{**branch["header"], "id": "legacy-1"}, *branch["entries"]]
        legacy.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))

        # 3. collect: everything back, scrubbed, valid training data
        capsys.readouterr()
        data = tmp_path / "collected.jsonl"
        assert main(["data", "collect", "--openclaw", "-o", str(data)]) == 0
        printed = capsys.readouterr().out
        assert "scrubbed:" in printed and "email" in printed
        raw = data.read_text()
        assert "bob@corp.com" not in raw and "alice@example.com" not in raw and "[EMAIL]" in raw
        rows = load_jsonl(data)  # train's own validation
        ours = [r for r in rows if r["session_id"] == answer["meta"]["agentMeta"]["sessionId"]]
        assert (
            ours
            and ours[0]["candidates"] == [Scrubber().text(text)]
            and ours[0]["model"] == record["model_ref"]
        )
        calls = [r for r in rows if r["session_key"] == "agent:main:explicit:tools-1"]
        assert calls[0]["tool_calls"][0]["name"] == "ls" and calls[0]["candidates"][0].startswith(
            "<tool_call>"
        )
        assert calls[1]["prompt"][-1]["role"] == "tool"
        old = [r for r in rows if r["source"] == "legacy"]
        assert [r["session_id"] for r in old] == ["legacy-1", "legacy-1"] and old[0]["agent_id"] == "old"

        # 4. rollback: the hand-written config, byte for byte, and no server
        assert main(["deploy", "--rollback"]) == 0
        assert config.read_bytes() == original and config.stat().st_mode & 0o777 == 0o600
        assert not pid_alive(record["pid"])
        assert main(["deploy", "--status"]) == 2  # nothing deployed any more
    finally:
        stub.shutdown()
        if record is not None:
            stop_server(record["pid"])


@pytest.mark.slow
def test_a_model_that_fails_the_smoke_request_leaves_the_config_alone(openclaw, tmp_path, capsys):
    from ark_trainer.core.folders import claim_folder

    out = claim_folder(tmp_path / "run")  # a run of ours: deploy writes OUT/deploy/ inside it
    (out / "model").mkdir(parents=True)
    (out / "model" / "config.json").write_text('{"model_type": "no-such-architecture"}')
    (out / "model" / "model.safetensors").write_bytes(b"not weights")
    config = Path(os.environ["OPENCLAW_STATE_DIR"]) / "openclaw.json"
    config.parent.mkdir(parents=True)
    config.write_text("{ gateway: { port: 19001 } }\n")
    before = config.read_bytes()
    assert main(["deploy", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "Traceback" not in err[0], err
    assert config.read_bytes() == before
    pid_file = out / "deploy" / "server.pid"  # refused before a server started (the model's tokenizer and
    if pid_file.is_file():  # chat template are checked first), or its server stopped after the smoke request
        assert not pid_alive(int(pid_file.read_text()))
