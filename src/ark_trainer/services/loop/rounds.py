"""A round: its data from the newest recorded turns, its ``train`` process, and what came out of it.

``LOOP/rounds/N/`` holds ``data.jsonl`` (the scored turns it trains on), ``eval.jsonl`` (the frozen
held-out set plus the newest turns, not trained on), ``train.log``, the run's own files (``plan.json``,
``eval/``, ``model/``, ``report.md``: it *is* a ``train`` output folder) and ``decision.json``.

How a recorded turn becomes a training row (:func:`turn_row`):

- OpenClaw's system prompt (~40k characters, the same every turn) and the internal-context message it adds
  after the current user message (active exec sessions, subagents) are dropped, and each user message is
  unwrapped (OpenClaw's ``[date] `` prefix and ``Runtime:`` paragraph go): the conversation's turns are
  kept, as the server shows them to a model trained on bare prompts (``services/deploy/policy.py``), so a round
  trains, is gated and is served in one shape, ``bare`` (recorded by ``train`` in its ``model/``); with
  ``--keep_system_prompt`` the turns stay as OpenClaw sent them, and the round is served the same way
  (shape ``openclaw``);
- the next user message's feedback (:mod:`ark_trainer.services.loop.feedback`) decides what the answer is worth:
  a correction with a hint trains on the hinted answer (``reference`` = the hint), a plain correction
  keeps the prompt but not the answer (RFT samples new ones), approval or silence keeps the answer;
- the turn is a *target* (:func:`is_target`) when it gives ``train`` something to learn that the loop's one
  reward (the round's ``--reward_config``) grades: a correction stating the answer, an approved answer, an
  answer the reward grades right; only targets count toward ``--min_new_turns`` and go into a round.

The round trains in a separate process, ``ark-trainer train`` at lower priority (``os.nice``), from the
model being served, with the loop's train flags, its reward and its answer length; what the flags leave
unset (full fine-tuning or LoRA, learning rates) ``train`` chooses as it always does, and the loop reads
those choices from the round's ``plan.json`` (:func:`plan_choices`). The served model keeps answering
meanwhile.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from ark_trainer.base.fileio import write_jsonl
from ark_trainer.core.runfolder import RunFolder
from ark_trainer.data.text import is_blank
from ark_trainer.services.deploy.policy import unwrap_request
from ark_trainer.services.loop.feedback import Rules, conversation_key, feedback_of, is_agent_context
from ark_trainer.services.loop.safety import veto_hints

OWN_FLAGS = ("model_path", "data_path", "output_dir", "eval_dataset", "eval_auto", "openclaw_env", "resume")
DEFAULT_FLAGS = {"report_to": "none"}  # unless the loop's train flags say otherwise
NICE = 10


def turn_row(row: dict, verdict: tuple[int, str | None] | None, keep_system: bool = False) -> dict | None:
    """The training row of one recorded turn (see the module docstring); ``None`` when nothing is left."""
    messages = row.get("messages") or []
    if len(messages) < 2 or messages[-1]["role"] != "assistant":
        return None
    prompt = [m for m in messages[:-1] if keep_system or not is_agent_context(m)]
    if not keep_system:
        prompt = [
            {**m, "content": unwrap_request(m["content"])} if m["role"] == "user" else m for m in prompt
        ]
    if prompt and prompt[-1]["role"] == "user" and is_blank(prompt[-1]["content"]):
        return None  # the message answered was empty (or invisible): nothing to learn from
    prompt = [m for m in prompt if m["role"] != "user" or not is_blank(m["content"])]  # train refuses them
    if not any(m["role"] == "user" for m in prompt):
        return None
    feedback, hint = verdict or (0, None)
    out: dict[str, Any] = {"messages": prompt, "feedback": feedback, "served_by": row.get("served_by", "")}
    if hint:
        out["messages"] = prompt + [{"role": "assistant", "content": hint}]
        out["reference"] = hint
        label = hint_label(hint)
        if label is not None:
            out["label"] = label
    elif feedback >= 0:
        out["messages"] = prompt + [messages[-1]]
        out["cut"] = row.get("finish_reason") == "length"  # a partial answer, cut at the reply limit
    return out


def hint_label(hint: str) -> str | None:
    """The task label a corrected answer states, where it is a QC answer (its violation type), so the QC
    reward grades the row as it grades the labelled held-out set; None for other answers."""
    from ark_trainer.rewards.qc import parse_answer

    answer = parse_answer(hint)
    return answer.type if answer.well_formed else None


def scored_rows(
    all_rows: list[dict], new_rows: list[dict], rules: Rules, reward: Any, keep_system: bool,
    dropped: Counter | None = None, task: list[str] | None = None,
) -> list[dict]:  # fmt: skip
    """The new turns as training rows with their feedback, ``live_reward`` (the loop's reward of the row's
    answer; None: none) and ``target`` (:func:`is_target`); ``dropped`` counts, by reason, the new turns
    whose correction the safety filter refused. ``task``: the reward's graders that carry the task (default
    every weighted one)."""
    from ark_trainer.services.loop.feedback import judge

    refused: dict[str, str] = {}
    verdicts = feedback_of([r for r in all_rows if "messages" in r], rules, refused)
    rows = []
    for raw in new_rows:
        if "messages" not in raw:
            continue
        key = conversation_key(raw["messages"])
        if dropped is not None and key in refused:
            dropped[refused[key]] += 1
        row = turn_row(raw, verdicts.get(key), keep_system)
        if row is not None:
            asked = row["messages"][-1 if row["messages"][-1]["role"] == "user" else -2]["content"]
            row["answers_feedback"] = judge(asked, rules)[0] != 0  # a reply to a correction or a thanks
            rows.append(row)
    veto_hints(rows, reward, dropped)  # the loop's reward model or judge may refuse a hinted answer too
    if rows and reward is not None:
        _grade(rows, reward, task)
    for row in rows:
        row["target"] = _usable(row, reward is not None)
    return rows


def _grade(rows: list[dict], reward: Any, task: list[str] | None) -> None:
    """Each row's ``live_reward`` (its answer by the loop's reward), ``graded`` (a task grader applies to
    it: the round's ``train``, on the same reward, can score it) and ``right`` (every task grader that
    applies gives its answer full marks)."""
    import tempfile

    from ark_trainer.data.loader import load_jsonl
    from ark_trainer.rewards.applies import PLACEHOLDER
    from ark_trainer.rewards.scoring import score_completions

    with tempfile.TemporaryDirectory(prefix="ark-loop-") as tmp:  # the loader's shape: prompt + candidates
        write_jsonl(Path(tmp) / "rows.jsonl", [_without_marks(r) for r in rows])
        loaded = load_jsonl(Path(tmp) / "rows.jsonl")
    answers = [[r["candidates"][0]] if r["candidates"] else [PLACEHOLDER] for r in loaded]
    weighted = {c.name for c in reward.components if c.weight > 0 and (task is None or c.name in task)}
    for row, got, scores in zip(rows, loaded, score_completions(reward, loaded, answers), strict=True):
        marks = [v for name, v in scores[0]["scores"].items() if name in weighted and v is not None]
        row["live_reward"] = scores[0]["total"] if got["candidates"] else None
        row["graded"] = bool(marks)
        row["right"] = bool(marks) and bool(got["candidates"]) and min(marks) >= 1.0


MARKS = ("answers_feedback", "graded", "right", "target", "live_reward", "cut")


def _without_marks(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in MARKS}


def _usable(row: dict, graded_by_reward: bool) -> bool:
    """Whether a turn is a training target: a correction saying the answer (graded by the loop's reward,
    when it has one), a plain correction whose new answers the reward can grade, an answer the user
    thanked, or an answer the reward grades right. Not: the model's reply to a correction or a thanks
    (the user just said the answer), an uncorrected answer the reward cannot call right, a blank answer, an
    answer cut at the reply limit (a partial answer)."""
    if row.get("answers_feedback"):
        return False
    feedback, messages = row["feedback"], row["messages"]
    if feedback < 0:
        return bool(row.get("graded")) or (not graded_by_reward and "reference" in row)
    if messages[-1]["role"] != "assistant" or is_blank(messages[-1]["content"]) or row.get("cut"):
        return False
    return feedback > 0 or bool(row.get("right"))


def is_target(row: dict) -> bool:
    return bool(row.get("target"))


def round_rows(rows: list[dict]) -> list[dict]:
    """The rows a round writes: its targets, without the loop's marks (``train`` reads the rest)."""
    return [_without_marks(r) for r in rows if is_target(r)]


