"""One run deployed from two OpenClaw homes shares one model server, stopped only when neither uses it.

Rolling back the deploy of one home used to stop the server the other home's config still pointed at (both
servers worked in ``OUT/deploy/serve``, and ``--rollback`` stops every server found there). Now each home
keeps its own record (``OUT/deploy/homes/``), a second home's deploy shares the running server, and
``--rollback``/``--stop`` leave it running, saying so in one line, while another home's config uses it.
"""

from __future__ import annotations

import pytest

from ark_trainer.cli import main
from ark_trainer.services.deploy.process import stop_server
from tests.deploy_runs import CONFIG, _run_dir, _servers


@pytest.mark.slow
def test_a_run_deployed_from_two_homes_keeps_its_server_until_both_roll_back(
    openclaw, tmp_path, monkeypatch, capsys
):
    out = _run_dir(tmp_path)
    configs = {}
    for home in ("a", "b"):
        config = tmp_path / home / ".openclaw" / "openclaw.json"
        config.parent.mkdir(parents=True)
        config.write_text(CONFIG)
        config.chmod(0o600)
        configs[home] = config

    def under(home: str) -> None:
        monkeypatch.setenv("HOME", str(tmp_path / home))
        monkeypatch.setenv("OPENCLAW_STATE_DIR", str(configs[home].parent))

    try:
        under("a")
        assert main(["deploy", str(out)]) == 0, capsys.readouterr().err
        under("b")
        assert main(["deploy", str(out)]) == 0, capsys.readouterr().err
        assert "deploy: sharing the model server" in capsys.readouterr().out
        [pid] = _servers(out)
        assert len(list((out / "deploy" / "homes").glob("*.json"))) == 2

        under("a")
        assert main(["deploy", "--stop"]) == 2
        [line] = capsys.readouterr().err.strip().splitlines()
        assert "keeps running" in line and str(configs["b"]) in line, line
        assert main(["deploy", "--rollback"]) == 0
        said = capsys.readouterr().out
        assert f"keeps running: OpenClaw config {configs['b']} still uses it" in said, said
        assert configs["a"].read_text() == CONFIG and _servers(out) == [pid]

        under("b")  # its agent's server still answers, with its key
        assert main(["deploy", "--status"]) == 0 and "healthy" in capsys.readouterr().out
        assert main(["deploy", "--rollback"]) == 0
        assert "server stopped: True" in capsys.readouterr().out
        assert not _servers(out) and configs["b"].read_text() == CONFIG
        assert not list((out / "deploy" / "homes").glob("*.json"))
    finally:
        for pid in _servers(out):
            stop_server(pid)
