"""The dashboard's HTTP server: the page, its static files, and two JSON endpoints, on 127.0.0.1 only.

- ``GET /``                   the page (``static/index.html``)
- ``GET /static/NAME``        the page's script and styles, uPlot
- ``GET /api/runs``           the runs found under the folders given, with their heartbeat status
- ``GET /api/run?key=KEY``    one run: metrics per stage, stage timeline, evals, examples, diagnosis

Standard library only (``http.server``); one thread per request. Only runs found under the folders given
are served, by key, so the server never reads a path taken from a request.

Whatever a run folder holds (a file edited by hand, JSON nested 100,000 deep, a heartbeat that is a list, a
named pipe where a file belongs), every request gets an HTTP answer: a run whose summary cannot be read is
listed as ``unreadable`` with the reason, a run whose detail cannot be read is a 500 whose JSON ``error`` is
one line, and the server's log gets that one line, never a traceback or a dropped connection. Files are read
only when they are regular files within their byte bounds (a named pipe would block the request forever).
"""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from ark_trainer.base.fileio import MAX_LINES_BYTES, UnreadableFile, file_kind, read_bounded
from ark_trainer.core.runcheck import BadRunFile
from ark_trainer.core.runfolder import EventLog, RunFolder
from ark_trainer.services.dashboard.payload import (
    eval_tables,
    find_runs,
    run_summary,
    stage_metrics,
    timeline,
)

STATIC = Path(__file__).resolve().parent / "static"
TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}
DIAGNOSIS_EVERY = 5.0  # seconds: the diagnosis re-reads the whole folder, so not on every poll
REASON_CHARS = 300  # of an exception's message in an answer or the log


def reason(exc: BaseException) -> str:
    """An exception in one line of at most :data:`REASON_CHARS` characters."""
    from ark_trainer.base.errors import UserError

    said = (
        str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
    )  # a UserError says it all
    text = " ".join(said.split())
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


def check_events_file(path: Path) -> None:
    """Refuse (:class:`UnreadableFile`) an ``events.jsonl`` that is not a regular file within
    :data:`MAX_LINES_BYTES`: :class:`EventLog` opens it plainly, and a named pipe would block the request."""
    try:
        st = os.stat(path)
    except OSError:
        return  # absent: the run has no events yet
    if not stat.S_ISREG(st.st_mode):
        raise UnreadableFile(
            f"{path}: {file_kind(st.st_mode)}, not a regular file; the run's events cannot be read"
        )
    if st.st_size > MAX_LINES_BYTES:
        raise UnreadableFile(
            f"{path}: {st.st_size} bytes, over {MAX_LINES_BYTES}; the dashboard does not read it"
        )


class Runs:
    """The runs under ``roots``, found again on each listing; per run a cached event log and diagnosis."""

    def __init__(self, roots: list[Path]) -> None:
        self.roots = roots
        self.found: dict[str, Path] = {}
        self.logs: dict[str, EventLog] = {}
        self.slow: dict[str, tuple[float, str, dict[str, Any]]] = {}
        self.lock = threading.Lock()

    def listing(self) -> list[dict[str, Any]]:
        found = find_runs(self.roots)
        with self.lock:
            self.found = found
        return [self._summary(key, folder) for key, folder in found.items()]

    @staticmethod
    def _summary(key: str, folder: Path) -> dict[str, Any]:
        """The run's summary; one that cannot be read is listed as ``unreadable`` with the reason."""
        try:
            return run_summary(key, folder)
        except Exception as exc:  # noqa: BLE001 - a hostile run folder must not hide the other runs
            why = reason(exc)
            log_line(f"{folder}: {why}")
            return {"key": key, "name": folder.name, "path": str(folder), "state": "unreadable", "error": why}

    def detail(self, key: str) -> dict[str, Any] | None:
        with self.lock:
            folder = self.found.get(key)
            if folder is None:
                return None
            log = self.logs.setdefault(key, EventLog(RunFolder(folder).events_path))
        check_events_file(log.path)
        events = log.read()
        summary = run_summary(key, folder)
        return {
            **summary,
            "stages": stage_metrics(events),
            "timeline": timeline(events),
            **self._slow_parts(key, folder, f"{len(events)} {summary['state']}"),
        }

    def _slow_parts(self, key: str, folder: Path, version: str) -> dict[str, Any]:
        """Diagnosis and eval tables, recomputed when events or the state changed, at most every few seconds."""
        from ark_trainer.stages.diagnose import diagnose, to_json

        cached = self.slow.get(key)
        now = time.time()
        if cached and (cached[1] == version or now - cached[0] < DIAGNOSIS_EVERY):
            return cached[2]
        try:
            parts = {"evals": eval_tables(folder), "diagnosis": to_json(diagnose(folder))}
        except BadRunFile as exc:  # a file holding what no run writes: shown, not a dropped connection
            what, _, fix = str(exc).partition("; ")
            finding = {
                "code": "bad_run_file",
                "severity": "error",
                "stage": "run",
                "evidence": what,
                "fix": fix,
            }
            parts = {"evals": {}, "diagnosis": {"status": "unknown", "findings": [finding]}}
        self.slow[key] = (now, version, parts)
        return parts


