"""The run folder (``--output_dir``): its layout, and the one tolerant reader of what a run wrote.

::

    run.yaml        the config of the run (``train --config OUT/run.yaml`` repeats it)
    plan.json       the plan: schema version, strategy, requested, reason, task_name, stages, rewards, ...
    heartbeat.json  rewritten every few seconds while the run lives (state, stage, step, pid)
    events.jsonl    one JSON line per thing that happened (stage start/end, metrics, evals, warnings)
    data/           train.jsonl, dev.jsonl (the rows every choice reads), test.jsonl (the rows every reported
                    figure comes from; also as eval.jsonl unless that is the user's own --eval_dataset),
                    stats.json and what the stages selected (rft_scored.jsonl, ...)
    <stage>/        a stage's checkpoints (checkpoint-N/) and its final/ model (the last stage's trains into
                    model/ and moves here when an earlier stage's model ships instead)
    model/          the model that ships (--final_model: the best stage on the dev split, or the last);
                    ark_final_model.json in it says which stage's model it is and why
    eval/           <model>.json: the metrics of the base model and of each stage's model on the test split
                    (and, once ``eval --through openclaw`` ran, <stage>-openclaw.json: the same through
                    OpenClaw); dev/<model>.json: the same on the dev split, which the choices read; each
                    file's ``measurement`` records how it was measured (split, n, rows, dtype, decoding, ...)
    <stage>/best_step.json  GRPO's best evaluated step so far (on dev), re-read when a run resumes
    base_model/     the base model converted to safetensors, when --model_path was a GGUF file or ollama:NAME
    export/         export.json and the GGUF files ``ark-trainer export`` wrote
    deploy/         the deploy target's own record, key and server log (``ark-trainer deploy``)
    diagnosis.json  the findings of the end-of-run diagnosis
    logs/           train.log and TensorBoard events, unless --log_dir names another folder
    report.md  report.html  plots/*.png

The report, the diagnosis, resume, the dashboard, ``status`` and the live loop read a run through
:class:`RunFolder`; the monitor and the pipeline write it by the same names. Reading is tolerant: a file
that is missing, unreadable or torn (a line still being written, a run killed mid-write) reads as absent,
and a reader that wants to say so passes a ``problems`` list. What a file that parses holds is checked as it
is read (``core/runcheck.py``): a number that is not finite or out of its range, a field of the wrong type or a
file nested too deep is :class:`~ark_trainer.core.runcheck.BadRunFile` (one line, exit 2), so nothing downstream
(the model that ships, the report, ``status``) ever works from it. Importing this module imports nothing of
the training code, so any tool can read a run folder.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import MAX_LINES_BYTES, read_text_bounded, write_json
from ark_trainer.core.runcheck import (
    EVAL_FIELDS,
    EVENT_FIELDS,
    FINAL_MODEL_FIELDS,
    HEARTBEAT_FIELDS,
    HEARTBEAT_REQUIRED,
    MAX_LINE_BYTES,
    PLAN_FIELDS,
    PLAN_STAGE_FIELDS,
    REWRITTEN,
    BadRunFile,
    all_numbers_wrong,
    checked,
    parse_checked,
    stats_wrong,
)

RUN_CONFIG = "run.yaml"
PLAN = "plan.json"
HEARTBEAT = "heartbeat.json"
EVENTS = "events.jsonl"
DEV_EVAL_DIR, BEST_STEP = "dev", "best_step.json"  # in eval/: the dev split's evals; in <stage>/
EVAL_DIR, DATA_DIR, MODEL_DIR, LOG_DIR, PLOT_DIR = "eval", "data", "model", "logs", "plots"
BASE_MODEL_DIR, EXPORT_DIR, EXPORT_RECORD = "base_model", "export", "export.json"  # the latter in export/
REPORT_MD, REPORT_HTML = "report.md", "report.html"
DIAGNOSIS, DATA_STATS = "diagnosis.json", "stats.json"  # the latter in data/
STAGE_FINAL = "final"  # in <stage>/: the stage's finished model
FINAL_MODEL = "ark_final_model.json"  # in model/: which stage's model it is, and why it ships
# a model folder on its way into model/, and an old copy on its way out (OUT/model changes by renames)
INCOMING_MODEL, OUTGOING_MODEL = ".model.incoming", ".model.outgoing"
MARKERS = (RUN_CONFIG, EVENTS, HEARTBEAT)  # a folder holding one of them is a run folder
PLAN_SCHEMA = 1  # plan.json's version: raise it when its keys change meaning

Problems = list[str] | None


class RunFolder:
    """The paths of one run folder and readers of its files."""

    def __init__(self, out: str | Path) -> None:
        self.out = Path(out)

    @property
    def config_path(self) -> Path:
        return self.out / RUN_CONFIG

    @property
    def plan_path(self) -> Path:
        return self.out / PLAN

    @property
    def heartbeat_path(self) -> Path:
        return self.out / HEARTBEAT

    @property
    def events_path(self) -> Path:
        return self.out / EVENTS

    @property
    def data_dir(self) -> Path:
        return self.out / DATA_DIR

    @property
    def model_dir(self) -> Path:
        return self.out / MODEL_DIR

    @property
    def plot_dir(self) -> Path:
        return self.out / PLOT_DIR

    @property
    def eval_dir(self) -> Path:
        return self.out / EVAL_DIR

    @property
    def base_model_dir(self) -> Path:
        return self.out / BASE_MODEL_DIR

    @property
    def export_dir(self) -> Path:
        return self.out / EXPORT_DIR

    def stage_final_dir(self, stage: str) -> Path:
        """Where a stage's finished model is kept when it is not ``model/``."""
        return self.out / stage / STAGE_FINAL

    @property
    def incoming_model_dir(self) -> Path:
        return self.out / INCOMING_MODEL

    @property
    def outgoing_model_dir(self) -> Path:
        return self.out / OUTGOING_MODEL

    @property
    def final_model_path(self) -> Path:
        return self.model_dir / FINAL_MODEL

    def eval_path(self, name: str) -> Path:
        """A model's evaluation on the test split (what every report reads)."""
        return self.eval_dir / f"{name}.json"

    @property
    def test_rows_path(self) -> Path:
        """The test split's rows, in the order of every ``eval/<name>.json``'s answers."""
        return self.data_dir / "test.jsonl"

    @property
    def dev_rows_path(self) -> Path:
        return self.data_dir / "dev.jsonl"

    def test_rows_file(self) -> Path:
        """``data/test.jsonl``; ``data/eval.jsonl`` in a run folder from before the dev/test split."""
        return self.test_rows_path if self.test_rows_path.is_file() else self.data_dir / "eval.jsonl"

    def dev_eval_path(self, name: str) -> Path:
        """A model's evaluation on the dev split (what every choice reads)."""
        return self.eval_dir / DEV_EVAL_DIR / f"{name}.json"

    def best_step_path(self, stage: str) -> Path:
        """A stage's best evaluated step so far and its trainable weights' file beside it."""
        return self.out / stage / BEST_STEP

    def log_dir(self, given: str | None = None) -> Path:
        """``--log_dir`` when given, else ``OUT/logs``."""
        return Path(given) if given else self.out / LOG_DIR

    def is_run(self) -> bool:
        return self.out.is_dir() and any((self.out / name).is_file() for name in MARKERS)

    # --- readers: absent or unreadable files read as empty ---

    def config(self, problems: Problems = None) -> dict[str, Any]:
        return checked(read_mapping(self.config_path, problems), str(self.config_path), {})

    def config_text(self) -> str:
        try:
            return read_text_bounded(self.config_path, errors="replace")
        except (OSError, ValueError):
            return ""

    def plan(self, problems: Problems = None) -> dict[str, Any]:
        return checked(read_mapping(self.plan_path, problems), str(self.plan_path), PLAN_FIELDS)

    def events(self, problems: Problems = None, since_line: int = 0) -> list[dict[str, Any]]:
        return read_events(self.events_path, problems, since_line)

    def n_event_lines(self) -> int:
        try:
            return len(event_lines(self.events_path))
        except (OSError, ValueError):
            return 0

    def eval(self, name: str, problems: Problems = None) -> dict[str, Any]:
        """``eval/<name>.json``; {} when absent or torn; :class:`BadRunFile` when a metric is not a number
        in its range (a model must never ship on one), a field has the wrong type or a metric is missing."""
        data = read_mapping(self.eval_path(name), problems)
        return checked(data, str(self.eval_path(name)), EVAL_FIELDS, (), EVAL_FIX)

    def evals(self, names: list[str], problems: Problems = None) -> dict[str, dict[str, Any]]:
        """``{name: eval}`` of the names that have an eval file, in the order given."""
        found = {name: self.eval(name, problems) for name in dict.fromkeys(names)}
        return {name: data for name, data in found.items() if data}

    def dev_eval(self, name: str, problems: Problems = None) -> dict[str, Any]:
        return read_mapping(self.dev_eval_path(name), problems)

    def dev_evals(self, names: list[str], problems: Problems = None) -> dict[str, dict[str, Any]]:
        """``{name: dev eval}`` of the names that have one, in the order given."""
        found = {name: self.dev_eval(name, problems) for name in dict.fromkeys(names)}
        return {name: data for name, data in found.items() if data}

    def best_step(self, stage: str) -> dict[str, Any]:
        """``<stage>/best_step.json``: ``step``, ``value``, ``metric``, ``weights`` (a file name or None),
        ``measurement``; {} without one."""
        return read_mapping(self.best_step_path(stage))

    def eval_names(self) -> list[str]:
        """The names of every eval file there is (``eval/<name>.json``), sorted."""
        try:
            return sorted(p.stem for p in self.eval_dir.glob("*.json") if p.is_file())
        except OSError:
            return []

    def exports(self, problems: Problems = None) -> list[dict[str, Any]]:
        """The records of ``export/export.json`` (one per file ``ark-trainer export`` wrote); [] without."""
        path = self.export_dir / EXPORT_RECORD
        if not path.is_file():
            return []
        try:
            data = read_json_checked(path, str(path))
        except (OSError, ValueError) as exc:
            if isinstance(exc, BadRunFile):
                raise
            if problems is not None:
                problems.append(f"{EXPORT_DIR}/{EXPORT_RECORD}: unreadable ({exc})")
            return []
        if wrong := all_numbers_wrong(data):
            raise BadRunFile(f"{path}: {wrong}; run ark-trainer export again")
        return [r for r in data if isinstance(r, dict) and r.get("file")] if isinstance(data, list) else []

    def data_stats(self, problems: Problems = None) -> dict[str, Any]:
        path = self.data_dir / DATA_STATS
        data = checked(read_mapping(path, problems), str(path), {})
        if wrong := stats_wrong(data):
            raise BadRunFile(f"{path}: {wrong}; {REWRITTEN}")
        return data

    def heartbeat(self) -> dict[str, Any] | None:
        """The last heartbeat, ``None`` when there is none; a broken one raises ValueError (a
        :class:`BadRunFile` naming the field when it parses but holds what no run writes)."""
        if not self.heartbeat_path.is_file():
            return None
        where = str(self.heartbeat_path)
        data = read_json_checked(self.heartbeat_path, where)
        fix = "delete it, or resume the run"
        # its metrics may be NaN or inf (the last step diverged); its own fields may not
        return checked(
            data, where, HEARTBEAT_FIELDS, HEARTBEAT_REQUIRED, fix, absent_ok=False, every_number=False
        )

    def final_model(self) -> dict[str, Any]:
        """``model/ark_final_model.json``: the stage whose model ``model/`` is (``stage``), the rule
        (``policy``), the metric and the reason; {} for a run that wrote none (eval off, an older run)."""
        path = self.final_model_path
        return checked(read_mapping(path), str(path), FINAL_MODEL_FIELDS, (), REWRITTEN)

    def final_name(self, names: list[str]) -> str | None:
        return final_of(names, self.final_model())

    def planned_stages(self) -> list[dict[str, Any]]:
        """The plan's stages (``name``, ``steps``, ``learning_rate``, ``last``); [] without a plan."""
        return [s for s in self.plan().get("stages") or [] if isinstance(s, dict)]

    # --- the plan, written and read back exactly (resume) ---

    def write_plan(self, plan: dict[str, Any]) -> None:
        write_json(
            self.plan_path, {"schema": PLAN_SCHEMA, **{k: v for k, v in plan.items() if k != "schema"}}
        )

    def saved_plan(self) -> dict[str, Any]:
        """The plan a resumed run continues; refuses one this version cannot read."""
        try:
            data = read_json_checked(self.plan_path, f"--resume: {self.plan_path}")
        except BadRunFile:
            raise
        except (OSError, ValueError) as exc:
            raise UserError(f"--resume: {self.plan_path}: unreadable ({exc}); start a new run") from None
        schema = data.get("schema", PLAN_SCHEMA) if isinstance(data, dict) else None
        if not isinstance(data, dict) or not isinstance(data.get("stages"), list):
            raise UserError(f"--resume: {self.plan_path}: no stages (an older plan); start a new run")
        if isinstance(schema, int) and schema > PLAN_SCHEMA:
            raise UserError(
                f"--resume: {self.plan_path}: plan schema {schema!r} is newer than this ark-trainer reads "
                f"({PLAN_SCHEMA}); resume it with the version that wrote it"
            )
        checked(data, f"--resume: {self.plan_path}", PLAN_FIELDS, ("stages",), PLAN_FIX, absent_ok=False)
        for i, stage in enumerate(data["stages"]):
            if missing := [k for k in ("steps", "learning_rate") if k not in stage]:
                raise UserError(
                    f"--resume: {self.plan_path}: stages[{i}]: no {missing[0]!r} field; {PLAN_FIX}"
                )
            if unknown := sorted(set(stage) - set(PLAN_STAGE_FIELDS)):
                raise UserError(
                    f"--resume: {self.plan_path}: stages[{i}].{unknown[0]}: not a field of a stage; {PLAN_FIX}"
                )
        return data


