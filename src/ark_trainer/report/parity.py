"""The report's "Through OpenClaw" section: each ``eval/<stage>-openclaw.json`` the parity evaluation
(:mod:`ark_trainer.openclaw.parity`, ``eval OUT --through openclaw``) wrote, bare vs through OpenClaw."""

from __future__ import annotations

from pathlib import Path

from ark_trainer.metrics import COMPLIANCE_RATE, MAIN, PREFERENCE_ALIGNMENT, REWARD_MEAN, TASK_SUCCESS
from ark_trainer.report.render import Heading, Para, Table
from ark_trainer.runfolder import RunFolder

# the metrics compared bare and through OpenClaw
METRICS = (*(m for m in MAIN if m != TASK_SUCCESS), COMPLIANCE_RATE, PREFERENCE_ALIGNMENT)


def fmt_metric(metric: str, value, sign: bool = False) -> str:
    if not isinstance(value, float | int):
        return "-"
    if metric == REWARD_MEAN:
        return f"{value:+.3f}" if sign else f"{value:.3f}"
    return f"{100 * value:+.1f}" if sign else f"{100 * value:.1f}%"


def parity_files(out: Path) -> list[dict]:
    """Every ``eval/<stage>-openclaw.json`` of a run (the report's parity table); a torn one is left out."""
    folder = RunFolder(out)
    names = [n for n in folder.eval_names() if n.endswith("-openclaw") and "-openclaw-as-" not in n]
    return [data for data in (folder.eval(n) for n in names) if data.get("name")]


def parity_blocks(out: Path) -> list:
    """The report's "Through OpenClaw" section: per evaluated stage, bare vs through OpenClaw and the gap."""
    results = parity_files(out)
    if not results:
        return []
    blocks: list = [Heading("Through OpenClaw (serving parity)")]
    for result in results:
        bare = result.get("bare") or {}
        rows = [
            [
                k,
                fmt_metric(k, bare.get(k)),
                fmt_metric(k, result.get(k)),
                fmt_metric(k, (result.get("gap") or {}).get(k), sign=True),
            ]
            for k in METRICS
        ]
        shape = result.get("request_shape") or {}
        policy = result.get("prompt_shape") or {}
        blocks += [
            Table(
                [f"{result['name']} (n={result.get('n')})", "bare", "through OpenClaw", "gap (points)"], rows
            ),
            Para(
                f"The held-out prompts sent to the served model as {shape.get('openclaw', 'OpenClaw')} sends a "
                f"turn (request recorded {shape.get('recorded_at', '?')}); served in prompt shape "
                f"{policy.get('shape', '?')} ({policy.get('source', '')}). `ark-trainer eval OUT --through openclaw` "
                "redoes it; docs/openclaw.md, 'Serving parity'."
            ),
        ]
    return blocks
