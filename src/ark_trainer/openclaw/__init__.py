"""OpenClaw integration. For now: detect the CLI for ``--openclaw_env True`` (never fatal).

Environment checks in depth, deploy and trajectory collection build on this (see the README's roadmap).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable


def check_openclaw(warn: Callable[[str], None]) -> dict:
    """Find the ``openclaw`` CLI and its version; a missing or broken CLI is a warning, not an error."""
    path = shutil.which("openclaw")
    if path is None:
        warn(
            "--openclaw_env True: the OpenClaw CLI is not on PATH; training goes on without OpenClaw "
            "(install it with `npm install openclaw`, see the README)"
        )
        return {"found": False}
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
        version = (proc.stdout or proc.stderr).strip().splitlines()[0] if proc.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, IndexError):
        version = None
    if version is None:
        warn(
            f"--openclaw_env True: {path} did not answer `openclaw --version`; training goes on without OpenClaw"
        )
        return {"found": True, "path": path, "version": None}
    warn(
        f"--openclaw_env True: found OpenClaw {version}; deploying the model into it is not available yet, "
        "so the trained model stays in OUT/model"
    )
    return {"found": True, "path": path, "version": version}