def log_line(text: str) -> None:
    """One line in the server's log (its stderr)."""
    print(f"ark dashboard: {text}", file=sys.stderr, flush=True)


class Handler(BaseHTTPRequestHandler):
    """One request; :func:`make_handler` gives it the runs to serve."""

    runs: Runs
    answered = False  # set once this request's status line is sent

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.answered = False
        try:
            self._route()
        except (BrokenPipeError, ConnectionResetError):  # the client left: nobody to answer
            self.close_connection = True
        except Exception as exc:  # noqa: BLE001 - every request gets an HTTP answer, whatever the folder holds
            self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        """A 500 whose JSON error is one line, and that line in the log."""
        why = reason(exc)
        log_line(f"GET {self.path[:200]}: {why}")
        if self.answered:  # the answer had started: end the connection rather than send a second one
            self.close_connection = True
            return
        body = json.dumps({"error": f"cannot read this run: {why}"}, ensure_ascii=False).encode()
        self._send(HTTPStatus.INTERNAL_SERVER_ERROR, body, "application/json; charset=utf-8")

    def _route(self) -> None:
        from ark_trainer.core.runtime.system import loopback_hosts

        if self.headers.get("Host") not in loopback_hosts(getattr(self.server, "server_port", 0)):
            self._send(HTTPStatus.FORBIDDEN, b"unexpected Host header", "text/plain")  # DNS rebinding
            return
        url = urlparse(self.path)
        if url.path in ("/", "/index.html"):
            self._file(STATIC / "index.html")
        elif url.path.startswith("/static/"):
            self._static(url.path[len("/static/") :])
        elif url.path == "/api/runs":
            self._json({"runs": self.runs.listing()})
        elif url.path == "/api/run":
            key = (parse_qs(url.query).get("key") or [""])[0]
            detail = self.runs.detail(key)
            if detail is None:
                self._send(HTTPStatus.NOT_FOUND, b'{"error": "no such run"}', "application/json")
            else:
                self._json(detail)
        else:
            self._send(HTTPStatus.NOT_FOUND, b"not found", "text/plain")

    def _static(self, name: str) -> None:
        path = STATIC / name
        ok = "/" not in name and path.is_file()
        self._file(path) if ok else self._send(HTTPStatus.NOT_FOUND, b"not found", "text/plain")

    def _file(self, path: Path) -> None:
        kind = TYPES.get(path.suffix, "application/octet-stream")
        self._send(HTTPStatus.OK, read_bounded(path), kind + "; charset=utf-8")

    def _json(self, data: Any) -> None:
        body = json.dumps(data, ensure_ascii=False, default=str).encode("utf-8")
        self._send(HTTPStatus.OK, body, "application/json; charset=utf-8")

    def _send(self, status: HTTPStatus, body: bytes, kind: str) -> None:
        self.answered = True
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet: one line per poll is noise
        return


def make_handler(runs: Runs) -> type[BaseHTTPRequestHandler]:
    return type("RunsHandler", (Handler,), {"runs": runs})


def make_server(roots: list[Path], port: int = 0, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """A server for the runs under ``roots`` (port 0: a free one; ``server.server_port`` says which)."""
    server = ThreadingHTTPServer((host, port), make_handler(Runs(roots)))
    server.daemon_threads = True
    return server
