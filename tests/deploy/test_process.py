"""``deploy/process.py``: a model server that belongs to one command (``eval --through openclaw``'s) is
recorded before it starts, stopped when that command is interrupted, and reaped by the next command when
the one that started it was killed outright."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from ark_trainer.runtime.system import pid_alive
from tests.conftest import refused


def _fake_server(serve_dir: Path) -> subprocess.Popen:
    """A process that looks like our model server to /proc (its command line names the module)."""
    serve_dir.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", "ark_trainer.deploy.serve"],
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
    from ark_trainer.cli import main
    from ark_trainer.deploy.process import _owned_record, servers_dir
    from ark_trainer.fileio import write_json

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

    from ark_trainer.deploy.process import _owned_record, process_start, reap_orphans
    from ark_trainer.fileio import write_json

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
    from ark_trainer.deploy import process
    from ark_trainer.deploy.process import servers_dir
    from ark_trainer.folders import claim_folder
    from ark_trainer.openclaw.parity import _Server
    from tests.conftest import save_tiny_qwen

    out = claim_folder(tmp_path / "run")
    model = save_tiny_qwen(out / "model")
    started: list[subprocess.Popen] = []
    real_popen = subprocess.Popen

    def fake_popen(argv, **kwargs):
        started.append(real_popen([sys.executable, "-c", "import time; time.sleep(120)",
                                   "ark_trainer.deploy.serve"], **kwargs))  # fmt: skip
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
