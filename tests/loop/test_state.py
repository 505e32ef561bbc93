"""``LOOP/state.json`` (``services/loop/state.py``): a damaged state is one line for ``--rollback`` and ``status``."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{garbage", "unreadable (Expecting property name enclosed in double quotes"),
        ("[]", "it holds a JSON list, not an object, so it is not a loop's state"),
        ('{"serving": 0}', "history: expected list, got NoneType, so it is not a loop's state"),
        ('{"kind": "ark-trainer-loop", "serving": 0, "history": [1], "settings": {}, "model_path": "m"}',
         "history: expected a list of {round, promoted, ...} objects"),
        ("[" * 50_000 + "]" * 50_000, "unreadable (nested too deeply)"),
    ],
)  # fmt: skip
def test_a_damaged_loop_state_is_one_line_for_rollback_and_status(tmp_path, capsys, text, says):
    from ark_trainer.cli import main
    from ark_trainer.core.folders import claim_folder

    folder = claim_folder(tmp_path / "loop", "loop")
    (folder / "rounds").mkdir()
    (folder / "state.json").write_text(text, encoding="utf-8")
    for argv in (["loop", "--output_dir", str(folder), "--rollback", "0"], ["status", str(folder)]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {folder / 'state.json'}: {says}"), err
        assert "Traceback" not in err
