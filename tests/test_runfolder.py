"""The run folder has one owner: ``core/runfolder.py`` names its files and reads them, tolerantly."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from ark_trainer.base.errors import UserError
from ark_trainer.core.runfolder import (
    DIAGNOSIS,
    EVENTS,
    EXPORT_RECORD,
    HEARTBEAT,
    PLAN,
    PLAN_SCHEMA,
    RUN_CONFIG,
    RunFolder,
    run_end_status,
)
from tests.line_breakers import IDS, RAW_LEGAL, write_raw

SRC = Path(__file__).resolve().parent.parent / "src" / "ark_trainer"
NAMES = {RUN_CONFIG, PLAN, HEARTBEAT, EVENTS, DIAGNOSIS, EXPORT_RECORD}
# files of the same name that belong to something else than a run folder
FOREIGN = {"data/collect.py": "an OpenClaw trajectory bundle's own events.jsonl"}


def _literals(path: Path) -> list[tuple[int, str]]:
    """String constants that are exactly a run-folder file name (docstrings and messages aside)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES
    ]


def test_only_the_run_folder_module_spells_its_file_names():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel in ("core/runfolder.py", *FOREIGN):
            continue
        found += [f"{rel}:{line}: {value!r}" for line, value in _literals(path)]
    assert not found, "use ark_trainer.core.runfolder for these: " + "; ".join(found)
    assert _literals(SRC / "core" / "runfolder.py"), "the check must see the names where they are defined"


def test_missing_and_torn_files_read_as_absent(tmp_path):
    folder = RunFolder(tmp_path)
    assert (folder.config(), folder.plan(), folder.events(), folder.heartbeat()) == ({}, {}, [], None)
    assert not folder.is_run()
    lines = [{"event": "run_start"}, {"event": "stage_end", "stage": "rft", "status": "ok"}]
    text = "".join(json.dumps(e) + "\n" for e in lines) + "\n[1, 2]\n" + '{"event": "metr'
    folder.events_path.write_text(text, encoding="utf-8")
    (tmp_path / "eval").mkdir()
    folder.eval_path("rft").write_text("{not json", encoding="utf-8")
    folder.eval_path("base").write_text(json.dumps({"reward_mean": 0.5}), encoding="utf-8")
    problems: list[str] = []
    assert folder.events(problems) == lines  # the torn last line and a non-object line are skipped
    assert folder.events(since_line=1) == lines[1:]
    assert folder.n_event_lines() == 5  # a blank line counts: supervise() counts lines as written
    assert folder.evals(["base", "rft", "grpo"], problems) == {"base": {"reward_mean": 0.5}}
    assert problems == [f"{EVENTS}: 1 unreadable line(s) skipped", problems[1]]
    assert problems[1].startswith("eval/rft.json: unreadable")
    assert folder.is_run()


def test_the_status_of_the_last_attempt():
    assert run_end_status([]) is None
    first = [{"event": "run_start"}, {"event": "run_end", "status": "failed"}]
    assert run_end_status(first) == "failed"
    assert run_end_status([*first, {"event": "run_start"}]) is None  # a second attempt is still going
    assert run_end_status([*first, {"event": "run_start"}, {"event": "run_end"}]) == "finished"


def test_the_plan_carries_its_schema_and_resume_refuses_what_it_cannot_read(tmp_path):
    folder = RunFolder(tmp_path)
    stages = [{"name": "grpo", "steps": 3, "learning_rate": 1e-6, "last": True}]
    folder.write_plan({"strategy": "GRPO", "stages": stages, "schema": 99})
    saved = json.loads(folder.plan_path.read_text(encoding="utf-8"))
    assert saved == {"schema": PLAN_SCHEMA, "strategy": "GRPO", "stages": stages}
    assert folder.saved_plan() == saved and folder.planned_stages() == stages
    folder.plan_path.write_text(json.dumps({"strategy": "GRPO", "grpo_steps": 3}), encoding="utf-8")
    with pytest.raises(UserError, match="no stages"):
        folder.saved_plan()
    folder.plan_path.write_text(json.dumps({"schema": PLAN_SCHEMA + 1, "stages": stages}), encoding="utf-8")
    with pytest.raises(UserError, match="newer"):
        folder.saved_plan()
    folder.plan_path.write_text("{", encoding="utf-8")
    with pytest.raises(UserError, match="unreadable"):
        folder.saved_plan()
    assert folder.plan() == {}  # the tolerant reader: absent


def test_the_reports_other_files_are_read_through_the_run_folder_too(tmp_path):
    """Serving parity (``eval/<stage>-openclaw.json``) and the exports (``export/export.json``): a torn file
    leaves its part of the report out instead of stopping the report."""
    from ark_trainer.stages.report.model import serve_blocks
    from ark_trainer.stages.report.parity import parity_files

    folder = RunFolder(tmp_path)
    folder.eval_dir.mkdir()
    folder.model_dir.mkdir()
    whole = {"name": "rft-openclaw", "n": 2, "task_accuracy": 0.5}
    folder.eval_path("rft-openclaw").write_text(json.dumps(whole), encoding="utf-8")
    folder.eval_path("grpo-openclaw").write_text('{"name": "grpo-openc', encoding="utf-8")  # being written
    folder.eval_path("base").write_text(json.dumps({"n": 2}), encoding="utf-8")
    assert folder.eval_names() == ["base", "grpo-openclaw", "rft-openclaw"]
    assert parity_files(tmp_path) == [whole]
    folder.export_dir.mkdir()
    record = {"file": str(tmp_path / "export" / "model-f16.gguf"), "quant": "f16"}
    (folder.export_dir / EXPORT_RECORD).write_text(json.dumps([record, {"no": "file"}]), encoding="utf-8")
    assert folder.exports() == [record]
    assert "model-f16.gguf" in str(serve_blocks(tmp_path))
    (folder.export_dir / EXPORT_RECORD).write_text("[{", encoding="utf-8")
    problems: list[str] = []
    assert folder.exports(problems) == [] and problems[0].startswith("export/export.json: unreadable")


def run_events(out: Path, sep: str) -> list[dict]:
    """An ``events.jsonl`` whose every event carries ``sep`` raw, ending in a failed run."""
    events = [
        {"event": "run_start", "time": 1.0},
        {"event": "stage_end", "stage": "rft", "status": "ok", "note": f"a{sep}b", "time": 2.0},
        {"event": "error", "message": f"boom{sep}bang", "time": 3.0},
        {"event": "run_end", "status": "failed", "note": f"c{sep}d", "time": 4.0},
    ]
    write_raw(out / "events.jsonl", events)
    return events


@pytest.mark.parametrize("sep", RAW_LEGAL, ids=IDS[:3])
def test_run_event_readers(tmp_path, sep):
    from ark_trainer.core.runfolder import EventLog, RunFolder, read_events, run_end_status
    from ark_trainer.core.runtime.resume import Progress
    from ark_trainer.core.runtime.supervisor import last_error
    from ark_trainer.stages.diagnose.rundata import load

    events = run_events(tmp_path, sep)
    path = tmp_path / "events.jsonl"
    assert run_end_status(RunFolder(tmp_path).events()) == "failed"
    assert RunFolder(tmp_path).n_event_lines() == 4
    assert last_error(tmp_path, since=1)["message"] == f"boom{sep}bang"
    assert Progress(tmp_path).stage_ok("rft") and len(Progress(tmp_path).events) == 4
    problems: list[str] = []
    assert read_events(path, problems) == events and not problems
    assert load(tmp_path).events == events
    assert EventLog(path).read() == events
