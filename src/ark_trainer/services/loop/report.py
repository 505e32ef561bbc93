"""``LOOP/report.md`` and ``LOOP/plots/loop_metric.png``: the main metric per round, promotions, rollbacks.

Rebuilt from ``LOOP/state.json`` after every decision and rollback (and by ``ark-trainer status LOOP
--report``); the plot shows, per decided round, the served model's and the candidate's main metric on
that round's evaluation set, promoted rounds marked.
"""

from __future__ import annotations

from pathlib import Path

from ark_trainer.base.fileio import atomic_write_text
from ark_trainer.core.metrics import REWARD_MEAN


def status_lines(loop: Path, state: dict) -> list[str]:
    """What ``ark-trainer status LOOP`` prints: serving round, turns, the round in training, history."""
    from ark_trainer.core.runtime.system import same_process
    from ark_trainer.services.deploy.record import read_turns
    from ark_trainer.services.loop.serving import TURNS, deployment_alive, target_of

    recorded = read_turns(Path(loop) / TURNS)
    turns = len(recorded)
    sup = state.get("supervisor_pid")
    training = state.get("training")
    alive = deployment_alive(loop, target_of(state))
    lines = [
        f"loop {loop}: serving round {state['serving']} (server {'healthy' if alive else 'down'})",
        f"supervisor: {'running, pid ' + str(sup) if same_process(sup, state.get('supervisor_started')) else 'not running'}",
        f"turns recorded: {turns} ({turns - state['turns_used']} not yet in a round)",
        "training: "
        + (
            f"round {training['round']} (pid {training['pid']}, since {training['started_at']})"
            if training
            else "none"
        ),  # fmt: skip
        f"corrections dropped by the safety filter: {dropped_corrections(recorded, state)}",
    ]
    for h in state["history"]:
        verdict = verdict_of(h)
        lines.append(f"round {h['round']}: {verdict} at {h['decided_at']}: {'; '.join(h['reasons'])}")
    for e in state["events"]:
        if e["event"] == "rollback":
            lines.append(f"rollback to round {e['round']} at {e['at']} (was serving {e['from']})")
    return lines


def verdict_of(entry: dict) -> str:
    """A decided round: promoted, refused by the gate, or failed (its training did not finish: its turns went
    back to the next round, and it is not counted as a round)."""
    return "promoted" if entry["promoted"] else "failed" if entry.get("failed") else "refused"


def choices_of(entry: dict) -> str:
    """What the round's ``train`` chose by itself, in a few words: full fine-tuning or LoRA, each stage's steps
    and learning rate (``services/loop/rounds.py: plan_choices``)."""
    choices = entry.get("choices") or {}
    lora = ((choices.get("auto_defaults") or {}).get("lora_r") or {}).get("value")
    parts = [] if lora is None else ["full fine-tuning" if lora == 0 else f"LoRA r {lora}"]
    parts += [f"{s['name']} {s['steps']}×{s['learning_rate']:g}" for s in choices.get("stages") or []
              if s.get("steps") and isinstance(s.get("learning_rate"), int | float)]  # fmt: skip
    return ", ".join(parts) or "-"


def dropped_corrections(rows: list[dict], state: dict) -> str:
    """``N (k secret, m credential_request)`` over every recorded turn (see :mod:`ark_trainer.services.loop.safety`)."""
    from collections import Counter

    from ark_trainer.services.loop.feedback import feedback_of, load_rules

    refused: dict[str, str] = {}
    feedback_of(
        [r for r in rows if "messages" in r],
        load_rules(state.get("settings", {}).get("feedback_rules")),
        refused,
    )
    counts = Counter(refused.values())
    return f"{sum(counts.values())}" + (f" ({reason_counts(counts)})" if counts else "")


def reason_counts(counts: dict) -> str:
    return ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))


def write_report(loop: Path, state: dict) -> Path:
    loop = Path(loop)
    main = state["settings"].get("main_metric", REWARD_MEAN)
    rows = ["| round | served model | candidate | decision | reasons | corrections dropped | training |",
            "|---|---|---|---|---|---|---|"]  # fmt: skip
    for h in state["history"]:
        dropped = h.get("corrections_dropped") or {}
        rows.append(f"| {h['round']} | {_num(h.get('current_main'))} | {_num(h.get('main'))} | "
                    f"{verdict_of(h)} | {'; '.join(h['reasons'])} | "
                    f"{sum(dropped.values())}{f' ({reason_counts(dropped)})' if dropped else ''} | "
                    f"{choices_of(h)} |")  # fmt: skip
    plot = _plot(loop, state, main)
    text = "\n".join([
        "# Live loop report", "",
        f"Serving round **{state['serving']}**; main metric `{main}` (higher is better).", "",
        *([f"![{main} per round](plots/{plot.name})", ""] if plot else []),
        *rows, "",
        "Events: " + ", ".join(f"{e['event']} {e['round']} ({e['at']})" for e in state["events"]), "",
    ])  # fmt: skip
    atomic_write_text(loop / "report.md", text)
    return loop / "report.md"


def _num(value) -> str:
    return "-" if value is None else f"{value:.4f}"


def _plot(loop: Path, state: dict, main: str) -> Path | None:
    points = [h for h in state["history"] if h.get("main") is not None]
    if not points:
        return None
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 3.2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    xs = [h["round"] for h in points]
    ax.plot(xs, [h.get("current_main") for h in points], "o--", label="served model")
    ax.plot(xs, [h["main"] for h in points], "o-", label="candidate")
    promoted = [h for h in points if h["promoted"]]
    ax.scatter(
        [h["round"] for h in promoted], [h["main"] for h in promoted], s=120, marker="*", label="promoted"
    )
    ax.set_xlabel("round")
    ax.set_ylabel(main)
    ax.legend()
    fig.tight_layout()
    path = loop / "plots" / "loop_metric.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path
