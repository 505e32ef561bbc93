"""``commands/args.py``: a command's numeric flags take numbers ≥ 0 (or their own ``low``), finite, else one
usage line and exit 2, as ``train``'s do."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["deploy", "OUT", "--system_chars", "-5"], "--system_chars"),
        (["doctor", "--save_total_limit", "-1"], "--save_total_limit"),
        (["eval", "OUT", "--limit", "-3"], "--limit"),
        (["dashboard", "OUT", "--port", "-1"], "--port"),
    ],
)
def test_a_negative_or_infinite_number_is_one_usage_line(capsys, argv, flag):
    """Refused in one line naming the flag, exit 2: by the parser (a flag declaring its ``low``) or by the
    command's own check, whichever owns the flag's range."""
    from ark_trainer.cli import main

    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and flag in err[0] and "Traceback" not in err[0], err


def test_a_flag_with_its_own_low_takes_it(capsys):
    from ark_trainer.cli import build_parser

    args = build_parser().parse_args(
        [
            "rm",
            "train",
            "--data_path",
            "d.jsonl",
            "--model_path",
            "m",
            "--output_dir",
            "o",
            "--max_steps",
            "-1",
        ]
    )
    assert args.max_steps == -1
