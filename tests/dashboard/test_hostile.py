"""The dashboard answers every request with an HTTP status whatever a run folder holds: a summary it cannot
read lists the run as ``unreadable``; a run it cannot read is a 500 whose JSON error is one line; its log gets
one line, never a traceback; a named pipe where a file belongs never holds a request."""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from ark_trainer.services.dashboard.server import make_server

RUN_YAML = "model_path: m\ndata_path: d\noutput_dir: o\n"
START = '{"event": "run_start", "ts": 1}\n'


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _fifo(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    os.mkfifo(path)


HOSTILE = {  # run folder name → what is done to it
    "events_nested": lambda r: _write(r / "events.jsonl", "[" * 100_000 + "\n"),
    "events_nested_object": lambda r: _write(
        r / "events.jsonl", '{"event": "metrics", "x": ' + "[" * 50_000 + "\n"
    ),
    "events_wrong_types": lambda r: _write(
        r / "events.jsonl",
        '{"event": "metrics", "stage": {"a": 1}, "step": [1], "loss": "x"}\n'
        '{"event": "stage_start", "stage": "rft", "ts": [1]}\n{"event": "stage_end", "stage": "rft", "seconds": {}}\n',
    ),
    "events_binary": lambda r: (r / "events.jsonl").write_bytes(b"\xff\xfe\x00" * 1000 + b"\n"),
    "events_fifo": lambda r: _fifo(r / "events.jsonl"),
    "events_folder": lambda r: ((r / "events.jsonl").unlink(), (r / "events.jsonl").mkdir()),
    "heartbeat_list": lambda r: _write(r / "heartbeat.json", "[1, 2]"),
    "heartbeat_strings": lambda r: _write(
        r / "heartbeat.json", '{"state": "running", "updated_ts": "x", "pid": "y"}'
    ),
    "heartbeat_huge_pid": lambda r: _write(
        r / "heartbeat.json", '{"state": "running", "updated_ts": 1, "pid": 1e300}'
    ),
    "heartbeat_nested": lambda r: _write(r / "heartbeat.json", "[" * 100_000),
    "heartbeat_fifo": lambda r: _fifo(r / "heartbeat.json"),
    "eval_wrong_types": lambda r: _write(
        r / "eval" / "base.json", '{"n": NaN, "task_accuracy": "x", "components": 5, "examples": 3}'
    ),
    "eval_list": lambda r: _write(r / "eval" / "base.json", "[1, 2, 3]"),
    "eval_fifo": lambda r: _fifo(r / "eval" / "base.json"),
    "eval_folder": lambda r: (r / "eval" / "base.json").mkdir(parents=True),
    "log_fifo": lambda r: (_fifo(r / "logs" / "train.log"), _fifo(r / "train.log")),
    "plan_wrong_types": lambda r: _write(r / "plan.json", '{"stages": 5, "strategy": [1]}'),
    "run_yaml_list": lambda r: _write(r / "run.yaml", "- 1\n- 2\n"),
}


@pytest.fixture(scope="module")
def hostile_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    for name, spoil in HOSTILE.items():
        run = root / name
        _write(run / "run.yaml", RUN_YAML)
        _write(run / "events.jsonl", START)
        spoil(run)
    return root


@pytest.fixture(scope="module")
def server(hostile_root):
    srv = make_server([hostile_root], port=0)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _get(srv, path: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{srv.server_port}{path}", timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:  # an answer with a status: what every request must get
        return err.code, json.loads(err.read())


def test_every_hostile_run_is_listed_and_answered_with_a_status(server, hostile_root, capsys):
    status, listing = _get(server, "/api/runs")
    assert status == 200
    runs = {r["name"]: r for r in listing["runs"]}
    assert set(runs) == set(HOSTILE)
    for name, run in runs.items():
        if run["state"] == "unreadable":
            assert "\n" not in run["error"] and run["error"], run
        status, detail = _get(server, "/api/run?key=" + urllib.parse.quote(run["key"]))
        assert status in (200, 500), (name, status)
        if status == 500:
            assert list(detail) == ["error"] and detail["error"].startswith("cannot read this run: "), detail
            assert "\n" not in detail["error"], detail
        else:
            assert detail["name"] == name
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Exception occurred" not in err, err
    assert all(line.startswith("ark dashboard: ") for line in err.splitlines()), err
    assert "a named pipe (FIFO), not a regular file" in _get(server, "/api/run?key=" + urllib.parse.quote(
        runs["events_fifo"]["key"]))[1]["error"]  # fmt: skip


def test_the_server_still_serves_after_the_hostile_requests(server):
    for _ in range(2):
        status, listing = _get(server, "/api/runs")
        assert status == 200 and listing["runs"]
    assert _get(server, "/api/run?key=nothing") == (404, {"error": "no such run"})
