"""``deploy`` hardened: crash-safe rollback, secret file modes, an authenticated model server,
serving dependencies that install with the package, and two doc fixes.

The kill-anywhere test runs the real ``ark-trainer deploy`` as a subprocess with
``ARK_FAULT=deploy_kill_after:<point>`` (it SIGKILLs itself there), then ``deploy --rollback`` must put
OpenClaw's config back byte for byte and leave no model server running.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from ark_trainer.cli import main
from ark_trainer.deploy.process import stop_server
from ark_trainer.fileio import read_json
from ark_trainer.runtime.system import pid_alive
from tests.conftest import save_tiny_qwen

ROOT = Path(__file__).resolve().parents[2]
CONFIG = """// hand-written, with a secret
{
  models: { providers: { x: {
    baseUrl: "http://127.0.0.1:9/v1", apiKey: "sk-user-secret", api: "openai-completions",
    models: [{ id: "m", name: "m", contextWindow: 32768, maxTokens: 256 }],
  } } },
}
"""
KILL_POINTS = ("backup", "server_started", "smoke", "patched", "recorded")


def _run_dir(tmp_path: Path) -> Path:
    """A run folder with a tiny random model, seeded: an unseeded one sometimes greedily repeats a special
    token, whose text is empty, and the deploy's smoke request then rightly refuses it (seen once in CI)."""
    import torch

    from ark_trainer.folders import claim_folder

    out = claim_folder(tmp_path / "run")  # a run of ours: deploy writes OUT/deploy/ inside it
    torch.manual_seed(0)
    save_tiny_qwen(out / "model")
    return out


def _config(mode: int = 0o600) -> Path:
    config = Path(os.environ["OPENCLAW_STATE_DIR"]) / "openclaw.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(CONFIG)
    config.chmod(mode)
    return config


