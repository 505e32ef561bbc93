"""What a run folder's files hold is checked as it is read: ``report`` and ``diagnose`` on a folder with one
file edited by hand are refused in one line naming the file and the field (exit 2, no traceback)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ark_trainer.cli import main
from ark_trainer.core.runcheck import MAX_LINE_BYTES, too_deep
from tests.commands.refusals import refused
from tests.report.test_report import make_run

NAN, INF = float("nan"), float("inf")
BAD_SHARES = [INF, -INF, NAN, 1e308, -0.5, 1.5, "0.5", [0.5], {"a": 1}, True]
BAD_COUNTS = [-1, 2.5, "3", None, 1e308, NAN]
DEEP = "[" * 10000 + "]" * 10000


def edit_json(path: Path, **changes) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(
        json.dumps({**data, **changes}), encoding="utf-8"
    )  # NaN and Infinity as Python writes them


def append_event(run: Path, line: str) -> None:
    with (run / "events.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(line + "\n")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    return make_run(tmp_path_factory.mktemp("pristine") / "out")


@pytest.fixture
def run(pristine, tmp_path) -> Path:
    import shutil

    return Path(shutil.copytree(pristine, tmp_path / "out"))


def assert_refused(capsys, run: Path, file: str, field: str, commands=("report", "diagnose")) -> None:
    for command in commands:
        (line,) = refused(capsys, [command, str(run)])
        assert f"{run / file}" in line and field in line, line
        assert not (run / "report.md").exists()


@pytest.mark.parametrize("value", BAD_SHARES)
def test_a_share_that_is_not_in_0_1_is_refused(run, capsys, value):
    edit_json(run / "eval" / "rft.json", task_accuracy=value)
    assert_refused(capsys, run, "eval/rft.json", "task_accuracy")


@pytest.mark.parametrize("value", BAD_COUNTS)
def test_a_count_that_is_not_a_whole_number_is_refused(run, capsys, value):
    edit_json(run / "eval" / "base.json", n=value)
    assert_refused(capsys, run, "eval/base.json", "n:")


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"reward_mean": 1e308}, "reward_mean"),
        ({"reward_mean": "high"}, "reward_mean"),
        ({"answers": "x"}, "answers"),
        ({"answers": [{"completion": "a"}]}, "answers[0]: no 'reward'"),
        ({"answers": [{"completion": "a", "reward": INF}]}, "answers[0].reward"),
        ({"examples": [1]}, "examples[0]"),
        ({"components": [1]}, "components"),
        ({"components": {"qc_verdict": NAN}}, "components.qc_verdict"),
        ({"extra": {"deep": [1, 2, -INF]}}, "extra.deep[2]"),
    ],
)
def test_a_wrong_field_of_an_eval_file_is_refused(run, capsys, changes, field):
    edit_json(run / "eval" / "grpo.json", **changes)
    assert_refused(capsys, run, "eval/grpo.json", field)


@pytest.mark.parametrize(
    ("text", "what"), [("[1, 2]", "not a JSON object"), (DEEP, "nested"), ('"x"', "not a JSON")]
)
def test_an_eval_file_that_is_not_an_object_of_ours_is_refused(run, capsys, text, what):
    (run / "eval" / "rft.json").write_text(text, encoding="utf-8")
    assert_refused(capsys, run, "eval/rft.json", what)


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({"event": "metrics", "stage": "grpo", "step": -7, "loss": 1.0}, "step"),
        ({"event": "metrics", "stage": "grpo", "step": "x", "loss": 1.0}, "step"),
        ({"event": "warning", "message": "m", "ts": "yesterday"}, "ts"),
        ({"event": "stage_end", "stage": "grpo", "seconds": -INF}, "seconds"),
        ({"event": "stage_end", "stage": ["grpo"], "seconds": 1}, "stage"),
        ({"event": 7}, "event"),
        ({"step": 3}, "event"),
    ],
)
def test_an_event_line_no_run_writes_is_refused_with_its_line(run, capsys, event, field):
    append_event(run, json.dumps(event))
    assert_refused(capsys, run, "events.jsonl:", field)


def test_a_deeply_nested_event_line_is_refused(run, capsys):
    append_event(run, DEEP)
    assert_refused(capsys, run, "events.jsonl:", "nested")


@pytest.mark.parametrize(
    ("file", "changes", "field"),
    [
        ("plan.json", {"stages": [{"name": "rft", "steps": -3, "learning_rate": 1e-5}]}, "stages[0].steps"),
        ("plan.json", {"stages": [{"name": "rft", "steps": 3, "learning_rate": NAN}]}, "learning_rate"),
        ("plan.json", {"stages": "rft"}, "stages"),
        ("data/stats.json", {"eval": {"n": -50}}, "eval.n"),
        ("data/stats.json", {"train": {"labels": {"辱骂": 1e308}}}, "train.labels"),
    ],
)
def test_the_plan_and_the_data_stats_are_checked_too(run, capsys, file, changes, field):
    edit_json(run / file, **changes)
    assert_refused(capsys, run, file, field, ("report", "diagnose") if file == "plan.json" else ("report",))


def test_a_nan_loss_is_what_a_diverged_run_writes_and_is_reported(run):
    append_event(run, json.dumps({"event": "metrics", "stage": "grpo", "step": 11, "loss": NAN}))
    assert main(["report", str(run)]) == 0


def test_a_line_longer_than_any_event_is_skipped_unread(run, capsys):
    append_event(run, json.dumps({"event": "warning", "message": "x" * (MAX_LINE_BYTES + 10)}))
    assert main(["report", str(run)]) == 0
    assert "1 unreadable line(s) skipped" in (run / "report.md").read_text(encoding="utf-8")


def test_what_the_model_wrote_in_a_tool_call_may_hold_any_number(run):
    calls = [{"name": "pay", "arguments": {"amount": NAN, "to": [1e308]}, "result": "ok", "ok": True}]
    edit_json(run / "eval" / "grpo.json", answers=[{"completion": "a", "reward": 0.5, "tool_calls": calls}])
    assert main(["report", str(run)]) == 0


def test_depth_is_counted_without_recursion():
    nested: list = []
    for _ in range(100000):
        nested = [nested]
    assert too_deep(nested) and not too_deep([[{"a": [1]}]]) and not too_deep(5)


def test_the_dashboard_reads_past_a_huge_line_and_shows_a_bad_file_as_a_finding(run):
    from ark_trainer.core.runfolder import EventLog
    from ark_trainer.services.dashboard.server import Runs

    append_event(run, json.dumps({"event": "warning", "message": "x" * (3 * MAX_LINE_BYTES)}))
    append_event(run, json.dumps({"event": "metrics", "stage": "grpo", "step": 12, "loss": 0.1}))
    log = EventLog(run / "events.jsonl")
    events = log.read()
    assert events[-1]["step"] == 12 and not any(len(e.get("message", "")) > 100 for e in events)
    append_event(run, json.dumps({"event": "metrics", "stage": "grpo", "step": 13, "loss": 0.1}))
    assert [e.get("step") for e in log.read()[-2:]] == [12, 13]  # the offset counted the huge line whole
    edit_json(run / "eval" / "rft.json", task_accuracy=INF)
    runs = Runs([run.parent])
    (key,) = [r["key"] for r in runs.listing()]
    detail = runs.detail(key)
    assert detail is not None and detail["stages"]["grpo"]["step"][-1] == 13
    (finding,) = detail["diagnosis"]["findings"]
    assert finding["code"] == "bad_run_file" and "eval/rft.json: task_accuracy" in finding["evidence"]


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({"stage": 7, "policy": "best"}, "stage"),
        ({"stage": "rft", "policy": "worst"}, "policy"),
        ({"stage": "rft", "policy": "best", "below_base": "yes"}, "below_base"),
        ({"stage": "rft", "policy": "best", "metric": ["task_accuracy"]}, "metric"),
        ({"stage": "rft", "policy": "best", "score": INF}, "score"),
    ],
)
def test_a_final_model_record_no_run_writes_is_refused(run, capsys, record, field):
    (run / "model").mkdir()
    (run / "model" / "ark_final_model.json").write_text(json.dumps(record), encoding="utf-8")
    assert_refused(capsys, run, "model/ark_final_model.json", field, ("report",))