def fit_rows(rows: list[dict], model: Path, reply_tokens: int) -> tuple[list[dict], int]:
    """``rows`` with each prompt fitted into ``model``'s window minus ``reply_tokens`` the way the server fits
    a request (:mod:`ark_trainer.services.deploy.fit`: the current turn first, then older turns while they fit), and
    how many were fitted. A live conversation outgrows a small window within a few turns; ``train`` refuses
    such rows (it never cuts a user's data), and the served model only ever saw the fitted prompt anyway."""
    from ark_trainer.core.models.loading import load_tokenizer
    from ark_trainer.core.models.prompts import render_prompt
    from ark_trainer.data.length import model_positions
    from ark_trainer.services.deploy.fit import PromptFitter

    tok = load_tokenizer(str(model), False)
    # measuring long prompts is the point: silence transformers' "longer than the maximum" warning
    getattr(tok, "deprecation_warnings", {})["sequence-length-is-longer-than-the-specified-maximum"] = True
    positions, _ = model_positions(model, tok)
    if positions is None or positions <= reply_tokens or not rows:
        return rows, 0
    fitter = PromptFitter(
        lambda messages, tools=None: render_prompt(tok, messages),
        lambda text: tok(text, add_special_tokens=False)["input_ids"],
        positions - reply_tokens,
        log=lambda _: None,
    )
    out, fitted = [], 0
    for row in rows:
        messages = row["messages"]
        answer = messages[-1:] if messages[-1]["role"] == "assistant" else []
        prompt, _ = fitter(messages[: len(messages) - len(answer)], None)
        fitted += fitter.last is not None
        out.append({**row, "messages": prompt + answer})
    return out, fitted


