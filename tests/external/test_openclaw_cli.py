"""The OpenClaw CLI wrapper (``base/external/openclaw_cli.py``): its JSON found after its log lines."""

from __future__ import annotations

import json
import os

import pytest

from ark_trainer.base.external import openclaw_cli as oc
from tests.line_breakers import IDS, RAW_LEGAL


@pytest.mark.parametrize("sep", RAW_LEGAL, ids=IDS[:3])
def test_openclaw_json_after_log_lines(sep):
    from ark_trainer.base.external.openclaw_cli import parse_json

    value = {"sessions": [{"title": f"a{sep}b"}]}
    assert parse_json("log line\n" + json.dumps(value, ensure_ascii=False, indent=2)) == value


def test_tools_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("ARK_TOOLS_DIR", str(tmp_path))
    monkeypatch.delenv("ARK_OPENCLAW_BIN", raising=False)
    assert oc.tools_dir() == tmp_path
    assert os.environ["OPENCLAW_STATE_DIR"].endswith(".openclaw") and oc.state_dir().name == ".openclaw"
