"""The run report: report.md, report.html and plots/*.png, built only from files in the run directory.

Reads what the pipeline wrote (run.yaml, plan.json, data/stats.json, events.jsonl, eval/*.json) and
nothing else, so it can be rebuilt at any time, also while a run is going or after it failed:

    ark-trainer report OUT          # OUT = the --output_dir of a train run

Anything missing is reported as "not run" (or the plot is skipped) instead of failing. Both outputs are
rendered from one list of blocks, so the Markdown and the HTML can't disagree. Files are written atomically
(temp file in the same folder, then ``os.replace``) so a reader never sees half a report.
"""

from __future__ import annotations

import io
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import atomic_write_bytes
from ark_trainer.core.metrics import AGENT_METRICS, HEADLINE, PERCENTS, TASK_ACCURACY, TASK_SUCCESS
from ark_trainer.core.runfolder import EVENTS, PLAN, REPORT_HTML, REPORT_MD, RUN_CONFIG, RunFolder, final_of
from ark_trainer.data.split import MDE_NOTE, sizes_line
from ark_trainer.stages.agent.report import episode_blocks
from ark_trainer.stages.registry import Plot
from ark_trainer.stages.report import compare as comparisons
from ark_trainer.stages.report.incidents import bad_step_blocks, failure_blocks
from ark_trainer.stages.report.model import base_model_line, final_model_blocks, serve_blocks
from ark_trainer.stages.report.render import (
    Block,
    Bullets,
    Code,
    Heading,
    Image,
    Para,
    Table,
    to_html,
    to_markdown,
)


def models() -> tuple[tuple[str, str], ...]:
    """(eval name, label) of the base model and of every registered stage, in run order."""
    from ark_trainer.stages.registry import get_stage, stage_names_in_order

    return (("base", "base"), *((n, get_stage(n).label) for n in stage_names_in_order()))


def planned(run: Run) -> tuple[tuple[str, str], ...]:
    """:func:`models` limited to the base model and the stages of this run's plan (all of them when
    ``plan.json`` is missing), so a report lists no stage its strategy does not run as "not run"."""
    names = {s.get("name") for s in (run.plan or {}).get("stages") or [] if isinstance(s, dict)}
    return tuple(m for m in models() if m[0] == "base" or not names or m[0] in names)


MAX_EXAMPLES = 3
MAX_EXAMPLE_CHARS = 2000