def check_train_flags(flags: dict[str, Any], loop: Path) -> None:
    """Validate the train flags every round will be given as ``train`` validates its own, when the loop
    starts: a mistyped ``--strategy`` is one line and exit 2 now, not a failed round an hour later."""
    from ark_trainer.core.config import resolve_config
    from ark_trainer.stages.registry import config_class

    given = {k: v for k, v in {**DEFAULT_FLAGS, **flags}.items() if k not in OWN_FLAGS and v is not None}
    folder = Path(loop) / "rounds" / "1"
    resolve_config(config_class(), {**given, "model_path": str(flags["model_path"]), "data_path": str(folder / "data.jsonl"),
                    "output_dir": str(folder)})  # fmt: skip


def plan_choices(folder: Path) -> dict[str, Any] | None:
    """What the round's ``train`` chose by itself (``plan.json``: its automatic defaults, each with its
    reason, and each stage's steps and learning rate); None until it has written its plan."""
    plan = RunFolder(folder).plan()
    if not plan or not plan.get("stages"):
        return None
    stages = [
        {k: s.get(k) for k in ("name", "steps", "learning_rate")}
        for s in plan["stages"]
        if isinstance(s, dict)
    ]
    return {"auto_defaults": plan.get("auto_defaults") or {}, "stages": stages}


