"""``deploy`` into OpenClaw (``services/openclaw/deploy.py``): crash-safe rollback, secret file modes, a model server
that needs the deployment's key.

The kill-anywhere test runs the real ``ark-trainer deploy`` as a subprocess with
``ARK_FAULT=deploy_kill_after:<point>`` (it SIGKILLs itself there), then ``deploy --rollback`` must put
OpenClaw's config back byte for byte and leave no model server running.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ark_trainer.base.fileio import read_json
from ark_trainer.cli import main
from ark_trainer.services.deploy.process import stop_server
from ark_trainer.services.openclaw.deploy import knobs_said, provider_patch
from tests.conftest import ROOT
from tests.deploy_runs import _config, _request, _run_dir, _servers

KILL_POINTS = ("backup", "server_started", "smoke", "patched", "recorded")


@pytest.mark.slow
@pytest.mark.parametrize("point", KILL_POINTS)
def test_a_deploy_killed_anywhere_rolls_back_byte_identical(openclaw, tmp_path, point, capsys):
    out = _run_dir(tmp_path)
    config = _config()
    original = config.read_bytes()
    env = {**os.environ, "ARK_FAULT": f"deploy_kill_after:{point}", "PYTHONPATH": str(ROOT / "src")}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "ark_trainer", "deploy", str(out)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == -9, proc.stdout + proc.stderr
        if point != "backup":
            assert _servers(out), "the server outlives its killed deploy"
        if point == "patched":  # the interrupted deploy shows, and blocks a new one until rolled back
            capsys.readouterr()
            assert main(["deploy", "--status"]) == 1 and "interrupted" in capsys.readouterr().out
            assert main(["deploy", str(out)]) == 2 and "did not finish" in capsys.readouterr().err
        if (
            point == "server_started"
        ):  # --stop finds the server of a deploy that died before recording its pid
            assert main(["deploy", "--stop"]) == 0
            assert not _servers(out)
        capsys.readouterr()
        assert main(["deploy", "--rollback"]) == 0, capsys.readouterr().err
        assert config.read_bytes() == original and config.stat().st_mode & 0o777 == 0o600
        assert not _servers(out)
        assert main(["deploy", "--status"]) == 2  # nothing deployed any more
    finally:
        for pid in _servers(out):
            stop_server(pid)


@pytest.mark.slow
def test_the_server_needs_the_deployments_key_and_secrets_stay_private(openclaw, tmp_path, capsys):
    out = _run_dir(tmp_path)
    config = _config(mode=0o640)  # an unusual mode: copies must keep it, not impose their own
    original = config.read_bytes()
    assert main(["deploy", str(out)]) == 0
    printed = capsys.readouterr()
    record = read_json(out / "deploy" / "deploy.json")
    try:
        key = json.loads(config.read_text())["models"]["providers"]["ark"]["apiKey"]
        assert len(key) >= 32 and key != "ark-local"
        key_file = Path(record["api_key_file"])
        assert key_file.read_text().strip() == key and key_file.stat().st_mode & 0o777 == 0o600

        # 2. copies of the config keep its mode; new files that hold the key are 0600
        backups = list((config.parent / "ark-trainer" / "backups").iterdir())
        before = out / "deploy" / "openclaw.json.before"
        for copy in [*backups, before]:
            assert copy.read_bytes() == original and copy.stat().st_mode & 0o777 == 0o640, copy
        assert (out / "deploy" / "patch.json5").stat().st_mode & 0o777 == 0o600
        registry = config.parent / "ark-trainer" / "deployments.json"
        logs = [printed.out, printed.err, Path(record["log"]).read_text(), registry.read_text()]
        assert not any(key in text for text in [*logs, (out / "deploy" / "deploy.json").read_text()])

        # 3. every route needs the key; cross-origin browser requests and caller-named models are refused
        base = f"http://127.0.0.1:{record['port']}"
        chat = json.dumps(
            {"model": record["name"], "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
        ).encode()
        as_json = {"Content-Type": "application/json"}
        for path in ("/health", "/v1/models"):
            assert _request(base + path, None) == 401
            assert _request(base + path, "wrong-" + key) == 401
            assert _request(base + path, key) == 200
        assert _request(base + "/v1/chat/completions", None, "POST", chat, **as_json) == 401
        assert _request(base + "/v1/chat/completions", key[:-1], "POST", chat, **as_json) == 401
        assert _request(base + "/v1/chat/completions", key, "POST", chat, **as_json) == 200
        evil = {"Origin": "http://evil.example"}
        assert _request(base + "/v1/chat/completions", key, "POST", chat, **as_json, **evil) == 403
        assert _request(base + "/health", key, **evil) == 403
        plain = {"Content-Type": "text/plain"}
        assert _request(base + "/v1/chat/completions", key, "POST", chat, **plain) == 415
        assert _request(base + "/reset", None, "POST", b"{}", **plain, **evil) in (401, 403)
        load = json.dumps({"model": str(out / "model")}).encode()
        for path in ("/load_model", "/reset", "/v1/responses", "/v1/audio/transcriptions", "/v1/completions"):
            assert _request(base + path, key, "POST", load, **as_json) == 404, path
        assert _request(base + "/v1/models", key, "OPTIONS") in (404, 405)
    finally:
        stop_server(record["pid"])
    assert main(["deploy", "--rollback"]) == 0
    assert config.read_bytes() == original and config.stat().st_mode & 0o777 == 0o640
    assert not key_file.exists() and not (out / "deploy" / "patch.json5").exists()  # the key goes with it


def test_deploy_serves_a_project_folders_model_from_a_folder_of_its_own(model, tmp_path):
    import shutil

    from ark_trainer.core.folders import claim_folder
    from ark_trainer.services.openclaw.deploy import deploy_folder

    project = tmp_path / "project"
    shutil.copytree(model, project / "model")
    served = deploy_folder(project)
    assert served != project.resolve() and os.readlink(served / "model") == str((project / "model").resolve())
    assert sorted(p.name for p in project.iterdir()) == ["model"]  # nothing written into the user's folder
    run = claim_folder(tmp_path / "run")  # a run of ours: its deploy/ goes inside it, as before
    shutil.copytree(model, run / "model")
    assert deploy_folder(run) == run.resolve()


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


def test_the_default_agent_or_a_named_one():
    assert provider_patch("m", 1, 32768, 512, None, "k")["agents"] == {
        "defaults": {"model": {"primary": "ark/m"}}
    }
    assert (
        provider_patch("m", 1, 32768, 512, None, "k")["models"]["providers"]["ark"]["models"][0][
            "contextWindow"
        ]
        == 32768
    )
