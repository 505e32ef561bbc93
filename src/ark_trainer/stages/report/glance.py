"""The report at a glance: what a reader takes in first, before the detailed sections.

- a bar chart of the headline rates per model (base → RFT → GRPO, and any later stage);
- a table of the final model (the stage ``OUT/model`` is) against the base, with the change in percentage
  points kept apart from the relative change (``+5.0 pts`` and ``+20%`` are different claims);
- a note when ``pass_rate`` and ``task_accuracy`` coincide (they measure different things: the composite
  reward reaching ``--pass_threshold``, and the verdict being exactly right), so nobody reads it as a bug;
- the final model's best answers next to its worst ones (successes and failures), from ``eval/<final>.json``
  and the test split's prompts in ``data/test.jsonl``; an agent episode's answer is what it did: each tool call
  with its arguments and result, the final text and the outcome;
- the page's language (``<html lang>``) from the task: Chinese when the task or its prompts are.

Used by :mod:`ark_trainer.stages.report`; reads only what the run folder holds.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

from ark_trainer.base.fileio import atomic_write_bytes, jsonl_file_lines
from ark_trainer.core.metrics import HEADLINE, PASS_RATE, PERCENTS, RATES, TASK_ACCURACY, TASK_SUCCESS
from ark_trainer.core.runfolder import RunFolder
from ark_trainer.data.split import sizes_line
from ark_trainer.stages.report.render import Block, Heading, Image, Para, Table

N_EACH = 3  # successes and failures shown
MAX_CHARS = 300
CJK = re.compile(r"[\u4e00-\u9fff]")


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return float(value)


def _show(metric: str, value: Any) -> str:
    number = _num(value)
    if number is None:
        return "—"
    return f"{number * 100:.1f}%" if metric in PERCENTS else f"{number:.3f}"


def changes(metric: str, value: Any, base: Any) -> tuple[str, str]:
    """(absolute change, relative change): ``+5.0 pts`` / ``+0.120`` and ``+20.0%`` (``—`` when undefined)."""
    number, reference = _num(value), _num(base)
    if number is None or reference is None:
        return "—", "—"
    delta = number - reference
    absolute = f"{delta * 100:+.1f} pts" if metric in PERCENTS else f"{delta:+.3f}"
    relative = f"{delta / abs(reference) * 100:+.1f}%" if reference else "— (base is 0)"
    return absolute, relative


def glance_blocks(run_dir: Path, evals: dict[str, dict[str, Any]], labels: dict[str, str]) -> list[Block]:
    """The "At a glance" section; ``evals`` in model order (base first), ``labels`` their display names."""
    if "base" not in evals or len(evals) < 2:
        return []
    final = RunFolder(run_dir).final_name(list(evals)) or list(evals)[-1]  # the stage OUT/model is
    blocks: list[Block] = [Heading("At a glance")]
    chart = headline_chart(evals, labels, RunFolder(run_dir).plot_dir)
    if chart:
        blocks.append(chart)
    rows = []
    for metric in (*HEADLINE, TASK_SUCCESS):  # one no model measured (an agent run's compliance): left out
        base, last = evals["base"].get(metric), evals[final].get(metric)
        if _num(base) is None and _num(last) is None:
            continue
        tested = _tested(evals["base"], evals[final], metric)
        rows.append([metric, _show(metric, base), _show(metric, last), *changes(metric, last, base), tested])
    name = labels.get(final, final)
    header = ["metric", "base", f"final ({name})", "change (points)", "change (relative to base)"]
    header.append("95% interval, n, p (paired)")
    blocks.append(Table(header, rows))
    if line := sizes_line(RunFolder(run_dir).data_stats().get("splits")):
        blocks.append(Para(line))  # which prompts these figures are on, and what they can tell apart
    note = coincide_note(evals)
    if note:
        blocks.append(Para(note))
    return blocks + examples_blocks(Path(run_dir), final, evals[final], name)


def _tested(base: dict[str, Any], final: dict[str, Any], metric: str) -> str:
    """``[+11.2, +24.6], n = 100, p < 0.001, significant gain`` (``core/stats.py``), or why it is not tested."""
    from ark_trainer.core.stats import TESTED, compare_evals, untested

    if metric not in TESTED:
        return "—"
    found = compare_evals(base, final, metric)
    if found is None:
        return (
            f"no paired test: {untested(base, final, metric)}" if _num(final.get(metric)) is not None else "—"
        )
    return f"{found.interval()}, {found.stats()}"


def coincide_note(evals: dict[str, dict[str, Any]]) -> str:
    pairs = [(_num(e.get(PASS_RATE)), _num(e.get(TASK_ACCURACY))) for e in evals.values()]
    if not pairs or any(p is None or a is None or abs(p - a) > 1e-9 for p, a in pairs):
        return ""
    meaning = (
        "pass_rate is the share of answers whose composite reward reaches --pass_threshold, task_accuracy the "
        "share of labelled prompts answered exactly right (verdict and type)"
    )
    if all(p == 0 for p, _ in pairs):
        return f"pass_rate and task_accuracy are both 0% for every model: no answer passed and none was right ({meaning})."
    return (
        f"pass_rate and task_accuracy are equal here, and that is not a mistake: {meaning}; with this reward "
        "spec an answer reaches the threshold exactly when it is right."
    )


def headline_chart(evals: dict[str, dict[str, Any]], labels: dict[str, str], plots_dir: Path) -> Image | None:
    """Grouped bars: each headline rate, one bar per model. None when no rate was measured."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    metrics = [m for m in (*RATES, TASK_SUCCESS) if any(_num(e.get(m)) is not None for e in evals.values())]
    if not metrics:
        return None
    fig = Figure(figsize=(7.2, 3.4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    width = 0.8 / len(evals)
    for i, (key, data) in enumerate(evals.items()):
        xs = [j + (i - (len(evals) - 1) / 2) * width for j in range(len(metrics))]
        values = [(_num(data.get(m)) or 0.0) * 100 for m in metrics]
        bars = ax.bar(xs, values, width, label=labels.get(key, key))
        ax.bar_label(bars, fmt="%.0f", fontsize=7)
    ax.set_xticks(range(len(metrics)), [m.replace("_", "\n", 1) for m in metrics])  # long names side by side
    ax.set(ylabel="%", ylim=(0, 105), title="Headline metrics per model")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)  # beside the bars, never over one
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png")
    atomic_write_bytes(plots_dir / "headline.png", png.getvalue())
    return Image("plots/headline.png", "Headline metrics per model")


def _prompts(run_dir: Path) -> list[str]:
    try:
        lines = jsonl_file_lines(RunFolder(run_dir).test_rows_file(), "replace")
    except OSError:
        return []
    prompts = []
    for line in lines:
        if not line.strip():
            continue  # the loader skips blank lines too, so answers stay aligned
        try:
            prompts.append(prompt_text(json.loads(line)))
        except (ValueError, AttributeError):
            return []
    return prompts


def prompt_text(row: dict) -> str:
    """The text a held-out row asks, in any shape the loader reads: ``prompt`` (text or chat), ``question``
    (the QC demo's), or ``messages`` (its last user turn; a trailing assistant turn is the answer)."""
    for key in ("prompt", "question", "messages"):
        if key in row:
            value = row[key]
            break
    else:
        return ""
    if isinstance(value, list):
        turns = [m for m in value if isinstance(m, dict)]
        users = [m for m in turns if m.get("role") == "user"]
        value = (users or turns or [{}])[-1].get("content", "")
    return str(value)


def _clip(text: Any) -> str:
    """The text within ``MAX_CHARS``, its lines kept (a dialogue's turns, an answer's three lines)."""
    text = "\n".join(" ".join(line.split()) for line in str(text).splitlines() if line.strip())
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1] + "…"


