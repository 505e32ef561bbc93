"""Plug-ins: installed packages that add a stage, a strategy, a grader kind, a deploy target or a command.

A package declares an entry point in the group ``ark_trainer`` naming one of its modules::

    [project.entry-points.ark_trainer]
    toy = "ark_toy.plugin"

That module defines any of the hook functions of :data:`HOOKS` (like simonw/llm's ``register_commands``
and ``register_models``, without pluggy: one entry-point group and plain functions are enough here). Each
registry calls its hook the first time it is used, so ``import ark_trainer`` loads no plug-in and a
command that needs none (``--help`` of a built-in) imports only the plug-ins' modules, never their heavy
dependencies (keep those inside functions, as ark-trainer's own modules do). A plug-in is handed the
registry's own function: a name that clashes with a built-in (or with another plug-in) is refused with one
line on stderr, and the rest of that plug-in still loads. ``ARK_TRAINER_PLUGINS`` chooses which load
(:func:`enabled`; ``docs/cli.md`` is generated with none). See ``docs/contributing.md``.

A broken package never breaks a command: a plug-in that raises anything on import or in a hook, ``sys.exit``
and ``KeyboardInterrupt`` included, is skipped with one warning line naming it; the entry points are read
one distribution at a time, so a malformed ``entry_points.txt`` (ours or any other package's) costs only
that package.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import Distribution, EntryPoint, distributions
from types import ModuleType
from typing import Any

GROUP = "ark_trainer"
ENV = "ARK_TRAINER_PLUGINS"  # unset: every installed plug-in; "": none; "a,b": those entry points only
HOOKS = {
    "register_stages": "register(StageClass): a training stage (the class decorator of stages/registry.py)",
    "register_strategies": "register(name, Strategy(...)): a line of the strategy table (strategies.py)",
    "register_grader_kinds": "register(type_name, keys, build): a grader type of the reward spec",
    "register_deploy_targets": "register(name, target): a deploy target (deploy/targets.py)",
    "register_commands": "register(name, OptionsClass, func, help=...): an ark-trainer sub-command",
}
"""The hooks a plug-in module may define, each called with the registry's ``register`` function."""


@dataclass(frozen=True)
class Plugin:
    name: str  # the entry point's name
    package: str  # the distribution that declared it, with its version
    module: ModuleType


_imported: dict[str, Plugin | None] = {}  # entry-point name → its plug-in (None: it did not import)
# what a plug-in may raise that must not end ark-trainer: sys.exit() and a KeyboardInterrupt of its own too
_BROKEN = (Exception, SystemExit, KeyboardInterrupt)


def enabled() -> list[Plugin]:
    """The installed plug-ins that ``ARK_TRAINER_PLUGINS`` lets load, their modules imported once: unset,
    all; empty, none; else those named (a comma list of entry-point names), as simonw/llm's
    ``LLM_LOAD_PLUGINS``. One that fails to import is one line, and skipped."""
    wanted = os.environ.get(ENV)
    names = None if wanted is None else {n.strip() for n in wanted.split(",") if n.strip()}
    if names is not None and not names:
        return []
    found = []
    for ep in sorted(_entry_points(), key=lambda e: e.name):
        if names is None or ep.name in names:
            if ep.name not in _imported:
                _imported[ep.name] = _import(ep)
            if (plugin := _imported[ep.name]) is not None:
                found.append(plugin)
    return found


def _entry_points() -> list[EntryPoint]:
    """The entry points of group ``ark_trainer``, one distribution at a time (the first of a name on
    ``sys.path`` wins, as ``importlib.metadata.entry_points`` does): a distribution whose ``entry_points.txt``
    does not parse is skipped, with a warning when it names our group. Names come from the metadata folder's
    name where it gives one, as the standard library's own lookup does: parsing every package's ``METADATA``
    took a quarter of a second of each command on a machine with a thousand packages."""
    found, seen = [], set()
    for dist in distributions():
        try:
            name = _dist_key(dist)
            if name in seen:
                continue
            seen.add(name)
            text = dist.read_text("entry_points.txt") or ""
        except _BROKEN:  # unreadable metadata: not a package we can load anything from
            continue
        if f"[{GROUP}]" not in text:
            continue  # not ours: its entry points are never parsed here
        try:
            eps = [ep for ep in dist.entry_points if ep.group == GROUP]
            for ep in eps:
                ep.module  # noqa: B018 - a malformed value raises here, not later
        except _BROKEN as exc:
            _refuse(
                f"plug-in package {_dist_label(dist)}: its entry_points.txt does not parse ({_why(exc)}); skipped"
            )
            continue
        found.extend(eps)
    return found


def _dist_key(dist: Distribution) -> str:
    """The distribution's normalized name, from its folder's name where it has one (no ``METADATA`` read)."""
    key = getattr(dist, "_normalized_name", None)  # what importlib.metadata.entry_points() dedupes by
    return key if isinstance(key, str) and key else re.sub(r"[-_.]+", "_", str(dist.metadata["Name"])).lower()


def _dist_label(dist: Distribution) -> str:
    try:
        return f"{dist.metadata['Name']} {dist.version}"
    except _BROKEN:
        return "a package with unreadable metadata"


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:200]}" if str(exc) else type(exc).__name__


def _import(ep: EntryPoint) -> Plugin | None:
    dist = f"{ep.dist.name} {ep.dist.version}" if ep.dist else "unknown package"
    try:
        return Plugin(ep.name, dist, importlib.import_module(ep.module))
    except _BROKEN as exc:  # a broken plug-in must not break ark-trainer
        _refuse(f"plug-in {ep.name} ({dist}): {ep.module} does not import ({_why(exc)}); skipped")
        return None


def call_hook(hook: str, register: Callable[..., Any]) -> None:
    """Call ``hook(register)`` of every plug-in that defines it; a refused registration is one line."""
    if hook not in HOOKS:
        raise KeyError(f"no plug-in hook named {hook!r}; hooks: {', '.join(HOOKS)}")
    for plugin in enabled():
        fn = getattr(plugin.module, hook, None)
        if not callable(fn):
            continue
        try:
            fn(_refusing(register, plugin))
        except _BROKEN as exc:  # a broken hook must not break ark-trainer: one line
            _refuse(f"plug-in {plugin.name} ({plugin.package}): {hook} failed ({_why(exc)}); skipped")


def _refusing(register: Callable[..., Any], plugin: Plugin) -> Callable[..., Any]:
    """``register`` for one plug-in: a clash (the registry's ValueError) is refused in one line, not raised."""

    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return register(*args, **kwargs)
        except ValueError as exc:  # the registry's own words: "a stage named 'rft' is already registered"
            reason = str(exc).removesuffix("; pick another name")
            _refuse(
                f"plug-in {plugin.name} ({plugin.package}): {reason}; refused (the plug-in must rename it)"
            )
            return args[0] if args else None  # a class decorator hands its class back

    return guarded


_said: set[str] = set()  # each warning once a process, however many registries read the plug-ins


def _refuse(message: str) -> None:
    if message not in _said:
        _said.add(message)
        print(f"warning: {message}", file=sys.stderr)
