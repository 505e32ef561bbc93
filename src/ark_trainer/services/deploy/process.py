"""The model server behind ``ark-trainer deploy``: start, health, smoke request, stop.

The server is ``python -m ark_trainer.services.deploy.serve`` (``transformers serve`` with the prompt fitted
to the model, see :mod:`ark_trainer.services.deploy.serve`) in its own session on 127.0.0.1, its output in
``OUT/deploy/server.log`` and its pid in ``OUT/deploy/server.pid``. It requires the deployment's key
(``OUT/deploy/api_key``, 0600) on every request; see :mod:`ark_trainer.services.deploy.gate`. Its working folder
is ``OUT/deploy/serve``, which is how :func:`find_servers` finds it when the deploy that started it died
before recording its pid.

A server that only lives for one command (``eval --through openclaw``'s) is started with ``owner=True``: it is
recorded in :func:`servers_dir` before it starts (its folder, and the command's pid and start time), and
:func:`reap_orphans`, which every command runs first, stops the servers of a record whose command is gone
(killed, interrupted while it waited), so none is left running with nothing that can stop it. A deployed
server is meant to outlive its command and is not recorded there (``deploy --stop`` / ``--rollback``).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import atomic_write_text, read_json, read_text_bounded, write_json
from ark_trainer.core.runtime.system import pid_alive, port_taken, process_start, same_process

HOST = "127.0.0.1"
SMOKE_SYSTEM_CHARS = 40_000
# What the server imports beyond the core stack (transformers[serving]; json5 reads OpenClaw's config):
# import name -> the pip distribution that provides it.
SERVING_PACKAGES = {
    "fastapi": "fastapi",
    "uvicorn": "uvicorn",
    "openai": "openai",
    "starlette": "starlette",
    "pydantic": "pydantic",
    "json5": "json5",
}


# The server extends the request handlers of `transformers serve` (deploy/serve.py); 5.25 rewrote them.
SERVING_TRANSFORMERS = (5, 0), (5, 25)  # from, below


def unsupported_transformers() -> str | None:
    """The installed transformers release when the server cannot run on it, else None."""
    import importlib.metadata

    try:
        release = importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        return None  # reported as a missing library elsewhere
    parts = tuple(int(p) for p in release.split("+")[0].split(".")[:2] if p.isdigit())
    low, high = SERVING_TRANSFORMERS
    return None if low <= parts < high else release


def transformers_install_command() -> str:
    (a, b), (c, d) = SERVING_TRANSFORMERS
    return shlex.join([sys.executable, "-m", "pip", "install", f"transformers>={a}.{b},<{c}.{d}"])


def missing_serving_packages() -> list[str]:
    """The serving distributions that are not installed (an install without them cannot deploy)."""
    return [dist for module, dist in SERVING_PACKAGES.items() if importlib.util.find_spec(module) is None]


def serving_install_command(missing: list[str]) -> str:
    return shlex.join([sys.executable, "-m", "pip", "install", *missing])


def check_serving_packages() -> None:
    """One line naming the missing packages and the exact install command, before anything starts."""
    missing = missing_serving_packages()
    if missing:
        raise UserError(
            f"deploy: the model server needs {', '.join(missing)}, not installed in this environment; "
            f"run `{serving_install_command(missing)}`"
        )
    release = unsupported_transformers()
    if release is not None:
        (a, b), (c, d) = SERVING_TRANSFORMERS
        raise UserError(
            f"deploy: the model server runs on transformers {a}.{b} up to (not including) {c}.{d}, "
            f"and {release} is installed; run `{transformers_install_command()}`"
        )


def start_server(
    out: Path,
    name: str,
    port: int,
    window: int,
    reply_tokens: int,
    key_file: Path,
    extra: list[str] | None = None,
    owner: bool = False,
) -> dict:
    """Start the server on ``OUT/model``; ``extra`` flags go to it (``--record PATH --tag TAG``). With
    ``owner``, the server belongs to this command: recorded first, reaped once the command is gone."""
    deploy_dir = out / "deploy"
    serve_dir = deploy_dir / "serve"
    serve_dir.mkdir(parents=True, exist_ok=True)
    record = _owned_record(serve_dir) if owner else None
    if record is not None:  # before the process exists: a kill between Popen and here leaves it findable
        write_json(record, {"serve_dir": str(serve_dir.resolve()), "owner": os.getpid(),
                            "owner_start": process_start(os.getpid()), "pid": None})  # fmt: skip
    link = serve_dir / name
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(Path("..") / ".." / "model")
    log_path = deploy_dir / "server.log"
    argv = [
        sys.executable,
        "-m",
        "ark_trainer.services.deploy.serve",
        name,
        "--host",
        HOST,
        "--port",
        str(port),
    ]
    argv += ["--window", str(window), "--reply_tokens", str(reply_tokens), "--api_key_file", str(key_file)]
    argv += extra or []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[3])] + sys.path)}
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            argv,
            cwd=serve_dir,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
    atomic_write_text(deploy_dir / "server.pid", f"{proc.pid}\n")
    if record is not None:
        write_json(record, {**read_json(record), "pid": proc.pid})
    return {"pid": proc.pid, "port": port, "host": HOST, "log": str(log_path), "argv": argv, "record": record}


def servers_dir() -> Path:
    """Where the servers owned by one command are recorded: ``$ARK_TRAINER_CACHE/servers`` or
    ``~/.cache/ark-trainer/servers``."""
    root = os.environ.get("ARK_TRAINER_CACHE")
    return (Path(root).expanduser() if root else Path.home() / ".cache" / "ark-trainer") / "servers"


def _owned_record(serve_dir: Path) -> Path:
    return servers_dir() / (hashlib.sha256(str(serve_dir.resolve()).encode()).hexdigest()[:16] + ".json")


def stop_owned(server: dict) -> None:
    """Stop a server started with ``owner=True`` (and any other one in its folder) and drop its record."""
    serve_dir = Path(server["log"]).parent / "serve"
    for pid in {server["pid"], *find_servers(serve_dir)}:
        stop_server(pid)
    if server.get("record"):
        Path(server["record"]).unlink(missing_ok=True)


def reap_orphans() -> list[int]:
    """Stop the servers whose owning command is gone; returns their pids. Cheap when none is recorded."""
    folder, reaped = servers_dir(), []
    try:
        records = list(folder.glob("*.json"))
    except OSError:
        return []
    for path in records:
        try:
            data = read_json(path, 4096)
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
            continue
        if not isinstance(data, dict) or same_process(data.get("owner"), data.get("owner_start")):
            continue  # its command still runs (or a record we cannot read: dropped above)
        pids = set(find_servers(Path(str(data.get("serve_dir")))))
        if isinstance(data.get("pid"), int):
            pids.add(data["pid"])
        reaped += [pid for pid in pids if stop_server(pid)]
        path.unlink(missing_ok=True)
    return reaped


def port_in_use_error(port: int, flag: str = "--port") -> UserError:
    return UserError(
        f"deploy: port {port} on {HOST} is already in use by another program; choose a free port with "
        f"{flag} P, or leave {flag} out to have a free one picked"
    )


def check_port_range(port: int, flag: str = "--port") -> None:
    """A TCP port number (binding one outside 1..65535 raises OverflowError)."""
    if not 1 <= port <= 65535:
        raise UserError(f"{flag}: expected 1..65535 (or leave it out to have a free one picked), got {port}")


def check_port(port: int, flag: str = "--port") -> None:
    """Refuse a port outside TCP's range or one something else already holds, before anything is started
    or written."""
    check_port_range(port, flag)
    if port_taken(HOST, port):
        raise port_in_use_error(port, flag)


def is_our_server(pid: int) -> bool:
    """The pid still runs ``ark_trainer.services.deploy.serve`` (a pid reused after a reboot is left alone)."""
    try:
        return b"ark_trainer.services.deploy.serve" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def find_servers(serve_dir: Path) -> list[int]:
    """Live model servers working in ``serve_dir``, found from /proc (this user's processes only)."""
    target, pids = str(Path(serve_dir).resolve()), []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if cwd == target and is_our_server(int(proc.name)) and pid_alive(int(proc.name)):
            pids.append(int(proc.name))
    return pids


def stop_server(pid: int, timeout: float = 20) -> bool:
    """SIGTERM the server's process group, then SIGKILL; True if it was running."""
    if not pid_alive(pid) or not is_our_server(pid):
        return False
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.time() + timeout
    while time.time() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        if not pid_alive(pid):
            return True
        time.sleep(0.2)
    os.killpg(pid, signal.SIGKILL)
    return True


def get_json(url: str, key: str | None = None, timeout: float = 5) -> dict:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as resp:
        return json.loads(resp.read())


def read_key(path: str | Path | None) -> str | None:
    try:
        return read_text_bounded(path).strip() if path else None
    except OSError:
        return None


def wait_healthy(server: dict, key: str, timeout: float = 300) -> None:
    url = f"http://{server['host']}:{server['port']}/health"
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not pid_alive(server["pid"]):
            if "address already in use" in _tail(server["log"], 40).lower():  # taken since the check
                raise port_in_use_error(server["port"])
            last = _tail(server["log"], 1).strip()[:300]
            raise UserError(f"deploy: the model server exited at start ({last}); see {server['log']}")
        try:
            if get_json(url, key).get("status") == "ok":
                return
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(0.5)
    raise UserError(
        f"deploy: the model server did not answer {url} within {timeout:.0f}s; see {server['log']}"
    )


def _tail(path: str, lines: int = 8) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def server_said(exc: urllib.error.HTTPError) -> str:
    """An error answer of the model server in one line: ``HTTP 400: <its error.message>`` (OpenAI's error
    body, e.g. ``chat template failed to render: …``), else the start of the body, else urllib's reason."""
    try:
        raw = exc.read(64 * 1024).decode("utf-8", "replace")
    except OSError:
        raw = ""
    try:
        message = json.loads(raw)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = raw
    text = " ".join(str(message).split())[:300] or str(exc.reason)
    return f"HTTP {exc.code}: {text}"


SMOKE_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} (smoke test)",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
    for name in ("read", "ls")
]


