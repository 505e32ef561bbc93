"""``commands/args.py``: a command's numeric flags take numbers ≥ 0 (or their own ``low``), finite, else one
usage line and exit 2, as ``train``'s do."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["deploy", "OUT", "--system_chars", "-5"], "--system_chars"),
        (["doctor", "--save_total_limit", "-1"], "--save_total_limit"),
        (["score", "--data_path", "d.jsonl", "--temperature", "inf"], "--temperature"),
        (["score", "--data_path", "d.jsonl", "--temperature", "nan"], "--temperature"),
        (["eval", "OUT", "--limit", "-3"], "--limit"),
        (["dashboard", "OUT", "--port", "-1"], "--port"),
    ],
)
def test_a_negative_or_infinite_number_is_one_usage_line(capsys, argv, flag):
    from ark_trainer.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and f"argument {flag}: expected a number ≥ 0" in err[0], err


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
