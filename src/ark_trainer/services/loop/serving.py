"""What the loop serves: ``LOOP/model`` is a symlink to a complete model, and the server follows it.

The loop folder is a deploy folder: ``ark-trainer deploy`` serves ``LOOP/model`` (through
``LOOP/deploy/serve/NAME``), records the OpenClaw config for ``--rollback``, and the server records every
exchange into ``LOOP/turns/turns.jsonl``. Promoting round N (or rolling back to it) repoints the symlink
atomically (a new link renamed over the old one) to ``LOOP/rounds/N/model``, which was complete before it
was evaluated, then restarts the server on the same port, key and model id
(:func:`ark_trainer.services.openclaw.deploy.swap`); OpenClaw's config does not change.
"""

from __future__ import annotations

import os
from pathlib import Path

TURNS = Path("turns") / "turns.jsonl"


def tag(round_id: int) -> str:
    return f"round-{round_id}"


def point_model(loop: Path, model: Path) -> None:
    """Make ``LOOP/model`` point to ``model`` in one rename (never missing, never half a model)."""
    link = Path(loop) / "model"
    tmp = Path(loop) / ".model.next"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(Path(model).resolve())
    os.replace(tmp, link)


TARGET = "openclaw"
"""The deploy target the loop serves through (:mod:`ark_trainer.services.deploy.targets`): the agent whose turns it
learns from is an OpenClaw agent."""


def deployment_alive(loop: Path, target: str = TARGET) -> bool:
    from ark_trainer.services.deploy.targets import get_target

    try:
        return get_target(target).status(str(loop))["server"] == "healthy"
    except Exception:  # noqa: BLE001 - no deployment yet, or an unreadable one: not alive
        return False


def serve(
    loop: Path, round_id: int, port: int | None, agent: str | None, log=print, target: str = TARGET,
    reply_tokens: int | None = None,
) -> None:  # fmt: skip
    """Serve ``LOOP/model`` as ``round_id``: a fresh deploy (recording on), or a swap of the running server."""
    from ark_trainer.services.deploy.targets import Serving, get_target

    client = get_target(target)
    record = client.current(loop)
    if record is not None and record.get("state") == "deployed" and record.get("pid"):
        if tag(round_id) in (record.get("serve_args") or []) and deployment_alive(loop, target):
            log(f"loop: the server (pid {record['pid']}) already serves {tag(round_id)}")
            return  # a restarted supervisor: the agent sees nothing
        client.swap(loop, tag(round_id), log=log)
        return
    serving = Serving(port=port, record_to=Path(loop) / TURNS, tag=tag(round_id), reply_tokens=reply_tokens)
    client.deploy(Path(loop), serving, client={"agent": agent} if agent else {}, log=log)