def smoke_request(base_url: str, model: str, key: str, timeout: float = 300) -> dict:
    """What an OpenClaw turn sends: stream, tools, a 40k-char system prompt; returns what came back."""
    system = ("You are a personal assistant running inside OpenClaw. " * 800)[:SMOKE_SYSTEM_CHARS]
    body = {
        "model": model,
        "stream": True,
        "stream_options": {"include_usage": True},
        "tool_choice": "auto",
        "tools": SMOKE_TOOLS,
        "max_completion_tokens": 16,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": "你好，请回复。"}],
    }
    req = urllib.request.Request(
        f"{base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}", "X-Ark-Smoke": "1"},
    )
    text, chunks, finish = [], 0, None
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            for raw in resp:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[5:])
                chunks += 1
                for choice in chunk.get("choices") or []:
                    delta = choice.get("delta") or {}
                    text.append(delta.get("content") or "")
                    text += [json.dumps(c) for c in delta.get("tool_calls") or []]
                    finish = choice.get("finish_reason") or finish
    except urllib.error.HTTPError as exc:
        raise UserError(f"deploy: smoke request to {base_url} failed: {server_said(exc)}") from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise UserError(f"deploy: smoke request to {base_url} failed: {exc}") from exc
    if not chunks or not "".join(text) or finish is None:
        raise UserError(f"deploy: smoke request got no streamed answer ({chunks} chunks, finish {finish})")
    return {"chunks": chunks, "text": "".join(text), "finish_reason": finish}
