"""``ark-trainer install`` (``app/commands/install.py``): ``--dry-run`` prints the exact commands, with one set of pins."""

from __future__ import annotations

import re

from ark_trainer.base.external import openclaw_cli as oc
from ark_trainer.cli import main
from tests.conftest import ROOT


def test_install_dry_run_prints_the_exact_commands(capsys):
    assert main(["install", "--dry-run", "--gpu", "--openclaw"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    script = (ROOT / "scripts" / "setup_openclaw.sh").read_text()
    node_pkg = re.search(r"ARK_NODE_PKG:-(\S+)}", script).group(1)
    openclaw_pkg = re.search(r"ARK_OPENCLAW_PKG:-(\S+)}", script).group(1)
    assert (node_pkg, openclaw_pkg) == (oc.NODE_PKG, oc.OPENCLAW_PKG)  # one set of pins
    assert lines[0].endswith(
        "-m pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
    )
    assert lines[1].endswith(f"-m pip install -r {ROOT / 'requirements.txt'}")
    assert lines[3].endswith("-m pip install vllm deepspeed torch==2.13.0")
    assert any(line.startswith("npm install") and line.endswith(node_pkg) for line in lines)
    assert any(" npm install " in line and line.endswith(openclaw_pkg) for line in lines)
    assert main(["install", "--dry-run"]) == 0
    cpu = capsys.readouterr().out
    assert "vllm" not in cpu and "npm" not in cpu and "index-url" not in cpu
