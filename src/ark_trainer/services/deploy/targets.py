"""Deploy targets: the clients a served model can be handed to. OpenClaw is one; a new one is a module.

A target is a module (or object) with the functions of :class:`DeployTarget`; it is registered by
name in :data:`TARGETS` as a module path, imported only when used. The serving itself (the OpenAI-compatible
server, its key and gate, start/health/stop) is shared: :mod:`ark_trainer.services.deploy.process`. What a target
adds is how its client is pointed at the server and pointed back: for OpenClaw, a validated config patch
with a byte-for-byte rollback and a crash-safe record (:mod:`ark_trainer.services.openclaw.deploy`).

To add a target ``foo``: write ``ark_trainer/foo/deploy.py`` with these functions (start the server with
``deploy.process.start_server``, keep a record so ``rollback`` works after a crash at any point), add
``"foo": "ark_trainer.foo.deploy"`` here, and ``ark-trainer deploy OUT --target foo`` uses it. An installed
package adds one with no edit here, from its plug-in's ``register_deploy_targets(register)`` hook
(``ark_trainer.base.plugins``), calling ``register("foo", "its_pkg.deploy")`` (or the target object itself).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from ark_trainer.base.errors import UserError


@dataclass(frozen=True)
class Serving:
    """How the model server serves, the same for every target: what a target is handed besides its own
    client settings.

    ``port``: on 127.0.0.1 (``None``: a free one); ``record_to``: a JSONL the server appends each exchange to,
    scrubbed (``deploy/record.py``); ``tag`` names what serves (a loop's round) in the server's log and in each
    recorded row; ``prompt_shape``/``system_chars``: the serving policy (``deploy/policy.py``);
    ``reply_tokens``: the answers' length for a model that records none (the live loop's, which its rounds
    train with; ``policy.reply_budget``)."""

    port: int | None = None
    record_to: str | Path | None = None
    tag: str = ""
    prompt_shape: str = "auto"
    system_chars: int = 0
    reply_tokens: int | None = None


class DeployTarget(Protocol):
    """What ``ark-trainer deploy``, ``train --openclaw_env True`` and the live loop call on a target.

    ``client`` holds the target's own settings (OpenClaw: ``agent``, the agent id), which the target checks:
    nothing outside the target knows them."""

    def deploy(
        self,
        out: Path,
        serving: Serving | None = None,
        client: Mapping[str, Any] | None = None,
        log: Any = print,
    ) -> dict:
        """Serve ``OUT/model`` (or a model folder given as ``out``) and point the client at it; returns
        the deployment record."""
        ...

    def swap(self, out: Path, tag: str = "", log: Any = print) -> dict:
        """Serve what ``OUT/model`` points to now on the running deployment's port, key and name (the live
        loop's promotion and rollback); the client's settings are untouched."""
        ...

    def current(self, out: str | Path) -> dict | None:
        """OUT's deployment record for this client, or ``None`` when OUT was never deployed to it."""
        ...

    def status(self, out: str | None) -> dict:
        """The latest deployment (or OUT's): server health, what the client uses now."""
        ...

    def stop(self, out: str | None) -> bool:
        """Stop the model server, leave the client's settings; whether a server was running."""
        ...

    def rollback(self, out: str | None, force: bool = False) -> dict:
        """Restore the client's settings as they were before the deploy and stop the server."""
        ...

    def deploy_after_train(self, out: Path, info: Any, warn: Any) -> dict | None:
        """The end-of-run deploy of ``train``: problems are warnings, never a failed run."""
        ...


TARGETS: dict[str, str | DeployTarget] = {"openclaw": "ark_trainer.services.openclaw.deploy"}
"""Target name → the module that implements :class:`DeployTarget` (imported when used), or the target."""
_plugins_loaded = False


def register_target(name: str, target: str | DeployTarget) -> None:
    """Add a deploy target (a module path or an object with :class:`DeployTarget`'s functions)."""
    if name in TARGETS:
        raise ValueError(f"a deploy target named {name!r} is already registered; pick another name")
    TARGETS[name] = target


def targets() -> dict[str, str | DeployTarget]:
    """Every deploy target by name: the built-in ones, then installed plug-ins' (added on first use)."""
    global _plugins_loaded
    if not _plugins_loaded:
        _plugins_loaded = True
        from ark_trainer.base.plugins import call_hook

        call_hook("register_deploy_targets", register_target)
    return TARGETS


def get_target(name: str = "openclaw") -> DeployTarget:
    """The target registered as ``name``; an unknown name is a one-line error listing the known ones."""
    known = targets()
    if name not in known:
        raise UserError(f"--target: unknown deploy target {name!r}; known: {', '.join(sorted(known))}")
    target = known[name]
    return cast(DeployTarget, importlib.import_module(target)) if isinstance(target, str) else target
