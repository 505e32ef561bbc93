"""One way to build a command: an options dataclass becomes its argparse flags, and the parsed flags
become an instance of it again.

Every ``ark-trainer`` sub-command declares its options as a dataclass next to the function that runs
it; :func:`add_command` turns the fields into flags (spelled as the field: underscores, as the reference
tool ``ark-trainer-inner``), and calls the function with an instance of the dataclass::

    @dataclass
    class ScoreOptions:
        data_path: str = opt(None, "JSONL to score", required=True)
        json: bool = opt(False, "print JSON", switch=True)

    add_command(sub, "score", ScoreOptions, _score, help="...")

What a field's metadata (set with :func:`opt`) may say: ``help``; ``group`` (a heading in ``--help``);
``aliases`` (other spellings, e.g. the hyphenated ``--dry-run`` of earlier versions, or ``-o``);
``positional``; ``nargs``; ``choices``; ``required``; ``exclusive`` (a named mutually exclusive set);
``switch`` (a bool given without a value, ``--json``; other bools take ``True|False`` as the reference
tool's ``--openclaw_env True`` does, and a bare ``--flag`` means True); ``low`` (the smallest number a
numeric flag takes: 0 unless it says otherwise, as ``train``'s flags; inf and nan are refused). Types come
from the annotation.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

OPTIONS_ATTR = "options_class"
"""The attribute of a built parser naming the dataclass it was generated from (tests check every one)."""


def opt(
    default: Any = None, help: str = "", *, default_factory: Callable[[], Any] | None = None, **meta: Any
) -> Any:
    """A dataclass field carrying its flag's help and metadata (see the module docstring)."""
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata={"help": help, **meta})
    return dataclasses.field(default=default, metadata={"help": help, **meta})


def base_type(hint: Any) -> type:
    """``int | None`` → ``int``; ``list[str]`` → ``str``; other types as they are."""
    if isinstance(hint, types.UnionType):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if typing.get_origin(hint) is list:
        hint = typing.get_args(hint)[0]
    return hint


def _bool(text: str) -> bool:
    """argparse ``type`` for ``True|False`` values: a bad one is a one-line usage error (exit 2)."""
    from ark_trainer.base.errors import UserError
    from ark_trainer.core.config import parse_bool

    try:
        return parse_bool(text, "")
    except UserError:
        raise argparse.ArgumentTypeError(f"expected True or False, got {text!r}") from None


