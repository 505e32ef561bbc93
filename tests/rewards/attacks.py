"""Rewards under attack, for the rewards' tests: a judge that redirects, refuses the key or cannot be reached;
a regex that backtracks for ever; rules that are not reward functions; unlabelled data; and ``score`` and
``train`` run on them in-process.

Every server here is a stdlib ``http.server`` on 127.0.0.1; the unresolvable host is answered by a patched
``socket.getaddrinfo`` (``no_dns`` in ``conftest.py``), so no packet leaves the machine.
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from ark_trainer.base.fileio import write_jsonl
from ark_trainer.cli import main

CATASTROPHIC = "a" * 5000 + "!"  # `(a+)+$` backtracks exponentially on it under `re`


class _QuietServer(ThreadingHTTPServer):
    """A client the judge cancelled hangs up mid-reply: that BrokenPipe must not print into a later test."""

    def handle_error(self, request, client_address) -> None:
        pass


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        srv = self.server
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        srv.hits.append(self.headers.get("Authorization"))
        if srv.mode == "redirect":
            self.send_response(302)
            self.send_header("Location", srv.target)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        status, reply = (srv.mode, {"error": "no"}) if isinstance(srv.mode, int) else (200, None)
        reply = reply or {"choices": [{"message": {"role": "assistant", "content": '{"score": 8}'}}]}
        data = json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _serve(mode="ok", target=""):
    srv = _QuietServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads, srv.mode, srv.target, srv.hits = True, mode, target, []
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    return srv


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once the socket is closed


def judge_yaml(tmp_path: Path, base_url: str, **extra) -> Path:
    entry = {
        "name": "judge",
        "type": "llm_judge",
        "base_url": base_url,
        "model": "m",
        "api_key_env": "HARDEN_JUDGE_KEY",
        "rubric": "Rate 1-10: {{sample.output_text}}",
        "range": [1, 10],
        **extra,
    }
    path = tmp_path / "judge.yaml"
    path.write_text(json.dumps({"graders": [entry]}), encoding="utf-8")
    return path


def unlabelled_data(tmp_path: Path, n: int = 8, **extra) -> Path:
    path = tmp_path / "chats.jsonl"
    write_jsonl(path, [{"prompt": f"你好，订单 {i} 在哪？", **extra} for i in range(n)])
    return path


def score(spec: Path, data: Path, capsys) -> tuple[int, str, str]:
    code = main(["score", "--reward_config", str(spec), "--data_path", str(data)])
    out = capsys.readouterr()
    return code, out.out, out.err


def one_error_line(err: str, logs: bool = False) -> str:
    """The one ``error:`` line; with ``logs`` (a train run), log lines may come before it."""
    lines = [line for line in err.splitlines() if line.strip() and (not logs or line.startswith("error: "))]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def train_flags(model: Path, data: Path, out: Path, spec: Path | None, strategy: str = "GRPO") -> list[str]:
    flags = [
        "train", "--strategy", strategy, "--model_path", str(model), "--data_path", str(data),
        "--output_dir", str(out), "--max_train_steps", "2", "--rft_steps", "1" if strategy != "GRPO" else "0",
        "--batch_size", "4", "--num_generations", "2", "--rft_num_samples", "2", "--max_completion_length", "6",
        "--rft_min_reward", "0", "--logging_steps", "1", "--save_steps", "100", "--eval_auto", "False",
        "--device", "cpu", "--heartbeat_interval", "1", "--seed", "3", "--reward_timeout", "30",
        "--stall_timeout", "120",
    ]  # fmt: skip
    return flags + (["--reward_config", str(spec)] if spec else [])


def regex_yaml(tmp_path: Path) -> Path:
    spec = tmp_path / "regex.yaml"
    spec.write_text(
        "graders:\n  - name: ends_in_a\n    type: regex\n    pattern: '(a+)+$'\n"  # timeout: 1 s by default
        "  - name: short\n    type: rule\n    rule: length\n    params: {max_chars: 50}\n",
        encoding="utf-8",
    )
    return spec


def rules_yaml(tmp_path: Path, *rules: str) -> Path:
    spec = tmp_path / "rules.yaml"
    lines = ["graders:"]
    for i, rule in enumerate(rules):
        lines += [f"  - name: r{i}", "    type: rule", f"    rule: '{rule}'"]
    spec.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return spec
