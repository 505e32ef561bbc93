"""The OpenClaw CLI wrapper (``external/openclaw_cli.py``): its JSON found after its log lines."""

from __future__ import annotations

import json

import pytest

from tests.line_breakers import IDS, RAW_LEGAL


@pytest.mark.parametrize("sep", RAW_LEGAL, ids=IDS[:3])
def test_openclaw_json_after_log_lines(sep):
    from ark_trainer.external.openclaw_cli import parse_json

    value = {"sessions": [{"title": f"a{sep}b"}]}
    assert parse_json("log line\n" + json.dumps(value, ensure_ascii=False, indent=2)) == value
