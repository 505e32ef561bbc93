"""YAML read within bounds: file size, nesting depth and alias expansion, checked before anything is built.

A user's YAML (``--config``, ``--reward_config``, ``--feedback_rules``, an accelerate config) can be
hostile or broken: an alias bomb (``a: &a [x, x] b: &b [*a, *a] …``) is tiny on disk but expands
exponentially once a grader's ``params:`` are copied, and 20,000 nested ``[`` blow Python's recursion
limit in the composer. :func:`check_yaml` walks the parser's events (iteratively, no recursion) and
refuses, in one line naming the file and line, more than :data:`MAX_DEPTH` levels or more than
:data:`MAX_NODES` values once every alias is expanded; :func:`read_yaml_file` also refuses files over
:data:`MAX_BYTES`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import read_text_bounded, yaml_error

MAX_BYTES = 1_000_000  # a config or grader spec is a few kB
MAX_DEPTH = 64  # levels of mappings and lists
MAX_NODES = 100_000  # values, with every alias expanded


def check_yaml(text: str, where: str) -> None:
    """Refuse ``text`` when it nests deeper than MAX_DEPTH or expands past MAX_NODES (UserError, one line)."""
    stack: list[list[Any]] = []  # per open collection: [anchor, values inside]
    sizes: dict[str, int] = {}  # anchor → expanded size
    total = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        line = event.start_mark.line + 1 if event.start_mark else 1
        if isinstance(event, yaml.CollectionStartEvent):
            stack.append([event.anchor, 0])
            if len(stack) > MAX_DEPTH:
                raise UserError(
                    f"{where}:{line}: nested deeper than {MAX_DEPTH} levels; no config needs that many, flatten it"
                )
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, inside = stack.pop()
            size = 1 + inside
        elif isinstance(event, yaml.ScalarEvent):
            anchor, size = event.anchor, 1
        elif isinstance(event, yaml.AliasEvent):
            if any(open_anchor == event.anchor for open_anchor, _ in stack):
                raise UserError(
                    f"{where}:{line}: *{event.anchor} refers to a value that contains it; remove the loop"
                )
            anchor, size = None, sizes.get(event.anchor or "", 1)
        else:
            continue
        if anchor:
            sizes[anchor] = size
        if stack:
            stack[-1][1] += size
        else:
            total += size
        if (stack[-1][1] if stack else total) > MAX_NODES:
            raise UserError(
                f"{where}:{line}: its aliases (*name) expand to more than {MAX_NODES} values (an alias bomb?); "
                "write the values out or use fewer aliases"
            )


def safe_load(text: str, where: str, loader: type = yaml.SafeLoader) -> Any:
    """``yaml.load`` with ``loader`` once :func:`check_yaml` passed; YAML errors as one ``where:line`` line."""
    try:
        check_yaml(text, where)
        return yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader (or a subclass of it)
    except yaml.YAMLError as exc:
        raise UserError(yaml_error(where, exc)) from None


def read_yaml_file(path: str | Path, loader: type = yaml.SafeLoader) -> Any:
    """A YAML file's data, within MAX_BYTES, MAX_DEPTH and MAX_NODES (UserError otherwise)."""
    try:
        text = read_text_bounded(path, MAX_BYTES, "a YAML config")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text; save it as UTF-8") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    return safe_load(text, str(path), loader)
