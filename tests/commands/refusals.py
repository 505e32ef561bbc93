"""A command refused in one line: exit 2, one ``error:`` line, no traceback."""

from __future__ import annotations

from ark_trainer.cli import main


def refused(capsys, argv: list[str]) -> list[str]:
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines
