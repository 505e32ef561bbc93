"""``ark-trainer status``: what ``heartbeat.json`` says is printed as text, never as terminal commands."""

from __future__ import annotations

import json
import os

import pytest

ESCAPES = {
    "stage": "\x1b]0;pwned\x07\x1b[2J",
    "detail": "batch\r\x1b[31mFAILED",
    "updated_at": "\u202enoitceles",
    "pid_text": "\x9b31m",
}


@pytest.mark.parametrize("field", list(ESCAPES))
def test_escapes_in_the_heartbeat_are_shown_escaped(tmp_path, capsys, field):
    from ark_trainer.cli import main

    beat = {"state": "finished", "stage": "rft", "step": 1, "total": 2, "pid": os.getpid(),
            "updated_at": "now", "metrics": {"loss\x1b[1m": 0.5, "note": "\x1b[5mblink"}}  # fmt: skip
    beat["pid" if field == "pid_text" else field] = ESCAPES[field]
    (tmp_path / "heartbeat.json").write_text(json.dumps(beat))
    main(["status", str(tmp_path)])
    out = capsys.readouterr().out
    assert not any(c in out for c in "\x1b\x07\r\x9b\u202e"), repr(out)
    assert "\\x1b" in out or "\\u202e" in out or "\\x9b" in out, out


@pytest.mark.parametrize("beat", [[1, 2], {"state": "running", "pid": "x", "updated_ts": "y"}, "text"])
def test_a_heartbeat_that_is_not_ours_is_one_line(tmp_path, capsys, beat):
    from ark_trainer.cli import main

    (tmp_path / "heartbeat.json").write_text(json.dumps(beat))
    code = main(["status", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "heartbeat" in err, err