def final_of(names: list[str], record: dict[str, Any]) -> str | None:
    """Of the evaluated ``names`` (base first), the one whose model ``model/`` is: the stage its ``record``
    (``model/ark_final_model.json``) names, else the last stage evaluated; None without one."""
    shipped = record.get("stage")
    if shipped in names and shipped != "base":
        return str(shipped)
    return next((n for n in reversed(names) if n != "base"), None)


PLAN_FIX = "restore the plan the run wrote, or start a new run (--overwrite_output_dir True)"
EVAL_FIX = (
    "restore it, or delete it and run `ark-trainer eval` (or train --resume True) to measure that model again"
)


def read_json_checked(path: Path, where: str) -> Any:
    """A JSON file's value, bounded in size (``fileio.read_bounded``) and in nesting (:func:`parse_checked`)."""
    return parse_checked(read_text_bounded(path, what="a run folder file"), where)


def read_mapping(path: Path, problems: Problems = None) -> Any:
    """A JSON or YAML file's value; {} when absent or unreadable (noted in ``problems``). Whatever parses is
    returned as it is (a list too), for :func:`checked` to judge; nested too deep is BadRunFile."""
    import yaml  # here, not at the top: importing this module does no work

    if not path.is_file():
        return {}
    try:
        data = parse_checked(read_text_bounded(path), str(path), path.suffix == ".yaml")
    except BadRunFile:
        raise
    except (OSError, ValueError, yaml.YAMLError) as exc:
        if problems is not None:
            problems.append(f"{path.relative_to(path.parent.parent)}: unreadable ({exc})")
        return {}
    return data if data is not None else {}