@dataclass
class Run:
    """Everything the report needs, as read from the run directory (absent files are empty)."""

    config: dict[str, Any]
    config_text: str
    plan: dict[str, Any]
    stats: dict[str, Any]
    events: list[dict[str, Any]]
    evals: dict[str, dict[str, Any]]
    problems: list[str] = field(default_factory=list)
    final_model: dict[str, Any] = field(default_factory=dict)  # model/ark_final_model.json: what ships

    def of(self, event: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") == event]

    def metrics(self, stage: str) -> list[dict[str, Any]]:
        return [e for e in self.of("metrics") if e.get("stage") == stage]


def build_report(run_dir: Path) -> tuple[Path, Path]:
    """Write run_dir/report.md, run_dir/report.html and run_dir/plots/*.png; return (md, html) paths."""
    run_dir = Path(run_dir)
    folder = RunFolder(run_dir)
    if not folder.config_path.is_file():
        raise UserError(
            f"{run_dir}: not a run directory (no {RUN_CONFIG}); pass the --output_dir of a train run"
        )
    from ark_trainer.core.config import config_fields
    from ark_trainer.core.folders import MARKER, holds_our_run_config
    from ark_trainer.stages.registry import config_class

    flags = [f.name for f in config_fields(config_class())]
    if not holds_our_run_config(
        run_dir, flags
    ):  # another tool's run.yaml: its report.md is not ours to replace
        raise UserError(
            f"{run_dir}: not a run folder of ark-trainer (no {MARKER}, no run.yaml of a train run); pass the "
            "--output_dir of a train run"
        )
    run = load_run(run_dir)
    title = _title(run)
    from ark_trainer.stages.diagnose.run_end import report_blocks
    from ark_trainer.stages.report.glance import glance_blocks, page_lang

    glance = glance_blocks(run_dir, run.evals, dict(models()))  # chart, final vs base, successes and failures
    final = final_model_blocks(run_dir, run.evals, dict(models()))  # which model ships, and why
    top = report_blocks(run_dir, [*final, *glance])  # a no_improvement alert, those, then the Diagnosis
    from ark_trainer.stages.report.parity import parity_blocks

    parity = parity_blocks(run_dir)  # eval/<stage>-openclaw.json: the same metrics asked through OpenClaw
    blocks = [
        Heading(title, 1),
        *_toy_note(run),
        *top,
        *_body(run, _make_plots(run, folder.plot_dir), parity, serve_blocks(run_dir)),
    ]
    md_path, html_path = run_dir / REPORT_MD, run_dir / REPORT_HTML
    atomic_write_bytes(md_path, to_markdown(blocks).encode("utf-8"))
    lang = page_lang(run.config.get("task_name"), run_dir)
    atomic_write_bytes(html_path, to_html(blocks, title, lang).encode("utf-8"))
    return md_path, html_path


def load_run(run_dir: Path) -> Run:
    """Read the run directory; unreadable files are treated as absent and noted in ``problems``."""
    problems: list[str] = []
    folder = RunFolder(run_dir)
    return Run(
        config=folder.config(problems),
        config_text=folder.config_text(),
        plan=folder.plan(problems),
        stats=folder.data_stats(problems),
        events=folder.events(problems),
        evals=folder.evals([key for key, _ in models()], problems),
        problems=problems,
        final_model=folder.final_model(),
    )


def num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return float(value)


def mean(values: list[Any]) -> float | None:
    numbers = [n for n in map(num, values) if n is not None]
    return statistics.fmean(numbers) if numbers else None


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s" if hours else f"{minutes}m {secs:02d}s"


def _value(metric: str, value: Any) -> str:
    number = num(value)
    if number is None:
        return "—"
    return f"{number * 100:.1f}%" if metric in PERCENTS else f"{number:.3f}"


def _change(metric: str, value: Any, base: Any) -> str:
    """`+18.0 pts, +40.9%` for rates, `+0.120, +25.0%` for rewards; relative to |base|."""
    number, reference = num(value), num(base)
    if number is None or reference is None:
        return ""
    delta = number - reference
    absolute = f"{delta * 100:+.1f} pts" if metric in PERCENTS else f"{delta:+.3f}"
    relative = f", {delta / abs(reference) * 100:+.1f}%" if reference else ""
    return f" ({absolute}{relative})"


def short(value: Any) -> str:
    number = num(value)
    return f"{number:.4g}" if number is not None else str(value)


def _status(run: Run) -> tuple[str, str]:
    """(status, total time) from run_start / run_end; a run without run_end is still running."""
    ends, starts = run.of("run_end"), run.of("run_start")
    if ends:
        return str(ends[-1].get("status", "finished")), _duration(num(ends[-1].get("seconds")))
    if not run.events:
        return f"unknown (no {EVENTS})", "—"
    start, last = num(starts[0].get("ts")) if starts else None, num(run.events[-1].get("ts"))
    elapsed = last - start if start is not None and last is not None else None
    return "running", f"{_duration(elapsed)} so far" if elapsed is not None else "—"


def _title(run: Run) -> str:
    started = run.of("run_start")
    task = run.config.get("task_name") or (started[0].get("task_name") if started else None) or "run"
    status, total = _status(run)
    return f"ark-trainer report: {task} ({_strategy_name(run)}, {status}, {total})"


def _strategy_name(run: Run) -> str:
    return str(run.plan.get("strategy") or run.config.get("strategy") or "unknown strategy")


def _body(run: Run, plots: list[Image], parity: list[Block], serve: list[Block]) -> list[Block]:
    return [
        *failure_blocks(run.events),  # why a run stopped comes first
        *_strategy(run),
        *_auto_choices(run),
        *_data(run),
        *_results(run),
        *parity,
        *_stage_sections(run),
        *_stage_times(run),
        *bad_step_blocks(run.events),
        *_restarts(run),
        Heading("Training curves"),
        *(plots or (Para("No training metrics logged yet."),)),
        *_examples(run),
        *episode_blocks(run, _final_model(run)),  # --env runs: episodes before / after
        *_warnings(run),
        *serve,  # Ollama / llama.cpp: the exported GGUF, or how to write it
        Heading("Resolved config"),
        Code(run.config_text.rstrip("\n"), summary=RUN_CONFIG),
    ]


def _strategy(run: Run) -> list[Block]:
    plan = run.plan
    if not plan:
        return [Heading("Strategy"), Para(f"Strategy: {_strategy_name(run)} ({PLAN} not found).")]
    steps = {s.get("name"): s.get("steps", "—") for s in plan.get("stages") or [] if isinstance(s, dict)}
    items = [
        f"Strategy: {plan.get('strategy', '—')} (requested: {plan.get('requested', '—')})",
        f"Reason: {plan.get('reason', '—')}",
        " / ".join(f"{label} steps: {steps.get(key, '—')}" for key, label in planned(run)[1:]),
        f"Precision: {plan.get('precision', '—')}",
    ]
    if line := base_model_line(plan):
        items.insert(0, line)
    rewards = plan.get("rewards") or {}
    if isinstance(rewards, dict) and isinstance(rewards.get("graders"), dict):
        graders = ", ".join(f"{n} (weight {short(w)})" for n, w in rewards["graders"].items())
        items.append(f"Rewards: {graders}; spec {rewards.get('spec', '—')}")
    probe = plan.get("probe") or {}
    if isinstance(probe, dict) and probe:
        items.append("Probe: " + ", ".join(f"{k} = {short(v)}" for k, v in probe.items()))
    return [Heading("Strategy"), Bullets(items)]


def _toy_note(run: Run) -> list[Block]:
    """Said first when the base model is the demo's toy: its figures are the pipeline's, not a model's."""
    record = run.plan.get("auto_defaults")
    if not (isinstance(record, dict) and record.get("demo_toy") is True):
        return []
    return [
        Para(
            "The base model is ark-trainer's demo toy (its ARK_DEMO_MODEL.md): about 0.2M parameters, made from "
            "scratch on the demo's synthetic customer-service dialogues, with a tokenizer learnt from them. "
            "These figures show the pipeline working end to end on synthetic data, not what a real model "
            "reaches; see docs/real-models.md for a real one."
        )
    ]


def _auto_choices(run: Run) -> list[Block]:
    """What ``train`` chose from the model and the data for the flags the run left unset (plan.json)."""
    from ark_trainer.core.auto_defaults import choices

    record = run.plan.get("auto_defaults")
    if not isinstance(record, dict):
        return []
    rows = [[f"--{flag}", short(value), reason] for flag, value, reason in choices(record)]
    if not rows:
        return []
    return [
        Heading("Automatic choices"),
        Para(f"Chosen for {record.get('model', 'the model')}, where the run left these flags unset:"),
        Table(["flag", "value", "why"], rows),
    ]


def _data(run: Run) -> list[Block]:
    stats = run.stats
    if not stats:
        return [Heading("Data"), Para("Not run (data/stats.json not found).")]
    # data/stats.json keeps the test split under "eval" (the name older readers know)
    shown = {"train": "train", "dev": "dev (choices)", "eval": "test (reported)"}
    splits = [name for name in shown if isinstance(stats.get(name), dict)]
    rows = []
    for name in splits:
        s = stats[name]
        cells = (s.get(k, "—") for k in ("n", "with_candidates", "prompt_chars_mean"))
        rows.append([shown[name], *map(short, cells)])
    blocks: list[Block] = [Heading("Data"), Para(f"Eval source: {stats.get('eval_source', 'unknown')}.")]
    blocks.append(Table(["split", "samples", "with candidates", "mean prompt chars"], rows))
    if line := sizes_line(stats.get("splits")):
        blocks.append(Para(f"{line} {MDE_NOTE}"))
    labels: dict[str, dict[str, Any]] = {}
    for name in splits:
        for label, count in (stats[name].get("labels") or {}).items():
            labels.setdefault(str(label), {})[name] = count
    if labels:
        label_rows = [
            [label, *(_share(c.get(s), stats[s].get("n")) for s in splits)] for label, c in labels.items()
        ]
        blocks += [Para("Label distribution:"), Table(["label", *(shown[s] for s in splits)], label_rows)]
    return blocks


def _share(count: Any, total: Any) -> str:
    number, whole = num(count), num(total)
    if number is None:
        return "—"
    return f"{count} ({number / whole * 100:.1f}%)" if whole else str(count)


def _flat_metrics(data: dict[str, Any]) -> dict[str, Any]:
    """The headline metrics, then each reward component as ``components.<name>``."""
    components = data.get("components") or {}
    return {
        **{name: data.get(name) for name in HEADLINE},
        **{name: data.get(name) for name in AGENT_METRICS if name in data},  # an agent run's episodes
        **{f"components.{name}": value for name, value in components.items()},
    }


def _results(run: Run) -> list[Block]:
    if not run.evals:
        return [Heading("Results"), Para("Evaluation not run (no eval/*.json).")]
    present = [(key, label) for key, label in models() if key in run.evals]
    metrics = {key: _flat_metrics(run.evals[key]) for key, _ in present}
    base = metrics.get("base", {})
    names = list(dict.fromkeys(name for values in metrics.values() for name in values))  # ordered union
    rows = []
    for name in names:
        if all(num(values.get(name)) is None for values in metrics.values()):
            continue  # no grader of this run measures it (an agent run's compliance_rate)
        cells = [name]
        for key, values in metrics.items():
            tested = comparisons.change_cell(name, run.evals.get("base", {}), run.evals[key])  # interval, p
            change = "" if key == "base" else tested or _change(name, values.get(name), base.get(name))
            cells.append(_value(name, values.get(name)) + change)
        rows.append(cells)
    header = ["metric", *(f"{label} (n={run.evals[key].get('n', '?')})" for key, label in present)]
    evals = {key: run.evals[key] for key, _ in present}
    notes = [Para(text) for text in (comparisons.TESTS_NOTE, comparisons.untested_note(evals)) if text]
    sizes = [Para(line)] if (line := sizes_line(run.stats.get("splits"))) else []
    table: list[Block] = [Heading("Results"), Table(header, rows), *sizes, *notes, Para(_headline(run))]
    return [*table, _definitions([r[0] for r in rows]), *comparisons.stage_blocks(evals, dict(models()))]


def _definitions(shown: list[str]) -> Bullets:
    """What each metric of the Results table means."""
    from ark_trainer.core.metrics import COMPONENTS_DEFINITION, DEFINITIONS

    items = [f"{name}: {DEFINITIONS[name]}" for name in shown if name in DEFINITIONS]
    return Bullets(items + [COMPONENTS_DEFINITION] * any(n.startswith("components.") for n in shown))


def _final_model(run: Run) -> tuple[str, str] | None:
    """(eval name, label) of the model ``OUT/model`` is: the stage that ships, else the last evaluated (the
    base model while no stage is)."""
    final = final_of(list(run.evals), run.final_model) or ("base" if "base" in run.evals else None)
    return (final, dict(models()).get(final, final)) if final else None


def _headline(run: Run) -> str:
    base = run.evals.get("base", {})

    def compare(metric: str, key: str) -> str:
        if key not in run.evals or "base" not in run.evals:
            return "not run"
        value, reference = run.evals[key].get(metric), base.get(metric)
        if num(value) is None or num(reference) is None:
            return "n/a"
        tested = comparisons.headline_text(metric, base, run.evals[key])
        return (
            tested
            or f"{_value(metric, reference)} → {_value(metric, value)}{_change(metric, value, reference)}"
        )

    from ark_trainer.stages.registry import get_stage

    final_key, final_label = _final_model(run) or models()[-1]
    parts = [
        f"{metric.replace('_', ' ').capitalize()}, {label} vs base: {said}."
        for key, label in planned(run)[1:]
        if (metric := getattr(get_stage(key), "headline_metric", None))
        and (said := compare(metric, key)) != "n/a"
    ]  # a metric the run does not measure (an agent run's preference_alignment) is left out
    metric = TASK_SUCCESS if TASK_SUCCESS in base else TASK_ACCURACY  # an agent run: tasks solved
    label = metric.replace("_", " ").capitalize()
    return " ".join([*parts, f"{label}, final ({final_label}) vs base: {compare(metric, final_key)}."])


def _stages() -> list[Any]:
    from ark_trainer.stages.registry import get_stage, stage_names_in_order

    return [get_stage(name) for name in stage_names_in_order()]


def _none(run: Run) -> list:
    return []


def _stage_sections(run: Run) -> list[Block]:
    """Each stage's own report section (its ``report_blocks``: a data-selection or health table), in run order."""
    names = {key for key, _ in planned(run)}
    stages = [stage for stage in _stages() if stage.name in names]
    return [block for stage in stages for block in getattr(stage, "report_blocks", _none)(run)]


def _stage_times(run: Run) -> list[Block]:
    order: list[str] = []
    seconds: dict[str, float | None] = {}
    for e in run.events:
        if e.get("event") not in ("stage_start", "stage_end"):
            continue
        stage = str(e.get("stage", "?"))
        if stage not in order:
            order.append(stage)
        if e.get("event") == "stage_end":
            seconds[stage] = num(e.get("seconds"))
    if not order:
        return [Heading("Time per stage"), Para("No stages recorded.")]
    unfinished = "did not finish" if run.of("run_end") else "running"
    rows = [[s, _duration(seconds[s]) if s in seconds else unfinished] for s in order]
    status, total = _status(run)
    return [Heading("Time per stage"), Table(["stage", "time"], [*rows, [f"total ({status})", total]])]


def _restarts(run: Run) -> list[Block]:
    """Restarts by ``--auto_resume`` and resumes from checkpoints (shown only when there were any)."""
    rows = []
    for e in run.events:
        if e.get("event") == "restart":
            change = ", ".join(f"{k} {a} → {b}" for k, (a, b) in (e.get("change") or {}).items())
            rows.append(
                [e.get("time", ""), f"restart {e.get('attempt')}", str(e.get("reason", "")), change or "—"]
            )
        elif e.get("event") == "resume":
            rows.append([e.get("time", ""), f"resumed {e.get('stage')}", f"from step {e.get('step')}", "—"])
        elif e.get("event") in ("stalled", "diverged"):
            rows.append([e.get("time", ""), str(e.get("event")), str(e.get("message", ""))[:200], "—"])
    if not rows:
        return []
    return [Heading("Restarts"), Table(["time", "what", "why", "change"], rows)]


def _examples(run: Run) -> list[Block]:
    final = _final_model(run)
    examples = (run.evals[final[0]].get("examples") or [])[:MAX_EXAMPLES] if final else []
    if not final or not examples:
        return [Heading("Examples"), Para("No eval examples.")]
    blocks: list[Block] = [
        Heading("Examples"),
        Para(f"Final model ({final[1]}): {run.evals[final[0]].get('model', '')}"),
    ]
    for i, ex in enumerate(examples, 1):
        blocks.append(Para(f"Example {i} (reward {short(ex.get('reward', '—'))}): prompt"))
        key = "episode" if ex.get("episode") else "completion"  # an agent run: the calls, results and answer
        prompt, completion = (str(ex.get(k, ""))[:MAX_EXAMPLE_CHARS] for k in ("prompt", key))
        blocks += [
            Code(prompt),
            Para(key),
            Code(completion.replace("; ", "\n") if key == "episode" else completion),
        ]
    return blocks


def _warnings(run: Run) -> list[Block]:
    messages = [str(e.get("message", "")) for e in run.of("warning")] + run.problems
    messages += [w for stage in _stages() for w in getattr(stage, "report_warnings", _none)(run)]
    return [Heading("Warnings"), Bullets(messages) if messages else Para("None.")]


def _plots() -> list[tuple[str, Plot]]:
    """(stage, plot) of every registered stage's plots, in run order."""
    from ark_trainer.stages.registry import get_stage, stage_names_in_order

    return [(name, plot) for name in stage_names_in_order() for plot in get_stage(name).plots]


def _series(logs: list[dict[str, Any]], key: str, band: str | None) -> tuple[list[float], ...]:
    steps, values, spreads = [], [], []
    for i, log in enumerate(logs):
        value = num(log.get(key))
        if value is None:
            continue
        step = num(log.get("step"))
        steps.append(step if step is not None else float(i))
        values.append(value)
        spreads.append((num(log.get(band)) or 0.0) if band else 0.0)
    return steps, values, spreads


def _make_plots(run: Run, plots_dir: Path) -> list[Image]:
    """One PNG per curve that has data; returns the images in report order."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ark_trainer.stages.report.glance import reward_range

    images = []
    for stage, plot in _plots():
        filename, key, title, band = plot.filename, plot.key, plot.title, plot.band
        steps, values, spreads = _series(run.metrics(stage), key, band)
        bounds = reward_range(run.metrics(stage)) if band else None  # a band never leaves the reward's range
        if not values:
            continue
        fig = Figure(figsize=(6.4, 3.6), dpi=100)
        FigureCanvasAgg(fig)  # Agg directly: no pyplot, no global backend switch
        ax = fig.add_subplot()
        ax.plot(steps, values, marker="o" if len(values) < 30 else None, markersize=3)
        if band:
            lo, hi = bounds or (float("-inf"), float("inf"))
            low = [max(v - s, lo) for v, s in zip(values, spreads, strict=True)]
            high = [min(v + s, hi) for v, s in zip(values, spreads, strict=True)]
            ax.fill_between(steps, low, high, alpha=0.25, linewidth=0)
        if plot.limit is not None:  # a share: show it on 0..1 with the warning threshold
            ax.set_ylim(-0.02, 1.02)
            ax.axhline(plot.limit, color="tab:red", linestyle="--", linewidth=1, label="warning threshold")
            ax.legend(loc="lower right")
        ax.set(title=title, xlabel="step", ylabel=key)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        png = io.BytesIO()
        fig.savefig(png, format="png")
        atomic_write_bytes(plots_dir / filename, png.getvalue())
        images.append(Image(f"plots/{filename}", title))
    return images
