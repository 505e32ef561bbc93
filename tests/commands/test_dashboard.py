"""``ark-trainer dashboard`` (``app/commands/dashboard.py``): a missing folder is refused in one line."""

from __future__ import annotations

from ark_trainer.cli import main


def test_a_missing_folder_is_refused_in_one_line(tmp_path, capsys):
    assert main(["dashboard", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
