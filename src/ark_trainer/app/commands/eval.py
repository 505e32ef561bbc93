"""``ark-trainer eval OUT --through openclaw`` and ``ark-trainer eval --record-openclaw-shape``.

The first asks a run's held-out set through the model server in the request shape OpenClaw really sends
and writes ``OUT/eval/<stage>-openclaw.json`` next to the bare evaluation, with the gap
(:mod:`ark_trainer.services.openclaw.parity`); the report then carries the table. The second records that shape
again from one real ``openclaw agent --local`` turn of the installed OpenClaw
(:mod:`ark_trainer.services.openclaw.shape`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ark_trainer.app.commands.args import add_command, opt
from ark_trainer.base.errors import UserError


@dataclass
class EvalOptions:
    out: str | None = opt(None, "a train run's --output_dir", positional=True, nargs="?")
    through: str = opt(
        "openclaw",
        "the client whose request shape the prompts are sent in (default: openclaw)",
        choices=("openclaw",),
    )
    stage: str | None = opt(None, "the model to ask: base or a stage of the run (default: the final model)")
    limit: int | None = opt(None, "ask only the first N held-out prompts (default: all)")
    prompt_shape: str = opt(
        "auto",
        "serve with this policy instead of the model's own, to compare (writes <stage>-openclaw-as-<shape>.json)",
        choices=("auto", "bare", "tools", "openclaw-turns", "openclaw"),
    )
    record_openclaw_shape: bool = opt(
        False,
        "record the request an OpenClaw turn sends, from one real `openclaw agent --local` turn, into the "
        "package's openclaw_turn.json (after an OpenClaw upgrade)",
        switch=True,
        aliases=("--record-openclaw-shape",),
    )


def register(sub) -> None:
    add_command(
        sub,
        "eval",
        EvalOptions,
        _cmd_eval,
        help="parity: a run's held-out set asked through the server in OpenClaw's request shape",
        description="Send every held-out prompt of OUT to the model server (OUT's live deployment, else one "
        "started for this) in the request a real OpenClaw turn sends (system prompt, bootstrap files, tools, "
        "the message as OpenClaw wraps it; recorded by --record-openclaw-shape), score the answers with the "
        "run's own reward and metrics, write OUT/eval/<stage>-openclaw.json and print it next to the bare "
        "evaluation OUT/eval/<stage>.json with the gap. The report shows the table (ark-trainer report OUT).",
    )


def _cmd_eval(args: EvalOptions) -> int:
    if args.record_openclaw_shape:
        from ark_trainer.base.external.openclaw_cli import OpenClawError
        from ark_trainer.services.openclaw.shape import record_shape

        try:
            record_shape()
        except OpenClawError as exc:
            raise UserError(f"eval --record-openclaw-shape: {exc}") from None
        return 0
    if args.out is None:
        raise UserError("eval: give the run folder (OUT), or --record-openclaw-shape")
    if args.limit is not None and args.limit < 1:
        raise UserError(f"--limit: expected an integer ≥ 1, got {args.limit}")
    from ark_trainer.core.runtime.signals import sigterm_raises
    from ark_trainer.services.openclaw.parity import evaluate_through_openclaw

    out = Path(args.out)
    with sigterm_raises():  # SIGTERM unwinds like Ctrl-C: the server it started is stopped
        evaluate_through_openclaw(out, args.stage, args.limit, prompt_shape=args.prompt_shape)
    from ark_trainer.core.runfolder import REPORT_MD

    if (out / REPORT_MD).is_file():
        from ark_trainer.stages.report import build_report

        md, _html = build_report(out)
        print(f"report: {md} (with the table)")
    return 0
