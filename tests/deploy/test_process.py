"""``services/deploy/process.py``: a model server that belongs to one command (``eval --through openclaw``'s) is
recorded before it starts, stopped when that command is interrupted, and reaped by the next command when
the one that started it was killed outright."""

from __future__ import annotations

import importlib.util
import json
import re
import socket
import subprocess
import sys
import threading
import time
import tomllib
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from ark_trainer.base.errors import UserError
from ark_trainer.cli import main
from ark_trainer.core.runtime.system import pid_alive
from tests.conftest import ROOT, refused
from tests.deploy.templates import REASON
from tests.deploy_runs import _config, _run_dir


def _fake_server(serve_dir: Path) -> subprocess.Popen:
    """A process that looks like our model server to /proc (its command line names the module)."""
    serve_dir.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", "ark_trainer.services.deploy.serve"],
        cwd=serve_dir, start_new_session=True,
    )  # fmt: skip


def _dead_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


def _gone(proc: subprocess.Popen, seconds: float = 10) -> bool:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None or not pid_alive(proc.pid):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("pid_recorded", [True, False])
def test_a_server_whose_command_died_is_reaped_by_the_next_command(tmp_path, capsys, pid_recorded):
    from ark_trainer.base.fileio import write_json
    from ark_trainer.cli import main
    from ark_trainer.services.deploy.process import _owned_record, servers_dir

    serve_dir = tmp_path / "eval" / "deploy" / "serve"
    server = _fake_server(serve_dir)
    try:
        record = _owned_record(serve_dir)
        pid = server.pid if pid_recorded else None  # killed between the record and the pid: found by folder
        write_json(record, {"serve_dir": str(serve_dir.resolve()), "owner": _dead_pid(), "owner_start": None,
                            "pid": pid})  # fmt: skip
        main(["status", str(tmp_path / "nothing")])
        assert _gone(server), "the orphaned server still runs"
        assert "stopped 1 model server(s)" in capsys.readouterr().err
        assert not list(servers_dir().glob("*.json"))
    finally:
        server.kill()
        server.wait()


def test_a_server_whose_command_still_runs_is_left_alone(tmp_path):
    import os

    from ark_trainer.base.fileio import write_json
    from ark_trainer.services.deploy.process import _owned_record, process_start, reap_orphans

    serve_dir = tmp_path / "eval" / "deploy" / "serve"
    server = _fake_server(serve_dir)
    try:
        write_json(_owned_record(serve_dir), {"serve_dir": str(serve_dir.resolve()), "owner": os.getpid(),
                                              "owner_start": process_start(os.getpid()), "pid": server.pid})  # fmt: skip
        assert reap_orphans() == [] and server.poll() is None
    finally:
        server.kill()
        server.wait()


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_while_the_eval_server_starts_stops_it(tmp_path, monkeypatch, interrupt):
    """Ctrl-C (or SIGTERM, which ``eval`` turns into the same unwinding) while waiting for health."""
    from ark_trainer.core.folders import claim_folder
    from ark_trainer.services.deploy import process
    from ark_trainer.services.deploy.process import servers_dir
    from ark_trainer.services.openclaw.parity import _Server
    from tests.conftest import save_tiny_qwen

    out = claim_folder(tmp_path / "run")
    model = save_tiny_qwen(out / "model")
    started: list[subprocess.Popen] = []
    real_popen = subprocess.Popen

    def fake_popen(argv, **kwargs):
        started.append(real_popen([sys.executable, "-c", "import time; time.sleep(120)",
                                   "ark_trainer.services.deploy.serve"], **kwargs))  # fmt: skip
        return started[-1]

    def interrupted(*args, **kwargs):
        raise interrupt()

    monkeypatch.setattr(process.subprocess, "Popen", fake_popen)
    monkeypatch.setattr(process, "wait_healthy", interrupted)
    with pytest.raises(interrupt), _Server(out, "final", model, log=lambda *a: None, prompt_shape="plain"):
        pass
    try:
        assert started and _gone(started[0]), "the eval's server still runs"
        assert not list(servers_dir().glob("*.json"))
    finally:
        for proc in started:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("port", ["99999", "-1", "65536"])
def test_a_port_outside_the_tcp_range_is_one_line(assets, tmp_path, capsys, port):
    run = tmp_path / "run"
    run.mkdir()
    (run / "model").symlink_to(assets["model"])
    says = f"error: --port: expected 1..65535 (or leave it out to have a free one picked), got {port}"
    assert refused(capsys, ["deploy", str(run), "--port", port]) == [says]
    assert not (run / "deploy").exists()
    loop = tmp_path / "loop"
    assert refused(
        capsys, ["loop", "--output_dir", str(loop), "--model_path", str(assets["model"]), "--port", port]
    ) == [says]
    assert not loop.exists()


def test_deploy_and_doctor_name_a_missing_serving_package(tmp_path, monkeypatch, capsys):
    from ark_trainer.services.openclaw import doctor

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


