"""Deploying a run in a test: a run folder with a tiny model, OpenClaw's config with a user's secret in it,
the model servers alive for a run (found from /proc), and a request with or without the deployment's key.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path

from ark_trainer.core.runtime.system import pid_alive
from tests.conftest import save_tiny_qwen

CONFIG = """// hand-written, with a secret
{
  models: { providers: { x: {
    baseUrl: "http://127.0.0.1:9/v1", apiKey: "sk-user-secret", api: "openai-completions",
    models: [{ id: "m", name: "m", contextWindow: 32768, maxTokens: 256 }],
  } } },
}
"""


def _run_dir(tmp_path: Path) -> Path:
    """A run folder with a tiny random model, seeded: an unseeded one sometimes greedily repeats a special
    token, whose text is empty, and the deploy's smoke request then rightly refuses it (seen once in CI)."""
    import torch

    from ark_trainer.core.folders import claim_folder

    out = claim_folder(tmp_path / "run")  # a run of ours: deploy writes OUT/deploy/ inside it
    torch.manual_seed(0)
    save_tiny_qwen(out / "model")
    return out


def _config(mode: int = 0o600) -> Path:
    config = Path(os.environ["OPENCLAW_STATE_DIR"]) / "openclaw.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(CONFIG)
    config.chmod(mode)
    return config


def _servers(out: Path) -> list[int]:
    """Live model-server processes started for ``out`` (found from /proc, not from deploy's records)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes()
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if (
            b"ark_trainer.services.deploy.serve" in cmd
            and cwd.startswith(str(out))
            and pid_alive(int(proc.name))
        ):
            pids.append(int(proc.name))
    return pids


def _request(url: str, key: str | None, method: str = "GET", body: bytes | None = None, **headers) -> int:
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            resp.read()
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