def _number(kind: type, low: float | None) -> Callable[[str], Any]:
    """argparse ``type`` for an int or float flag: a number, and where ``low`` is given at least ``low`` and
    finite, else a one-line usage error (a flag without one is range-checked by its command)."""
    import math

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {'a whole number' if kind is int else 'a number'}, got {text!r}"
            ) from None
        if low is not None and (not math.isfinite(value) or value < low):
            raise argparse.ArgumentTypeError(f"expected a number ≥ {low:g}, got {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its own messages
    return parse


def _default(f: dataclasses.Field) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None if f.default is dataclasses.MISSING else f.default


def _help(f: dataclasses.Field, show_default: bool) -> str:
    text = f.metadata.get("help", "")
    if show_default and f.default not in (None, dataclasses.MISSING) and not f.metadata.get("cli_only"):
        text += f" (default: {f.default})"
    return text


def _kwargs(f: dataclasses.Field, kind: type, given_only: bool, show_default: bool) -> dict[str, Any]:
    """argparse keyword arguments of one field. ``given_only``: no default in the namespace and raw text
    values (``train``: the config layer merges YAML, coerces and reports every bad value at once)."""
    meta = f.metadata
    kw: dict[str, Any] = {"help": _help(f, show_default)}
    kw["default"] = argparse.SUPPRESS if given_only else _default(f)
    if kind is bool and meta.get("switch"):
        kw["action"] = "store_true"
        return kw
    if kind is bool:
        kw.update(nargs="?", const="True" if given_only else True, metavar="True|False")
        if not given_only:
            kw["type"] = _bool
        return kw
    if not given_only and kind in (
        int,
        float,
    ):  # bounded here where it declares a low; else the command checks
        kw["type"] = _number(kind, meta.get("low"))
    for key in ("nargs", "metavar", *(() if given_only else ("choices",))):  # given_only: the config checks
        if key in meta:
            kw[key] = meta[key]
    if not meta.get("positional"):
        kw.setdefault("metavar", f.name.upper())
        if meta.get("required"):
            kw["required"] = True
    return kw


def add_dataclass_args(
    parser: argparse.ArgumentParser,
    options: type,
    *,
    groups: Mapping[str, Sequence[str]] | None = None,
    given_only: bool = False,
    show_defaults: bool = False,
) -> argparse.ArgumentParser:
    """Add one argument per field of ``options`` to ``parser``.

    ``groups`` (heading → field names, in help order) overrides the fields' ``group`` metadata, for a
    dataclass owned elsewhere (``TrainConfig``). Fields with no group go under the parser's "options".
    """
    hints = typing.get_type_hints(options)
    where = _group_of(options, groups)
    containers: dict[str, Any] = {}
    exclusive: dict[str, Any] = {}
    for f in _ordered(options, groups):
        meta = f.metadata
        target = parser
        if where.get(f.name):
            if where[f.name] not in containers:
                containers[where[f.name]] = parser.add_argument_group(where[f.name])
            target = containers[where[f.name]]
        if meta.get("exclusive"):
            if meta["exclusive"] not in exclusive:
                exclusive[meta["exclusive"]] = target.add_mutually_exclusive_group()
            target = exclusive[meta["exclusive"]]
        kw = _kwargs(f, base_type(hints[f.name]), given_only, show_defaults)
        if meta.get("positional"):
            target.add_argument(f.name, **kw)
        else:
            target.add_argument(f"--{f.name}", *meta.get("aliases", ()), dest=f.name, **kw)
    setattr(parser, OPTIONS_ATTR, options)
    return parser


def _group_of(options: type, groups: Mapping[str, Sequence[str]] | None) -> dict[str, str]:
    if groups is None:
        return {f.name: f.metadata.get("group", "") for f in dataclasses.fields(options)}
    return {name: title for title, names in groups.items() for name in names}


def _ordered(options: type, groups: Mapping[str, Sequence[str]] | None) -> list[dataclasses.Field]:
    """Fields in help order: the ``groups`` table's order when given, else declaration order."""
    fields = list(dataclasses.fields(options))
    if groups is None:
        return fields
    rank = {name: i for i, name in enumerate(n for names in groups.values() for n in names)}
    return sorted(fields, key=lambda f: rank.get(f.name, len(rank)))


def parse_into(options: type, namespace: argparse.Namespace) -> Any:
    """The parsed flags as an instance of the options dataclass (argparse's own keys dropped)."""
    names = {f.name for f in dataclasses.fields(options)}
    return options(**{k: v for k, v in vars(namespace).items() if k in names})


def add_command(
    sub: argparse._SubParsersAction,
    name: str,
    options: type,
    func: Callable[[Any], int],
    *,
    help: str,
    description: str | None = None,
    **build: Any,
) -> argparse.ArgumentParser:
    """A sub-command whose flags are ``options``' fields; ``func`` gets an ``options`` instance."""
    parser = sub.add_parser(name, help=help, description=description)
    add_dataclass_args(parser, options, **build)
    parser.set_defaults(func=lambda namespace: func(parse_into(options, namespace)))
    return parser


def add_command_group(
    sub: argparse._SubParsersAction, name: str, *, help: str, metavar: str = "ACTION"
) -> argparse._SubParsersAction:
    """A command that only holds sub-commands (``data collect``, ``rm train``); alone it prints its help."""
    parser = sub.add_parser(name, help=help)
    actions = parser.add_subparsers(dest=f"{name}_command", metavar=metavar, parser_class=type(parser))
    parser.set_defaults(func=lambda _namespace: _usage(parser))
    return actions


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2