def examples_blocks(run_dir: Path, final: str, data: dict[str, Any], name: str) -> list[Block]:
    """The final model's best and worst held-out answers, side by side."""
    answers, prompts = data.get("answers") or [], _prompts(run_dir)
    if len(prompts) > len(answers):  # --max_eval_samples kept the first rows of the user's own file
        prompts = prompts[: len(answers)]
    if len(answers) != len(prompts) or len(answers) < 2:
        return []
    scored = sorted(
        (i for i, a in enumerate(answers) if _num(a.get("reward")) is not None),
        key=lambda i: answers[i]["reward"],
    )
    k = min(N_EACH, len(scored) // 2)
    if (
        not k or answers[scored[-1]]["reward"] <= answers[scored[0]]["reward"]
    ):  # all alike: nothing to contrast
        return []
    best, worst = scored[::-1][:k], scored[:k]
    rows = []
    for good, bad in zip(best, worst, strict=True):
        cells = []
        for i in (good, bad):
            cells += [f"{answers[i]['reward']:.3f}", _clip(prompts[i]), _clip(_answer_text(answers[i]))]
        rows.append(cells)
    header = ["reward", "prompt (success)", "answer", "reward", "prompt (failure)", "answer"]
    intro = f"The final model ({name}): its {k} best-scored held-out answers next to its {k} worst."
    return [Para(intro), Table(header, rows)]


def _answer_text(answer: dict[str, Any]) -> str:
    """An answer cell: the text, or for an agent episode what it did (calls, results, answer, outcome)."""
    if isinstance(answer.get("tool_calls"), list):
        from ark_trainer.stages.agent.report import trace

        return trace(answer)
    return str(answer.get("completion", ""))


def page_lang(task_name: Any, run_dir: Path) -> str:
    """``zh`` when the task name or the held-out prompts are mostly written in Chinese, else ``en``."""
    sample = str(task_name or "") + " ".join(_prompts(Path(run_dir))[:20])
    letters = [c for c in sample if c.isalpha()]
    return "zh" if letters and len(CJK.findall(sample)) >= len(letters) / 3 else "en"


def reward_range(logs: list[dict[str, Any]]) -> tuple[float, float] | None:
    """(0, 1) when every logged reward (total and per grader) lies in it: the band is clipped to it."""
    keys = [
        k for log in logs for k in log if k == "reward" or (k.startswith("rewards/") and k.endswith("/mean"))
    ]
    values = [v for v in (_num(log.get(k)) for log in logs for k in set(keys)) if v is not None]
    return (0.0, 1.0) if values and all(0.0 <= v <= 1.0 for v in values) else None