def read_events(path: Path, problems: Problems = None, since_line: int = 0) -> list[dict[str, Any]]:
    """The events of ``events.jsonl`` from line ``since_line`` on; torn lines, and lines longer than any
    event (:data:`MAX_LINE_BYTES`, not parsed: a 100 MB line took the dashboard 39 s), are skipped; a line
    that parses but holds what no run writes (a negative step, a time that is a string) is BadRunFile."""
    try:
        lines = event_lines(path)[since_line:]
    except (OSError, ValueError):
        return []
    events, bad = [], 0
    for number, line in enumerate(lines, since_line + 1):
        event = parse_event(line, f"{path}:{number}")
        if event is None:
            bad += line is None or bool(line.strip())  # e.g. a line still being written by a stage
        elif event:
            events.append(event)
    if bad and problems is not None:
        problems.append(f"{EVENTS}: {bad} unreadable line(s) skipped")
    return events


def event_lines(path: Path) -> list[bytes | None]:
    """The lines of ``events.jsonl`` (the last one too, whole or not), as bytes, read by :func:`iter_lines`:
    one longer than :data:`MAX_LINE_BYTES` is None, read through but never held, decoded or parsed (a
    100 MB line took the dashboard 39 s). At most ``fileio.MAX_LINES_BYTES`` are read."""
    if not path.is_file():  # not a FIFO or a device: open() would wait on one, or read without end
        raise OSError(f"{path}: not a regular file")
    lines: list[bytes | None] = []
    total = 0
    with path.open("rb") as fh:
        for size, line, _ in iter_lines(fh):
            lines.append(line)
            total += size
            if total >= MAX_LINES_BYTES:
                break
    return lines