def _servers(out: Path) -> list[int]:
    """Live model-server processes started for ``out`` (found from /proc, not from deploy's records)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes()
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if b"ark_trainer.deploy.serve" in cmd and cwd.startswith(str(out)) and pid_alive(int(proc.name)):
            pids.append(int(proc.name))
    return pids


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


def _request(url: str, key: str | None, method: str = "GET", body: bytes | None = None, **headers) -> int:
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            resp.read()
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


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


def test_the_gate_refuses_each_kind_of_unwanted_request():
    from ark_trainer.deploy.gate import Gate

    gate = Gate(None, "k" * 43, 8765)

    def status(method="GET", path="/health", key="k" * 43, **headers) -> int | None:
        headers = {"host": "127.0.0.1:8765", **headers}
        if key is not None:
            headers["authorization"] = f"Bearer {key}"
        raw = [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()]
        refusal = gate.refusal({"type": "http", "method": method, "path": path, "headers": raw})
        return refusal and refusal[0]

    chat = {"method": "POST", "path": "/v1/chat/completions"}
    assert status() is None and status(path="/v1/models") is None
    assert status(**chat, content_type="application/json; charset=utf-8") is None
    assert status(host="localhost:8765", origin="http://localhost:8765") is None  # its own origin
    for key in (None, "", "k" * 42, "k" * 44, "K" * 43):  # no key, empty, short, long, wrong
        assert status(key=key) == 401
    assert status(authorization="Basic " + "k" * 43, key=None) == 401
    for origin in ("http://evil.example", "null", "http://127.0.0.1:8766", "https://127.0.0.1:8765"):
        assert status(origin=origin) == 403
    for site in ("cross-site", "same-site"):
        assert status(sec_fetch_site=site) == 403
    for host in ("evil.example:8765", "127.0.0.1:8766", "127.0.0.1"):  # DNS rebinding, another port
        assert status(host=host) == 403
    for method, path in (("POST", "/load_model"), ("POST", "/reset"), ("OPTIONS", "/v1/models"),
                         ("GET", "/docs"), ("POST", "/v1/responses"), ("GET", "/v1/chat/completions")):  # fmt: skip
        assert status(method, path) == 404, path
    # the three content types a browser sends cross-origin without a preflight
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; b=x", ""):
        assert status(**chat, content_type=content_type) == 415


def test_deploy_and_doctor_name_a_missing_serving_package(tmp_path, monkeypatch, capsys):
    from ark_trainer.openclaw import doctor

    out = _run_dir(tmp_path)
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "fastapi" else real(name, *a)
    )
    config = _config()
    before = config.read_bytes()
    capsys.readouterr()
    assert main(["deploy", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "fastapi" in err[0] and "-m pip install fastapi" in err[0], err
    assert not (out / "deploy").exists() and config.read_bytes() == before  # nothing started or written
    check = {c.name: c for c in doctor.run_checks(openclaw=False)}["serving"]
    assert check.status == "fail" and "fastapi" in check.detail and "-m pip install fastapi" in check.fix


def _closure(requirements: list[str]) -> set[str]:
    """Distributions the requirements install, transitively (extras not asked for are left out)."""
    from importlib.metadata import PackageNotFoundError, requires

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in seen or (req.marker and not req.marker.evaluate({"extra": ""})):
            continue
        seen.add(name)
        with contextlib.suppress(PackageNotFoundError):  # not installed: it brings nothing here
            todo += [Requirement(r) for r in requires(req.name) or []]
    return seen


@pytest.mark.slow
def test_the_core_dependencies_cover_every_package_deploy_imports():
    """`pip install -e .` (no extras) must install what the deploy server imports: the declared
    dependencies' closure must hold every distribution the serve stack loads."""
    from importlib.metadata import packages_distributions

    from packaging.utils import canonicalize_name

    code = (
        "import sys, ark_trainer.deploy.serve, ark_trainer.deploy.gate, ark_trainer.openclaw.config_edit\n"
        "import json5, uvicorn, transformers.cli.serve, transformers.cli.serving.server\n"
        "import transformers.cli.serving.chat_completion\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    names = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    dists = packages_distributions()
    imported = {canonicalize_name(d) for n in names for d in dists.get(n, [])} - {"ark-trainer"}
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    missing = sorted(imported - _closure(declared))
    assert {"fastapi", "uvicorn", "openai", "json5"} <= imported and not missing, missing


def test_skill_names_the_states_status_prints_and_readme_lists_npm():
    from ark_trainer.runtime import monitor

    skill = (ROOT / "src/ark_trainer/openclaw/skill/SKILL.md").read_text()
    states_text = skill.split("## 4. Status")[1].split("## 5.")[0].split("ark-trainer diagnose")[0]
    named = set(re.findall(r"`(\w+)`", states_text))  # the states the skill names, before the diagnosis part
    states = set(re.findall(r'"(\w+)"', Path(monitor.__file__).read_text()))
    assert "stalled" in named and named - {"status"} <= states, named - states
    intro = (ROOT / "README.md").read_text().split("## Two commands")[1].split("## ")[0]
    assert re.search(r"On a fresh Linux machine[^:]*`npm`", intro), intro  # the prerequisites name npm


def test_deploy_names_the_transformers_releases_its_server_runs_on(monkeypatch):
    """The server extends `transformers serve`'s handlers; on a release outside the tested range deploy
    stops before anything starts, with the install command, and the pins agree with that range."""
    import importlib.metadata

    from ark_trainer.deploy import process
    from ark_trainer.errors import UserError

    real = importlib.metadata.version
    for release, supported in [("5.24.0", True), ("5.0.1", True), ("5.25.0", False), ("4.57.1", False)]:
        monkeypatch.setattr(
            importlib.metadata, "version", lambda n, r=release: r if n == "transformers" else real(n)
        )
        if supported:
            process.check_serving_packages()
            continue
        with pytest.raises(UserError) as err:
            process.check_serving_packages()
        assert release in str(err.value) and "transformers>=5.0,<5.25" in str(err.value)
    monkeypatch.setattr(importlib.metadata, "version", real)
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert "transformers>=5.0,<5.25" in declared
    pinned = re.search(r"^transformers==(\d+)\.(\d+)", (ROOT / "requirements.txt").read_text(), re.M)
    assert pinned and (5, 0) <= (int(pinned[1]), int(pinned[2])) < (5, 25)
