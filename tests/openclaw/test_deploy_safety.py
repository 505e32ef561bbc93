"""A deploy stopped by a signal undoes itself; an odd OpenClaw config, a second deploy at once and a port
outside 1-65535 are refused in one line before anything starts; rollback forgets the deployment's key.

The signal tests run the real ``ark-trainer deploy`` as a subprocess with
``ARK_FAULT=deploy_term_after:<point>`` / ``deploy_int_after:<point>`` (it signals itself there, as ``kill``
or Ctrl-C would): it must exit 143 / 130 with the server stopped, the record cleared and the config's bytes
as before.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ark_trainer.base.fileio import read_json
from ark_trainer.cli import main
from ark_trainer.services.deploy.process import stop_server
from ark_trainer.services.openclaw.deploy_safety import deploy_lock
from tests.conftest import ROOT, refused
from tests.deploy_runs import _config, _run_dir, _servers

POINTS = ("backup", "server_started", "smoke", "patched", "recorded")


def _state() -> Path:
    return Path(os.environ["OPENCLAW_STATE_DIR"])


def _nothing_started(out: Path) -> None:
    assert not (out / "deploy").exists() and not (_state() / "ark-trainer").exists()
    assert not _servers(out)


def _odd_configs(config: Path) -> dict[str, str]:
    """Name → what the refusal says, each made at ``config`` in turn by :func:`_make_odd`."""
    return {
        "folder": "is a folder, not a file",
        "fifo": "is a named pipe (FIFO), not a regular file",
        "loop": "Too many levels of symbolic links",
        "dangling": "which does not exist",
        "immutable": "is read-only or unreadable",
        "readonly_folder": "is read-only",
        "mounted": "is a mount point",
    }


def _make_odd(kind: str, config: Path) -> None:
    config.parent.mkdir(parents=True, exist_ok=True)
    if kind == "folder":
        config.mkdir()
    elif kind == "fifo":
        os.mkfifo(config)
    elif kind == "loop":
        config.symlink_to(config.name + ".other")
        config.with_name(config.name + ".other").symlink_to(config.name)
    elif kind == "dangling":
        config.symlink_to(config.parent / "nowhere" / "openclaw.json")
    elif kind == "immutable":  # read-only even for root
        config.write_text("{}\n")
        if subprocess.run(["chattr", "+i", str(config)], capture_output=True).returncode != 0:
            pytest.skip("chattr +i is not available here")
    elif kind == "readonly_folder":
        config.write_text("{}\n")
        if os.geteuid() == 0:
            pytest.skip("root writes in a read-only folder")
        config.parent.chmod(0o555)
    elif kind == "mounted":  # a config file mounted on its own, as into a container: rename gives EBUSY
        source = config.with_name("mounted-from.json")
        source.write_text("{}\n")
        config.write_text("{}\n")
        if subprocess.run(["mount", "--bind", str(source), str(config)], capture_output=True).returncode != 0:
            pytest.skip("cannot bind-mount a file here")


def _clear(kind: str, config: Path) -> None:
    if kind == "immutable":
        subprocess.run(["chattr", "-i", str(config)], capture_output=True)
    if kind == "readonly_folder":
        config.parent.chmod(0o755)
    if kind == "mounted":
        subprocess.run(["umount", str(config)], capture_output=True)


@pytest.mark.parametrize("kind", list(_odd_configs(Path("x"))))
def test_an_odd_openclaw_config_is_refused_before_anything_starts(tmp_path, capsys, kind):
    out = _run_dir(tmp_path)
    capsys.readouterr()
    config = _state() / "openclaw.json"
    _make_odd(kind, config)
    try:
        lines = refused(capsys, ["deploy", str(out)])
        model_alone = refused(capsys, ["deploy", str(out / "model")])  # would get a folder in the state
    finally:
        _clear(kind, config)
    assert len(lines) == 1 and lines[0].startswith(f"error: deploy: OpenClaw config {config}"), lines
    assert _odd_configs(config)[kind] in lines[0], lines
    assert model_alone == lines
    _nothing_started(out)


@pytest.mark.parametrize("port", ["0", "-1", "65536", "99999"])
def test_a_port_outside_1_to_65535_is_refused(tmp_path, capsys, port):
    out = _run_dir(tmp_path)
    capsys.readouterr()
    assert refused(capsys, ["deploy", str(out), "--port", port]) == [
        f"error: --port: expected 1..65535 (or leave it out to have a free one picked), got {port}"
    ]
    _nothing_started(out)


def test_a_second_deploy_while_one_runs_is_refused_without_undoing_it(tmp_path, capsys):
    out = _run_dir(tmp_path)
    capsys.readouterr()
    config = _config()
    before = config.read_bytes()
    registry = _state() / "ark-trainer" / "deployments.json"
    registry.parent.mkdir(parents=True, exist_ok=True)
    live = {"id": "x", "state": "pending", "out": str(tmp_path / "other"), "pid": None}
    registry.write_text(f"[{__import__('json').dumps(live)}]")  # the running deploy's pending record
    with deploy_lock(_state()):  # held by the deploy that runs (the lock is per open file, so this works)
        for argv in (["deploy", str(out)], ["deploy", "--rollback"], ["deploy", str(out), "--port", "8123"]):
            (line,) = refused(capsys, argv)
            assert "another ark-trainer deploy or rollback" in line and f"pid {os.getpid()}" in line, line
            assert "--rollback" not in line and "deploy --status" in line
    assert config.read_bytes() == before and read_json(registry) == [live]  # the live one is untouched
    assert not (out / "deploy").exists()
    # once it has ended, a pending record is one whose deploy died: then rolling it back is the advice
    assert "`ark-trainer deploy --rollback` undoes it first" in refused(capsys, ["deploy", str(out)])[0]


def _deploy_signalled(out: Path, fault: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ARK_FAULT": fault, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-m", "ark_trainer", "deploy", str(out)], env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize(("fault", "code", "said"), [("deploy_term_after", 143, "terminated"),
                                                     ("deploy_int_after", 130, "stopped by the user")])  # fmt: skip
def test_a_deploy_stopped_by_a_signal_anywhere_undoes_itself(openclaw, tmp_path, point, fault, code, said):
    out = _run_dir(tmp_path)
    config = _config()
    original = config.read_bytes()
    try:
        proc = _deploy_signalled(out, f"{fault}:{point}")
        assert proc.returncode == code and proc.stderr.strip().splitlines()[-1] == said, proc.stderr
        assert "Traceback" not in proc.stderr
        assert config.read_bytes() == original and config.stat().st_mode & 0o777 == 0o600
        assert not _servers(out)
        assert read_json(_state() / "ark-trainer" / "deployments.json") == []
        assert read_json(out / "deploy" / "deploy.json")["state"] == "failed"
        assert not (out / "deploy" / "api_key").exists() and not (out / "deploy" / "patch.json5").exists()
    finally:
        for pid in _servers(out):
            stop_server(pid)


def _deployed_by_hand(out: Path, config: Path) -> dict:
    """A deployment recorded as the deploy records it, its config patched, with no server (rollback needs none)."""
    from ark_trainer.base.fileio import atomic_write_text, write_json
    from ark_trainer.services.openclaw.deploy import _intent, _sha, _update

    key_file = out / "deploy" / "api_key"
    atomic_write_text(key_file, "k" * 43 + "\n", mode=0o600)
    record = _intent(out, "ark-run", 8123, 256, 64, None, key_file)
    write_json(out / "deploy" / "patch.json5", {"apiKey": "k" * 43}, mode=0o600)
    (out / "deploy" / "server.log").write_text("served\n")
    config.write_text('{"models": {"providers": {"ark": {"apiKey": "' + "k" * 43 + '"}}}}\n')
    _update(record, state="deployed", config_sha256_after=_sha(config))
    return record


def test_rollback_removes_the_deployments_key_and_keeps_a_runs_history(tmp_path, capsys):
    out = _run_dir(tmp_path)
    config = _config()
    original = config.read_bytes()
    _deployed_by_hand(out, config)
    capsys.readouterr()
    assert main(["deploy", "--rollback"]) == 0, capsys.readouterr().err
    assert config.read_bytes() == original
    assert not (out / "deploy" / "api_key").exists() and not (out / "deploy" / "patch.json5").exists()
    assert (out / "deploy" / "server.log").read_text() == "served\n"
    assert read_json(out / "deploy" / "deploy.json")["state"] == "rolled back"
    assert not list((out / "deploy" / "homes").glob("*.json"))
    assert not any("k" * 43 in p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())


def test_rollback_removes_the_deploy_folder_it_made_in_openclaws_state(tmp_path, capsys):
    from ark_trainer.services.openclaw.deploy import deploy_folder

    model_dir = _run_dir(tmp_path) / "model"
    out = deploy_folder(model_dir)  # a model folder deployed directly gets a folder in OpenClaw's state
    assert out.parent == _state() / "ark-trainer" / "models"
    config = _config()
    original = config.read_bytes()
    _deployed_by_hand(out, config)
    capsys.readouterr()
    assert main(["deploy", "--rollback"]) == 0, capsys.readouterr().err
    assert config.read_bytes() == original and not out.exists() and (model_dir / "config.json").is_file()
