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
and a reader that wants to say so passes a ``problems`` list. Importing this module imports nothing of the
training code, so any tool can read a run folder.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from ark_trainer.errors import UserError
from ark_trainer.fileio import jsonl_file_lines, jsonl_lines, read_json, read_text_bounded, write_json

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
        return read_mapping(self.config_path, problems)

    def config_text(self) -> str:
        try:
            return read_text_bounded(self.config_path, errors="replace")
        except (OSError, ValueError):
            return ""

    def plan(self, problems: Problems = None) -> dict[str, Any]:
        return read_mapping(self.plan_path, problems)

    def events(self, problems: Problems = None, since_line: int = 0) -> list[dict[str, Any]]:
        return read_events(self.events_path, problems, since_line)

    def n_event_lines(self) -> int:
        try:
            return len(jsonl_file_lines(self.events_path, "replace"))
        except (OSError, ValueError):
            return 0

    def eval(self, name: str, problems: Problems = None) -> dict[str, Any]:
        return read_mapping(self.eval_path(name), problems)

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
            data = read_json(path)
        except (OSError, ValueError, RecursionError) as exc:
            if problems is not None:
                problems.append(f"{EXPORT_DIR}/{EXPORT_RECORD}: unreadable ({exc})")
            return []
        return [r for r in data if isinstance(r, dict) and r.get("file")] if isinstance(data, list) else []

    def data_stats(self, problems: Problems = None) -> dict[str, Any]:
        return read_mapping(self.data_dir / DATA_STATS, problems)

    def heartbeat(self) -> dict[str, Any] | None:
        """The last heartbeat, ``None`` when there is none; a broken one raises ValueError."""
        return read_json(self.heartbeat_path) if self.heartbeat_path.is_file() else None

    def final_model(self) -> dict[str, Any]:
        """``model/ark_final_model.json``: the stage whose model ``model/`` is (``stage``), the rule
        (``policy``), the metric and the reason; {} for a run that wrote none (eval off, an older run)."""
        return read_mapping(self.final_model_path)

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
            data = read_json(self.plan_path)
        except (OSError, ValueError) as exc:
            raise UserError(f"--resume: {self.plan_path}: unreadable ({exc}); start a new run") from None
        schema = data.get("schema", PLAN_SCHEMA) if isinstance(data, dict) else None
        if not isinstance(data, dict) or not isinstance(data.get("stages"), list):
            raise UserError(f"--resume: {self.plan_path}: no stages (an older plan); start a new run")
        if not isinstance(schema, int) or schema > PLAN_SCHEMA:
            raise UserError(
                f"--resume: {self.plan_path}: plan schema {schema!r} is newer than this ark-trainer reads "
                f"({PLAN_SCHEMA}); resume it with the version that wrote it"
            )
        return data


def final_of(names: list[str], record: dict[str, Any]) -> str | None:
    """Of the evaluated ``names`` (base first), the one whose model ``model/`` is: the stage its ``record``
    (``model/ark_final_model.json``) names, else the last stage evaluated; None without one."""
    shipped = record.get("stage")
    if shipped in names and shipped != "base":
        return str(shipped)
    return next((n for n in reversed(names) if n != "base"), None)


def read_mapping(path: Path, problems: Problems = None) -> dict[str, Any]:
    """A JSON or YAML file's top-level mapping; {} when absent or unreadable (noted in ``problems``)."""
    import yaml  # here, not at the top: importing this module does no work

    if not path.is_file():
        return {}
    try:
        text = read_text_bounded(path)
        data = yaml.safe_load(text) if path.suffix == ".yaml" else json.loads(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        if problems is not None:
            problems.append(f"{path.relative_to(path.parent.parent)}: unreadable ({exc})")
        return {}
    return data if isinstance(data, dict) else {}


def read_events(path: Path, problems: Problems = None, since_line: int = 0) -> list[dict[str, Any]]:
    """The events of ``events.jsonl`` from line ``since_line`` on; torn or foreign lines are skipped."""
    try:
        lines = jsonl_file_lines(path, "replace")[since_line:]  # split at "\n" only, as the writers escape
    except (OSError, ValueError):
        return []
    events, bad = [], 0
    for line in lines:
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            bad += 1  # e.g. a line still being written by a running stage
            continue
        if isinstance(event, dict):
            events.append(event)
    if bad and problems is not None:
        problems.append(f"{EVENTS}: {bad} unreadable line(s) skipped")
    return events


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
            try:
                with self.path.open("rb") as fh:
                    if fh.seek(0, 2) < self.offset:  # the file was replaced (a new run in the folder)
                        self.offset, self.events = 0, []
                    fh.seek(self.offset)
                    chunk = fh.read()
            except OSError:
                return list(self.events)
            end = chunk.rfind(b"\n") + 1  # a line still being written waits for the next poll
            for line in jsonl_lines(chunk[:end].decode("utf-8", errors="replace")):
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    self.events.append(event)
            self.offset += end
            return list(self.events)
