"""The CLI reference (``docs/cli.md``), generated from the parsers' own ``--help``, so it cannot drift.

    python -m ark_trainer.app.clidoc            # rewrite docs/cli.md
    python -m ark_trainer.app.clidoc --check    # exit 1 when docs/cli.md is stale (the test suite runs this)

Every sub-command and sub-sub-command (``data collect``, ``rm train``, ``skill install``, ...) gets a
section with its help text verbatim. The width is fixed, so the text does not depend on the terminal.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

WIDTH = "100"
PLUGINS = (
    "ARK_TRAINER_PLUGINS"  # ark_trainer.base.plugins.ENV (clidoc imports nothing of the CLI at module level)
)
DOC = Path(__file__).resolve().parents[3] / "docs" / "cli.md"
HEADER = """\
# Command-line reference

Generated from `--help` by `python -m ark_trainer.app.clidoc`; do not edit by hand (a test fails when this
file and the parsers disagree). `ark-trainer` and `ark-trainer-inner` are one program with two names.
"""


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps sub-parsers here; there is no public accessor
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _sections(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> list[tuple[str, str]]:
    found = [(" ".join(path), parser.format_help())]
    for name, child in _subparsers(parser).items():
        found += _sections(child, (*path, name))
    return found


def render() -> str:
    """The whole reference as Markdown."""
    previous, plugins = os.environ.get("COLUMNS"), os.environ.get(PLUGINS)
    os.environ["COLUMNS"] = WIDTH  # argparse wraps at $COLUMNS
    os.environ[PLUGINS] = ""  # the reference is ark-trainer's own: no installed plug-in's command
    try:
        from ark_trainer.cli import build_parser

        parser = build_parser()
        parser.prog = "ark-trainer"
        for name, child in _subparsers(parser).items():
            _rename(child, f"ark-trainer {name}")
        sections = _sections(parser, ("ark-trainer",))
    finally:
        for name, value in (("COLUMNS", previous), (PLUGINS, plugins)):
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    parts = [HEADER]
    for title, text in sections:
        parts.append(f"\n## `{title}`\n\n```text\n{text.rstrip()}\n```\n")
    return "".join(parts)


def _rename(parser: argparse.ArgumentParser, prog: str) -> None:
    """Give every parser a prog that does not depend on how the program was started (argv[0])."""
    parser.prog = prog
    for name, child in _subparsers(parser).items():
        _rename(child, f"{prog} {name}")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = render()
    if "--check" in args:
        if not DOC.is_file() or DOC.read_text(encoding="utf-8") != text:
            print(f"{DOC} is stale: run python -m ark_trainer.app.clidoc", file=sys.stderr)
            return 1
        return 0
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
