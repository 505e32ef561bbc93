"""``ark-trainer data collect --openclaw [--agent ID] [--since DATE] -o FILE``.

Collects the OpenClaw agent's conversations as training JSONL (see :mod:`ark_trainer.data.collect`):
secrets and personal data are scrubbed before anything is written, and the file is written only if
``train``'s own validation accepts it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from ark_trainer.app.commands.args import add_command, add_command_group, opt
from ark_trainer.base.errors import UserError


@dataclass
class CollectOptions:
    openclaw: bool = opt(False, "collect from OpenClaw (the only source for now)", switch=True)
    agent: str | None = opt(None, "OpenClaw agent id (default: OpenClaw's default agent)")
    since: str | None = opt(None, "only messages from this date on (YYYY-MM-DD or ISO time)")
    output: str = opt(None, "the JSONL file to write", required=True, aliases=("-o",))


def register(sub) -> None:
    actions = add_command_group(
        sub, "data", help="data tools: collect OpenClaw conversations as training JSONL"
    )
    add_command(
        actions, "collect", CollectOptions, _cmd_collect, help="OpenClaw sessions -> scrubbed training JSONL"
    )


def _cmd_collect(args: CollectOptions) -> int:
    from ark_trainer.base.external import openclaw_cli as cli
    from ark_trainer.data.collect import collect, write_rows

    if not args.openclaw:
        raise UserError("data collect: give --openclaw (the source to collect from)")
    from ark_trainer.core.folders import check_output_file

    check_output_file(args.output, "-o")  # before anything is read: never over a file of another kind
    try:
        result = collect(agent=args.agent, since=args.since)
    except cli.OpenClawError as exc:
        raise UserError(f"data collect: {exc}") from exc
    if not result.rows:
        raise UserError(
            f"data collect: no assistant messages found ({result.sessions} sessions, {result.legacy} legacy "
            "files); talk to the agent first, or widen --since/--agent"
        )
    for why in result.skipped:
        print(f"warning: session skipped: {why}", file=sys.stderr)
    for path, count in result.torn.items():
        print(
            f"warning: {path}: {count} unreadable line(s) skipped (a torn last line: OpenClaw was still "
            "writing it); the rest of the session is collected",
            file=sys.stderr,
        )
    out = Path(args.output)
    write_rows(result.rows, out)
    scrubbed = ", ".join(f"{k} {v}" for k, v in sorted(result.scrubbed.items())) or "nothing"
    print(
        f"wrote {len(result.rows)} rows to {out} from {result.sessions} sessions and {result.legacy} legacy "
        f"files; scrubbed: {scrubbed}",
        file=sys.stdout,
    )
    return 0
