"""The report's "Through OpenClaw" section: each ``eval/<stage>-openclaw.json`` the parity evaluation
(:mod:`ark_trainer.services.openclaw.parity`, ``eval OUT --through openclaw``) wrote, bare vs through OpenClaw; the
gap paired prompt by prompt against the stage's own eval file (``core/stats.py``: 95% interval, p)."""

from __future__ import annotations

from pathlib import Path

from ark_trainer.core.metrics import COMPLIANCE_RATE, MAIN, PREFERENCE_ALIGNMENT, REWARD_MEAN, TASK_SUCCESS
from ark_trainer.core.runfolder import RunFolder
from ark_trainer.core.stats import compare_evals, p_text, untested
from ark_trainer.stages.report.render import Heading, Para, Table

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
        direct = _direct(out, result)
        rows = [
            [
                k,
                fmt_metric(k, bare.get(k)),
                fmt_metric(k, result.get(k)),
                fmt_metric(k, (result.get("gap") or {}).get(k), sign=True),
                _paired(direct, result, k),
            ]
            for k in METRICS
        ]
        shape = result.get("request_shape") or {}
        policy = result.get("prompt_shape") or {}
        seen = result.get("system_prompt") or {}
        said = f" System prompt: {seen['note']}." if seen.get("note") else ""
        blocks += [
            Table(
                [
                    f"{result['name']} (n={result.get('n')})",
                    "bare",
                    "through OpenClaw",
                    "gap (points)",
                    "95% interval, p",
                ],
                rows,
            ),
            Para(
                f"The held-out prompts sent to the served model as {shape.get('openclaw', 'OpenClaw')} sends a "
                f"turn (request recorded {shape.get('recorded_at', '?')}); served in prompt shape "
                f"{policy.get('shape', '?')} ({policy.get('source', '')}).{said} `ark-trainer eval OUT --through "
                "openclaw` redoes it; docs/openclaw.md, 'Serving parity'."
            ),
        ]
    return blocks


def _direct(out: Path, result: dict) -> dict:
    """The stage's own eval file, cut to the prompts asked through OpenClaw (``--limit`` asks the first N)."""
    data = RunFolder(out).eval(str(result["name"]).removesuffix("-openclaw"))
    answers = data.get("answers")
    n = len(result.get("answers") or [])
    return {**data, "answers": answers[:n]} if isinstance(answers, list) and n else data


def _paired(direct: dict, through: dict, metric: str) -> str:
    """``[−1.7, +3.3], p = 0.62``: the gap paired prompt by prompt, or why it is not tested."""
    found = compare_evals(direct, through, metric)
    if found is None:
        return (
            "—"
            if not isinstance(through.get(metric), int | float)
            else f"untested: {untested(direct, through, metric)}"
        )
    return f"{found.interval()}, {p_text(found.p)}"
