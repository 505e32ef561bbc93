"""The request an OpenClaw turn really sends (``services/openclaw/shape.py``): the shipped one is a real
``openclaw agent --local`` turn of the installed OpenClaw, captured at the server.
"""

from __future__ import annotations

from ark_trainer.services.openclaw.shape import MARKER, load_shape


def test_the_shipped_request_is_a_real_openclaw_turn():
    shape = load_shape()
    body = shape["request"]
    assert shape["openclaw"].startswith("OpenClaw ") and shape["marker"] == MARKER
    system = body["messages"][0]
    assert system["role"] == "system" and "running inside OpenClaw" in system["content"]
    assert len(system["content"]) > 20_000 and len(body["tools"]) >= 10 and body["stream"] is True
    assert MARKER in body["messages"][1]["content"] and body["messages"][1]["content"].startswith("[")
