"""``app/commands/args.py``: every sub-command is generated from an options dataclass: one spelling (underscores,
hyphenated aliases of earlier versions kept), ``train --help`` grouped by heading; a command's numeric flags
take numbers ≥ 0 (or their own ``low``), finite, else one usage line and exit 2, as ``train``'s do."""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
from dataclasses import dataclass

import pytest

from ark_trainer.app.clidoc import _subparsers
from ark_trainer.app.commands.args import OPTIONS_ATTR, add_command, add_dataclass_args, opt, parse_into
from ark_trainer.cli import build_parser, main, train_flags
from ark_trainer.core.config import config_fields, train_groups
from ark_trainer.stages.registry import config_class


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


def all_commands() -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every parser below the top level, by its command path (``("rm", "train")``)."""
    found: dict[tuple[str, ...], argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        for name, child in _subparsers(parser).items():
            found[(*path, name)] = child
            walk(child, (*path, name))

    walk(build_parser(), ())
    return found


COMMAND_PATHS = sorted(all_commands())


def test_the_command_tree_is_complete():
    names = {" ".join(p) for p in COMMAND_PATHS}
    expected = {"train", "demo", "report", "status", "plan", "run", "score", "doctor", "deploy", "install"}
    expected |= {"diagnose", "dashboard", "data", "data collect", "rm", "rm train", "skill", "skill install"}
    assert expected <= names


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=" ".join)
def test_every_parser_is_built_from_a_dataclass(path):
    parser = all_commands()[path]
    own = [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]
    if any(isinstance(a, argparse._SubParsersAction) for a in own):  # a group: data, rm, skill
        assert len(own) == 1, f"{path}: a command group takes no flags of its own"
        return
    options = getattr(parser, OPTIONS_ATTR, None)
    assert options is not None and dataclasses.is_dataclass(options), (
        f"{path}: not generated from a dataclass"
    )
    names = {f.name for f in dataclasses.fields(options)}
    dests = [a.dest for a in own]
    assert sorted(dests) == sorted(names), f"{path}: every argparse action maps to exactly one field"
    for action in own:  # one spelling: the field's own name, underscores; aliases only in addition
        if action.option_strings:
            assert action.option_strings[0] == f"--{action.dest}"


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=" ".join)
def test_every_help_runs(path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*path, "--help"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("usage:")


def test_help_imports_no_training_library():
    """``--help`` stays fast: building every parser imports neither torch nor transformers nor trl."""
    code = (
        "import sys, contextlib, io\n"
        "from ark_trainer.cli import main\n"
        "for argv in (['train', '--help'], ['rm', 'train', '--help'], ['score', '--help']):\n"
        "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "        main(argv)\n"
        "print(sorted(m for m in ('torch', 'transformers', 'trl') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_train_groups_cover_every_field_once():
    listed = [name for names in train_groups(config_class()).values() for name in names]
    assert len(listed) == len(set(listed))
    assert set(listed) == {f.name for f in config_fields(config_class())}
    for heading in (
        "data",
        "model",
        "strategy",
        "RFT",
        "GRPO",
        "evaluation",
        "scale",
        "reliability",
        "OpenClaw",
    ):
        assert heading in train_groups(config_class())


def test_train_help_is_grouped(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = capsys.readouterr().out
    headings = [text.index(f"\n{title}:\n") for title in train_groups(config_class())]
    assert headings == sorted(headings), "headings in the table's order"
    for (title, names), start, end in zip(
        train_groups(config_class()).items(), headings, [*headings[1:], len(text)], strict=True
    ):
        section = text[start:end]
        for name in names:
            assert f"  --{name} " in section or f"  --{name}\n" in section, (title, name)


REFERENCE = [
    "train", "--strategy", "RFT+GRPO", "--task_name", "客服质检_agent_training", "--model_path", "m",
    "--data_path", "d.jsonl", "--output_dir", "runs/qc", "--openclaw_env", "True", "--eval_auto", "True",
    "--max_train_steps", "60", "--batch_size", "8", "--log_dir", "runs/qc-logs",
]  # fmt: skip


def test_reference_template_flags_reach_the_config_as_given():
    flags = train_flags(build_parser().parse_args(REFERENCE))
    assert flags == {
        "strategy": "RFT+GRPO", "task_name": "客服质检_agent_training", "model_path": "m",
        "data_path": "d.jsonl", "output_dir": "runs/qc", "openclaw_env": "True", "eval_auto": "True",
        "max_train_steps": "60", "batch_size": "8", "log_dir": "runs/qc-logs",
    }  # fmt: skip
    bare = train_flags(build_parser().parse_args(["train", "--openclaw_env", "--resume", "False"]))
    assert bare == {"openclaw_env": "True", "resume": "False"}


def test_install_dry_run_both_spellings(capsys):
    outputs = []
    for flag in ("--dry_run", "--dry-run"):
        assert main(["install", flag]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and "pip install" in outputs[0]


def test_plan_llm_flags_both_spellings():
    parser = build_parser()
    new = parser.parse_args(["plan", "x", "--llm_base_url", "http://h/v1", "--llm_model", "tiny"])
    old = parser.parse_args(["plan", "x", "--llm-base-url", "http://h/v1", "--llm-model", "tiny"])
    assert (new.llm_base_url, new.llm_model) == (old.llm_base_url, old.llm_model) == ("http://h/v1", "tiny")
    run = parser.parse_args(["run", "x", "-y"])
    assert run.yes is True and run.llm_base_url is None


def test_data_collect_short_and_long_output():
    parser = build_parser()
    assert parser.parse_args(["data", "collect", "-o", "a.jsonl"]).output == "a.jsonl"
    assert parser.parse_args(["data", "collect", "--output", "a.jsonl"]).output == "a.jsonl"


def test_bool_flags_take_true_false_like_the_reference_tool():
    parser = build_parser()
    assert parser.parse_args(["demo"]).overwrite_output_dir is False
    assert parser.parse_args(["demo", "--overwrite_output_dir"]).overwrite_output_dir is True
    assert parser.parse_args(["demo", "--overwrite_output_dir", "False"]).overwrite_output_dir is False
    rm = ["rm", "train", "--data_path", "p", "--model_path", "m", "--output_dir", "o"]
    assert parser.parse_args([*rm, "--bf16", "yes"]).bf16 is True


def test_a_bad_bool_is_one_line_exit_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--overwrite_output_dir", "maybe"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--overwrite_output_dir" in err[0] and "expected True or False" in err[0]


@dataclass
class _Demo:
    where: str = opt(None, "a folder", positional=True)
    count: int = opt(3, "how many", group="numbers")
    ratio: float | None = opt(None, "a share", group="numbers")
    loud: bool = opt(False, "shout", switch=True, aliases=("-l",))
    keep: bool = opt(True, "keep it")
    a: bool = opt(False, "one", switch=True, exclusive="x")
    b: bool = opt(False, "other", switch=True, exclusive="x")
    tags: list[str] = opt(help="tags", default_factory=list, nargs="*")
    mode: str = opt("fast", "speed", choices=("fast", "slow"))


def _demo_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="demo")
    return add_dataclass_args(parser, _Demo)


def test_add_dataclass_args_types_defaults_and_parse_into():
    ns = _demo_parser().parse_args(["here", "--count", "5", "-l", "--keep", "False", "--tags", "a", "b"])
    value = parse_into(_Demo, ns)
    assert value == _Demo(where="here", count=5, loud=True, keep=False, tags=["a", "b"])
    assert parse_into(_Demo, _demo_parser().parse_args(["x"])) == _Demo(where="x")


def test_add_dataclass_args_groups_choices_and_exclusive(capsys):
    parser = _demo_parser()
    text = parser.format_help()
    numbers = text.index("\nnumbers:\n")
    assert text.index("\n  --count") > numbers and text.index("\n  --ratio") > numbers
    assert text.index("\n  --loud") < numbers
    with pytest.raises(SystemExit):
        parser.parse_args(["x", "--a", "--b"])
    with pytest.raises(SystemExit):
        parser.parse_args(["x", "--mode", "medium"])
    with pytest.raises(SystemExit):
        parser.parse_args(["x", "--count", "many"])


def test_add_command_calls_the_function_with_the_dataclass():
    seen = []
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    add_command(sub, "go", _Demo, lambda opts: seen.append(opts) or 0, help="go")
    args = parser.parse_args(["go", "there", "--ratio", "0.5"])
    assert args.func(args) == 0
    assert seen == [_Demo(where="there", ratio=0.5)]


def test_train_parser_is_the_train_config():
    parser = all_commands()[("train",)]
    assert getattr(parser, OPTIONS_ATTR) is config_class()