def choice_lines(choices: dict[str, Any]) -> list[str]:
    """The round's choices as ``train`` announces its own (``auto_defaults.announce``)."""
    from ark_trainer.core.auto_defaults import choices as auto_choices

    record = choices.get("auto_defaults") or {}
    lines = [f"automatic choices for {record.get('model', 'the model')} (plan.json: auto_defaults):"]
    lines += [f"  --{flag} {reason}" for flag, _value, reason in auto_choices(record)]
    stages = [f"{s['name']} {s['steps']} steps at {s['learning_rate']:g}" for s in choices.get("stages") or []
              if s.get("steps") and isinstance(s.get("learning_rate"), int | float)]  # fmt: skip
    return lines + ([f"  stages: {', '.join(stages)}"] if stages else [])


def expected_cost(loop: Path, history: list[dict], n_eval: int, n_new: int) -> str:
    """What the next round will cost, said before it starts, from the last round that trained: its
    measured seconds per training step (each stage's ``stage_end`` over its planned steps, the same plan
    again), per evaluated row (the dev and test splits' evaluations together), and the rest of its wall
    time (the round's process starting and loading, planning, saving, the gate's decision: on a small model
    most of a round); the served model's evaluation costs only its ``n_new`` rows not answered before (the
    answer cache), the candidate's all ``n_eval``. Without such a round: that nothing is measured yet
    (``train`` says its plan in the round's ``train.log``)."""
    done = [h for h in history if not h.get("failed") and (h.get("choices") or {}).get("stages")]
    if not done:
        return "its cost is not measured yet (no round has trained); its plan is in its train.log"
    last = done[-1]
    seconds = {e.get("stage"): float(e.get("seconds") or 0) for e in RunFolder(Path(loop) / "rounds" /
               str(last["round"])).events() if e.get("event") == "stage_end"}  # fmt: skip
    stages = [s for s in last["choices"]["stages"] if s.get("steps")]
    train = sum(seconds.get(s["name"], 0.0) for s in stages)
    names = [f"eval_{s['name']}{split}" for s in stages for split in ("", "_dev")]
    evals = sum(seconds.get(name, 0.0) for name in names)  # the candidate's: no cached answer
    per_row = evals / (len(stages) * last["n_eval"]) if evals and last.get("n_eval") else 0.0
    measured = sum(seconds.get(name, 0.0) for name in ("eval_base", "eval_base_dev"))
    wall = _span(last.get("started_at"), last.get("decided_at"))
    rest = max(0.0, wall - train - evals - measured) if wall is not None else 0.0
    rows = n_new + n_eval * len(stages)
    total = train + per_row * rows + rest
    steps = sum(int(s["steps"]) for s in stages)
    return (f"expected to take about {total / 60:.1f} min: {steps} training steps at {train / max(steps, 1):.2g} s "
            f"each, {rows} evaluated rows at {per_row:.2g} s each and {rest:.0f} s of starting, loading, saving "
            f"and deciding, as measured in round {last['round']}")  # fmt: skip


def _span(start: str | None, end: str | None) -> float | None:
    """Seconds between two of the loop's timestamps (ISO 8601); None when one is missing."""
    from datetime import datetime

    try:
        return (datetime.fromisoformat(str(end)) - datetime.fromisoformat(str(start))).total_seconds()
    except ValueError:
        return None


def write_round(folder: Path, train_rows: list[dict], eval_rows: list[dict]) -> None:
    from ark_trainer.core.folders import claim_folder

    claim_folder(folder)  # the round's train run continues in a folder of ours
    write_jsonl(folder / "data.jsonl", train_rows)
    write_jsonl(folder / "eval.jsonl", eval_rows)


