"""``ark-trainer deploy`` (``app/commands/deploy.py``): ``--record`` appends only to a JSONL file of its own."""

from __future__ import annotations

from tests.commands.refusals import refused


def test_deploy_record_never_appends_to_a_file_of_another_kind(model, tmp_path, capsys):
    notes = tmp_path / "notes.md"
    notes.write_text("# mine\n", encoding="utf-8")
    lines = refused(capsys, ["deploy", str(model), "--record", str(notes)])
    assert lines == [
        f"error: --record: {str(notes)!r} exists and is not a JSONL file; it is not overwritten: give a new file name"
    ]
    assert notes.read_text(encoding="utf-8") == "# mine\n"
    assert "a system folder" in refused(capsys, ["deploy", str(model), "--record", "/etc/turns.jsonl"])[0]