def iter_lines(fh: BinaryIO) -> Iterator[tuple[int, bytes | None, bool]]:
    """``(bytes, line, complete)`` of each line of ``fh`` from where it stands, split at ``"\n"`` only
    (as the writers escape; a ``"\r"`` before it dropped): ``line`` is None for one longer than
    :data:`MAX_LINE_BYTES`, read through in 1 MiB pieces; ``complete``: it ends in ``"\n"``."""
    while line := fh.readline(MAX_LINE_BYTES + 2):
        size, complete = len(line), line.endswith(b"\n")
        if size > MAX_LINE_BYTES and not complete:
            while rest := fh.readline(1 << 20):
                size += len(rest)
                if complete := rest.endswith(b"\n"):
                    break
            yield size, None, complete
            continue
        body = line[:-1] if complete else line
        yield size, body[:-1] if body.endswith(b"\r") else body, complete


def parse_event(line: str | bytes | None, where: str) -> dict[str, Any] | None:
    """One line of ``events.jsonl``: the event; {} for a line that is not an object of ours (a blank or
    foreign line); None for one torn or longer than :data:`MAX_LINE_BYTES`; BadRunFile for an event
    whose fields are wrong."""
    if line is None or len(line) > MAX_LINE_BYTES:
        return None
    if not line.strip():
        return {}
    try:
        event = parse_checked(line if isinstance(line, str) else line.decode("utf-8", "replace"), where)
    except BadRunFile:
        raise
    except ValueError:
        return None
    if not isinstance(event, dict):
        return {}
    fix = "fix or delete that line (the run appends whole lines; it never writes one like it)"
    # a metric may be NaN or inf (a diverged step: the diagnosis reports it); the fields events are
    # ordered and timed by may not
    return checked(event, where, EVENT_FIELDS, ("event",), fix, absent_ok=False, every_number=False)


def run_end_status(events: list[dict[str, Any]]) -> str | None:
    """The status of the ``run_end`` after the last ``run_start`` (this attempt's end), if it ended."""
    for e in reversed(events):
        if e.get("event") == "run_start":
            return None
        if e.get("event") == "run_end":
            return str(e.get("status", "finished"))
    return None


class EventLog:
    """``events.jsonl`` read incrementally: complete lines only, from where the last read stopped."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset = path, 0
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def read(self) -> list[dict[str, Any]]:
        with self.lock:
            if not self.path.is_file():  # not a FIFO or a device: open() would wait on one
                return list(self.events)
            try:
                with self.path.open("rb") as fh:
                    if fh.seek(0, 2) < self.offset:  # the file was replaced (a new run in the folder)
                        self.offset, self.events = 0, []
                    fh.seek(self.offset)
                    for size, line, complete in iter_lines(fh):
                        if not complete:
                            break  # a line still being written waits for the next poll
                        self.offset += size
                        self._add(line)
            except OSError:
                pass
            return list(self.events)

    def _add(self, line: bytes | None) -> None:
        try:
            event = parse_event(line, EVENTS)
        except ValueError:  # BadRunFile: the dashboard shows what it can of the run
            return
        if event:
            self.events.append(event)
