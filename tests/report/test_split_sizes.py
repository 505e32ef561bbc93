"""Every place that shows figures says which prompts they are on: the test split's n (every reported figure)
and the dev split's (every choice), each with the smallest difference it can detect (``data/split.py``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ark_trainer.data.split import mde_points, sizes_line

SPLITS = {"train": 800, "dev": 149, "test": 151, "line": "…", "test_mde_points": 11.4, "dev_mde_points": 11.5}
LINE = (
    "Splits: test n = 151 (every reported figure; smallest detectable difference ≈ 11 pts), "
    "dev n = 149 (choices; ≈ 11 pts), train n = 800."
)


def with_splits(run: Path, splits: dict = SPLITS) -> Path:
    path = run / "data" / "stats.json"
    stats = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**stats, "splits": splits}, ensure_ascii=False), encoding="utf-8")
    return run


def test_the_line_gives_each_split_its_n_and_what_it_can_detect():
    assert sizes_line(SPLITS) == LINE
    assert round(mde_points(151), 1) == 11.4 and round(mde_points(30), 1) == 25.6  # 2.8 · √(0.25 / n)
    small = sizes_line({"train": 10, "dev": 0, "test": 2})
    assert small == (
        "Splits: test n = 2 (every reported figure; smallest detectable difference ≈ 99 pts), "
        "dev n = 0 (no dev split: the last stage ships), train n = 10."
    )
    # an older run (no sizes recorded) or a hand-edited file: no line rather than a wrong one
    assert sizes_line(None) is None and sizes_line({"train": 1, "dev": 1}) is None
    assert sizes_line({"train": 1, "dev": True, "test": 1}) is None and sizes_line([1, 2]) is None


def test_the_report_shows_the_line_with_the_figures(tmp_path):
    from ark_trainer.stages.report import build_report
    from tests.report.test_report import make_run

    run = with_splits(make_run(tmp_path / "out"))
    md = build_report(run)[0].read_text(encoding="utf-8")
    sections = {part.split("\n", 1)[0]: part for part in md.split("\n## ")}
    for heading in ("At a glance", "Data", "Results"):  # by the figures, and with the data
        assert LINE in sections[heading], heading
    assert "| test (reported) | 50 |" in md and "| train | 200 |" in md  # the Data table names the splits
    assert "80% power at a two-sided 5% level" in md  # what "smallest detectable difference" means
    older = make_run(tmp_path / "older")  # no sizes recorded: the report says nothing about them
    assert "Splits:" not in build_report(older)[0].read_text(encoding="utf-8")


def test_status_and_the_dashboard_show_the_line(tmp_path, capsys):
    from ark_trainer.cli import main
    from ark_trainer.services.dashboard.payload import eval_tables
    from tests.report.test_report import make_run

    run = with_splits(make_run(tmp_path / "out"))
    beat = {
        "state": "finished",
        "stage": "grpo",
        "step": 20,
        "total": 20,
        "pid": os.getpid(),
        "updated_at": "now",
    }
    (run / "heartbeat.json").write_text(json.dumps(beat))
    assert main(["status", str(run)]) == 0
    assert LINE in capsys.readouterr().out.splitlines()
    assert eval_tables(run)["splits"] == LINE
    (run / "data" / "stats.json").write_text("{torn")
    assert main(["status", str(run)]) == 0 and "Splits:" not in capsys.readouterr().out
    assert eval_tables(run)["splits"] is None