def train_argv(folder: Path, model: Path, train_flags: dict[str, Any], round_id: int) -> list[str]:
    """``ark-trainer train`` for the round: the loop's train flags, then the round's own paths."""
    flags = {**DEFAULT_FLAGS, "task_name": f"loop_round_{round_id}"}
    flags.update({k: v for k, v in train_flags.items() if k not in OWN_FLAGS and v is not None})
    argv = [sys.executable, "-m", "ark_trainer", "train"]
    for key, value in flags.items():
        argv += [f"--{key}", str(value)]
    argv += ["--model_path", str(model), "--data_path", str(folder / "data.jsonl")]
    argv += ["--eval_dataset", str(folder / "eval.jsonl"), "--eval_auto", "True"]
    return argv + ["--output_dir", str(folder), "--openclaw_env", "False"]


def start_training(folder: Path, argv: list[str]) -> int:
    """Start the round's ``train`` in its own session at lower priority; returns its pid."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[3])] + sys.path)}
    with open(folder / "train.log", "ab") as log:
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True, preexec_fn=lambda: os.nice(NICE),
        )  # fmt: skip
    (folder / "train.pid").write_text(f"{proc.pid}\n")
    _CHILDREN[proc.pid] = proc
    return proc.pid


_CHILDREN: dict[int, subprocess.Popen] = {}


def exit_code(pid: int, started: str | None = None) -> int | None:
    """The round process's exit code once it ended (None while it runs; -1 if not ours to reap, or when its
    pid now belongs to another process: ``started`` is when the round's process started)."""
    proc = _CHILDREN.get(pid)
    if proc is not None:
        return proc.poll()
    from ark_trainer.core.runtime.system import same_process

    return None if same_process(pid, started) else -1


def evaluations(folder: Path) -> tuple[dict | None, dict | None, str | None]:
    """(served model's eval, candidate's eval, candidate's stage) from the round's ``train`` output: on the
    dev split, as the gate is a choice (a run without dev evaluations: its only ones)."""
    run = RunFolder(folder)
    read = run.dev_eval if run.dev_eval("base") else run.eval
    base = read("base") or None
    for name in reversed([str(s.get("name")) for s in run.planned_stages() if s.get("steps")]):
        candidate = read(name)
        if candidate:
            return base, candidate, name
    return base, None, None


def frozen_flags(folder: Path, n_heldout: int) -> list[bool]:
    """For each row the gate's evaluations answered (the round's dev rows, or its test rows in a round
    folder without a dev split), whether it is one of the loop's frozen held-out rows (the first
    ``n_heldout`` rows of the round's ``eval.jsonl``) rather than one of the newest turns. The round's
    ``train`` divides ``eval.jsonl`` by prompt hash, so the two kinds are mixed in both splits."""
    from ark_trainer.base.fileio import read_jsonl
    from ark_trainer.data.loader import load_jsonl
    from ark_trainer.data.split import prompt_key

    run = RunFolder(folder)
    answered = run.dev_rows_path if run.dev_eval("base") else run.test_rows_file()
    given = folder / "eval.jsonl"
    if not (answered.is_file() and given.is_file()):
        return []
    frozen = {prompt_key(r) for r in load_jsonl(given, "eval.jsonl")[:n_heldout]}
    return [prompt_key(r) in frozen for r in read_jsonl(answered)]


def gate_labels(folder: Path) -> list[str | None]:
    """Each row the gate's evaluations answered (as :func:`frozen_flags` reads them): its ``label`` (the
    QC violation type), None where it has none; the per-label test of the gate groups them by it."""
    from ark_trainer.base.fileio import read_jsonl

    run = RunFolder(folder)
    answered = run.dev_rows_path if run.dev_eval("base") else run.test_rows_file()
    if not answered.is_file():
        return []
    return [r.get("label") if isinstance(r.get("label"), str) else None for r in read_jsonl(answered)]


def complete_model(folder: Path) -> bool:
    """A full model was saved (config + weights), not a half-written folder."""
    model = RunFolder(folder).model_dir
    return (model / "config.json").is_file() and any(model.glob("*.safetensors"))