def test_deploy_names_the_transformers_releases_its_server_runs_on(monkeypatch):
    """The server extends `transformers serve`'s handlers; on a release outside the tested range deploy
    stops before anything starts, with the install command, and the pins agree with that range."""
    import importlib.metadata

    from ark_trainer.base.errors import UserError
    from ark_trainer.services.deploy import process

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


def _held_port() -> tuple[socket.socket, int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    return sock, sock.getsockname()[1]


def test_deploy_on_a_taken_port_names_it_and_writes_nothing(tmp_path):
    from tests.conftest import run_cli, save_tiny_qwen

    out = tmp_path / "run"
    save_tiny_qwen(out / "model")
    sock, port = _held_port()
    try:
        result = run_cli("deploy", str(out), "--port", str(port), cwd=tmp_path)
    finally:
        sock.close()
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"port {port}" in lines[0] and "already in use" in lines[0] and "--port" in lines[0]
    assert not (out / "deploy").exists()


def test_a_server_that_lost_the_race_for_its_port_is_named(tmp_path):
    from ark_trainer.base.errors import UserError
    from ark_trainer.services.deploy.process import wait_healthy

    log = tmp_path / "server.log"
    log.write_text("INFO: started\nERROR: [Errno 98] error while attempting to bind on address "
                   "('127.0.0.1', 8765): address already in use\n")  # fmt: skip
    with pytest.raises(UserError, match=r"port 8765 on 127\.0\.0\.1 is already in use.*--port"):
        wait_healthy({"pid": 2**22 + 1, "host": "127.0.0.1", "port": 8765, "log": str(log)}, "k", timeout=5)


def test_a_loop_on_a_taken_port_names_it_and_writes_nothing(tmp_path, capfd, monkeypatch):
    from tests.conftest import save_tiny_qwen

    # through main() in this process (deploy's test above goes through the real process): the same refusal,
    # without a child importing torch and transformers again
    model = save_tiny_qwen(tmp_path / "model")
    monkeypatch.chdir(tmp_path)
    capfd.readouterr()  # the tiny model's progress bars
    sock, port = _held_port()
    try:
        code = main(["loop", "--output_dir", str(tmp_path / "loop"), "--model_path", str(model),
                     "--port", str(port)])  # fmt: skip
    finally:
        sock.close()
    stderr = capfd.readouterr().err
    assert code == 2 and "Traceback" not in stderr, stderr
    assert f"port {port}" in stderr and "already in use" in stderr
    assert not (tmp_path / "loop").exists()


class _Refusing(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps({"error": {"message": REASON, "type": "invalid_request_error"}}).encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_the_smoke_request_prints_the_servers_reason_in_one_line():
    from ark_trainer.services.deploy.process import smoke_request
    from ark_trainer.services.openclaw.parity import ask

    server = HTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}/v1"
    try:
        with pytest.raises(UserError) as smoke:
            smoke_request(base, "m", "k", timeout=30)
        with pytest.raises(UserError) as asked:
            ask(base, "k", {"messages": []}, timeout=30)
    finally:
        server.shutdown()
    assert str(smoke.value) == f"deploy: smoke request to {base} failed: HTTP 400: {REASON}"
    assert (
        str(asked.value) == f"eval --through openclaw: the model server at {base} answered HTTP 400: {REASON}"
    )


def test_deploy_says_it_is_loading_the_model_while_the_server_starts(tmp_path, monkeypatch):
    """A real model loads for seconds to minutes before the smoke request answers: deploy says so, then a
    line every few seconds, instead of minutes of silence (here the wait is made long and the smoke fails,
    which deploy undoes)."""
    from ark_trainer.base.errors import UserError
    from ark_trainer.core.runtime import ticker
    from ark_trainer.services.deploy import process
    from ark_trainer.services.openclaw import deploy as oc_deploy
    from tests.deploy_runs import _run_dir

    out = _run_dir(tmp_path)
    started: list[subprocess.Popen] = []
    real_popen = subprocess.Popen

    def fake_popen(argv, **kwargs):
        started.append(real_popen([sys.executable, "-c", "import time; time.sleep(120)",
                                   "ark_trainer.services.deploy.serve"], **kwargs))  # fmt: skip
        return started[-1]

    def slow_smoke(*args, **kwargs):
        time.sleep(0.5)
        raise UserError("deploy: smoke failed on purpose")

    monkeypatch.setattr(process.subprocess, "Popen", fake_popen)
    monkeypatch.setattr(oc_deploy, "wait_healthy", lambda server, key: time.sleep(0.3))
    monkeypatch.setattr(oc_deploy, "smoke_request", slow_smoke)
    monkeypatch.setattr(ticker, "TICK_SECONDS", 0.2)
    said: list[str] = []
    try:
        with pytest.raises(UserError, match="on purpose"):
            oc_deploy.deploy(out, log=said.append)
    finally:
        for proc in started:
            proc.kill()
            proc.wait()
    start = next(i for i, line in enumerate(said) if line.startswith("deploy: starting the model server"))
    ticks = [line for line in said[start:] if "still starting the model server and loading the model" in line]
    assert len(ticks) >= 2, said
