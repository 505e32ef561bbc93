"""Deploy targets: the clients a served model can be handed to. OpenClaw is one; a new one is a module.

A target is a module (or object) with the functions of :class:`DeployTarget`; a plug-in's hook
``register_deploy_targets(register)`` registers it by name, as a module path (imported only when used) or as
the target itself. The serving itself (the OpenAI-compatible
server, its key and gate, start/health/stop) is shared: :mod:`ark_trainer.services.deploy.process`. What a target
adds is how its client is pointed at the server and pointed back: for OpenClaw, a validated config patch
with a byte-for-byte rollback and a crash-safe record (:mod:`ark_trainer.services.openclaw.deploy`).

To add a target ``foo``: write ``ark_trainer/foo/deploy.py`` with these functions (start the server with
``deploy.process.start_server``, keep a record so ``rollback`` works after a crash at any point) and a hook
``register_deploy_targets(register)`` calling ``register("foo", "ark_trainer.foo.deploy")`` in a light module
of that package (``ark_trainer/foo/__init__.py``), and list that module in
``ark_trainer.base.plugins.DEFAULT_PLUGINS``; then ``ark-trainer deploy OUT --target foo``, ``train --deploy_target
foo`` and ``loop --deploy_target foo`` use it. An installed package adds one the same way, from its plug-in's
hook, with no edit here (``docs/contributing.md``, "Add a deploy target").
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
    scrubbed (``services/deploy/record.py``); ``tag`` names what serves (a loop's round) in the server's log and in each
    recorded row; ``prompt_shape``/``system_chars``: the serving policy (``services/deploy/policy.py``);
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
    nothing outside the target knows them. Optional: ``label``, the client's name for people (``OpenClaw``;
    the target's name where it has none)."""

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

    # Optional, looked up with getattr by ``train --openclaw_env True``:
    # ``check_before_train(warn, output_dir, model_path, checkpoints) -> dict``, called before training (problems
    # are warnings; what it returns is written to events.jsonl as an event named after the target), and
    # ``evaluate_through(out, log)``, called after a successful end-of-run deploy: the run's held-out set asked
    # through the deployment, for the report (a UserError or OSError is a warning; the deployment stands).


DEFAULT_TARGET = "openclaw"  # --deploy_target's default
_TARGETS: dict[str, str | DeployTarget] = {}
"""Target name → the module that implements :class:`DeployTarget` (imported when used), or the target;
filled by the ``register_deploy_targets`` hooks on first use."""
_loaded = False


def register_target(name: str, target: str | DeployTarget) -> None:
    """Add a deploy target, a module path or an object with :class:`DeployTarget`'s functions (the
    ``register`` of the ``register_deploy_targets`` hook); a name already registered is refused."""
    if name in targets():
        raise ValueError(f"a deploy target named {name!r} is already registered; pick another name")
    _TARGETS[name] = target


def targets() -> dict[str, str | DeployTarget]:
    """Every deploy target by name: the built-in ones, then installed plug-ins' (registered on first use)."""
    global _loaded
    if not _loaded:
        _loaded = True
        from ark_trainer.base.plugins import call_hook

        call_hook("register_deploy_targets", register_target)
    return _TARGETS


def get_target(name: str = DEFAULT_TARGET) -> DeployTarget:
    """The target registered as ``name``; an unknown name is a one-line error listing the known ones."""
    known = targets()
    if name not in known:
        raise UserError(f"--target: unknown deploy target {name!r}; known: {', '.join(sorted(known))}")
    target = known[name]
    return cast(DeployTarget, importlib.import_module(target)) if isinstance(target, str) else target
