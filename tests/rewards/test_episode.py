"""Graders that see the whole episode (``rewards/episode.py``): its tool calls with their arguments, its turns
and its final answer; their spec errors name the file and line; ``score`` reads tool calls from the text.
"""

from __future__ import annotations

import json

import pytest

from ark_trainer.base.errors import UserError
from ark_trainer.stages.agent.rollout import start, step
from tests.agent.calc_env import call, row

GRADERS = """graders:
  - name: looked_up
    type: tool_called
    tool: add
    args_from: {a: first}
    args: {b: 3}
  - name: clean
    type: no_invalid_calls
    weight: 0.5
  - name: quick
    type: max_turns
    turns: 2
    weight: 0.5
  - name: says_five
    type: string_check
    reference: "5"
    operation: like
"""


def test_episode_graders_see_calls_turns_and_the_final_answer(calc, tmp_path):
    from ark_trainer.rewards.composite import CompositeReward

    spec = tmp_path / "graders.yaml"
    spec.write_text(GRADERS)
    reward = CompositeReward.from_spec(spec)
    good = start(row(target=5, first=2), calc)
    step(good, call("add", a=2, b=3), False)
    step(good, "It is 5.", False)
    wrong = start(row(target=5, first=2), calc)
    step(wrong, call("add", a=1, b=3) + "<tool_call>nope</tool_call>", False)
    step(wrong, call("add", a=1, b=3), False)
    step(wrong, "It is 4.", False)
    no_column = start(row(target=5), calc)
    step(no_column, "5", False)
    eps = [good, wrong, no_column]
    columns = {"first": [2, 2, None], "environments": [e.env for e in eps]}
    table = reward.score([e.row["prompt"] for e in eps], [e.completion for e in eps], **columns)
    assert table["looked_up"] == [1.0, 0.0, None]
    assert table["clean"] == [1.0, 0.0, 1.0]
    assert table["quick"] == [1.0, 0.0, 1.0]
    assert table["says_five"] == [1.0, 0.0, 1.0]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("type: tool_called", "graders.yaml:2: tool: missing"),
        ("type: max_turns\n    turns: 0", "graders.yaml:4: turns: expected a number ≥ 1"),
        (
            "type: tool_called\n    tool: add\n    args_from: {a: 3}",
            "graders.yaml:5: args_from: a: expected a column name",
        ),
        (
            "type: no_invalid_calls\n    turns: 2",
            "graders.yaml:4: turns: unknown key for a no_invalid_calls grader",
        ),
    ],
)
def test_episode_grader_spec_errors_name_file_and_line(tmp_path, entry, message):
    from ark_trainer.rewards.spec import load_graders

    spec = tmp_path / "graders.yaml"
    spec.write_text(f"graders:\n  - name: g\n    {entry}\n")
    with pytest.raises(UserError) as exc:
        load_graders(spec)
    assert message in str(exc.value)


def test_score_dry_run_reads_tool_calls_from_text(tmp_path, capsys):
    from ark_trainer.cli import main

    spec = tmp_path / "graders.yaml"
    spec.write_text(
        "graders:\n  - name: looked_up\n    type: tool_called\n    tool: add\n    args_from: {a: first}\n"
    )
    data = tmp_path / "data.jsonl"
    rows = [
        {"prompt": "add 2 and 3", "first": 2, "completion": call("add", a=2, b=3)},
        {"prompt": "add 2 and 3", "first": 2, "completion": call("add", a=7, b=3)},
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["score", "--data_path", str(data), "--reward_config", str(spec), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["graders"]["looked_up"]["mean"] == 0.5
