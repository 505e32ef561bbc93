"""RFT on whole episodes (``stages/agent/rft.py``): candidate episodes in the data, validated by the loader and replayed
in the environment; the loss on the assistant turns only.

Run: PYTHONPATH=src python -m pytest tests/agent/test_rft.py -q
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ark_trainer.base.errors import UserError
from ark_trainer.data.loader import episode_candidate_problems, load_jsonl
from ark_trainer.stages.agent.env import Limits, limited_env_class, load_env
from ark_trainer.stages.agent.rft import candidate_episodes, check_episode_sources
from ark_trainer.stages.agent.rollout import replay, start, step
from tests.agent.calc_env import call, row

ROOT = Path(__file__).resolve().parents[2]
SHOP = ROOT / "examples" / "agent_env" / "shop_env.py"
PROMPT = [{"role": "user", "content": "Where is my order A1?"}]


def lookup(order_id: str, args_as_text: bool = False) -> dict:
    args: dict | str = {"order_id": order_id}
    call = {"type": "function", "function": {"name": "lookup_order", "arguments": args}}
    if args_as_text:
        call["function"]["arguments"] = json.dumps(args)
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def solved(order_id: str = "A1") -> list[dict]:
    return [
        lookup(order_id),
        {"role": "tool", "name": "lookup_order", "content": "a result the environment will not give"},
        {"role": "assistant", "content": "It has shipped."},
    ]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_the_loader_keeps_episode_candidates(tmp_path):
    episode = [lookup("A1", args_as_text=True), {"role": "assistant", "content": "Shipped."}]
    rows = load_jsonl(_write(tmp_path / "d.jsonl", [{"prompt": PROMPT, "candidates": [solved(), episode]}]))
    first, second = rows[0]["candidates"]
    assert first[0]["content"] == "" and first[0]["tool_calls"][0]["function"]["name"] == "lookup_order"
    assert first[1] == {
        "role": "tool",
        "content": "a result the environment will not give",
        "name": "lookup_order",
    }
    assert second[0]["tool_calls"][0]["function"]["arguments"] == '{"order_id": "A1"}'
    assert load_jsonl(_write(tmp_path / "t.jsonl", [{"prompt": PROMPT, "candidates": ["text"]}]))[0][
        "candidates"
    ] == ["text"]


@pytest.mark.parametrize(
    ("candidate", "message"),
    [
        (
            [{"role": "tool", "content": "x"}],
            "candidates[0]: an episode is a list of messages that starts with an",
        ),
        (
            [{"role": "assistant", "content": "x"}, {"role": "user", "content": "y"}],
            "candidates[0][1].role: an",
        ),
        (
            [{"role": "assistant", "content": "", "tool_calls": [{"function": {"arguments": {}}}]}],
            "tool_calls",
        ),
        (
            [{"role": "assistant", "content": "", "tool_calls": [{"name": "f", "arguments": "{no"}]}],
            "tool_calls",
        ),
    ],
)
def test_a_bad_episode_candidate_is_refused_with_its_line(tmp_path, candidate, message):
    path = _write(tmp_path / "d.jsonl", [{"prompt": PROMPT}, {"prompt": PROMPT, "candidates": [candidate]}])
    with pytest.raises(UserError) as err:
        load_jsonl(path)
    assert len(err.value.messages) == 1 and f"{path}:2: " in err.value.messages[0]
    assert message in err.value.messages[0]


def test_episode_candidates_need_env_and_rft_without_samples_needs_candidates(tmp_path):
    rows = load_jsonl(_write(tmp_path / "d.jsonl", [{"prompt": PROMPT, "candidates": [solved()]}] * 3))
    (line,) = episode_candidate_problems(rows, "d.jsonl")
    assert (
        line.startswith("d.jsonl:1: candidates: an episode")
        and "(3 rows hold one)" in line
        and "--env" in line
    )
    assert "give --env" in line  # prepare refuses it without --env (pipeline.py)
    env = "shop.py:make_env"
    check_episode_sources(env, "d.jsonl", 0, rows)  # candidates to replay: fine
    bare = [{"prompt": PROMPT, "candidates": []}]
    with pytest.raises(UserError, match="--rft_num_samples: 0 plays no episode"):
        check_episode_sources(env, "d.jsonl", 0, bare)
    # the RFT stage checks its data (check_data, run by the pipeline for a stage of the plan); GRPO has no such
    # check, so a plan without RFT has nothing to choose from and that is fine
    from ark_trainer.base.run_options import RunFlags
    from ark_trainer.stages.registry import get_stage
    from ark_trainer.stages.rft.options import RFTOptions

    run = RunFlags(data_path="d.jsonl", env=env)
    with pytest.raises(UserError, match="--rft_num_samples: 0 plays no episode"):
        get_stage("rft").check_data(run, RFTOptions(rft_num_samples=0), bare)
    get_stage("rft").check_data(run, RFTOptions(rft_num_samples=1), bare)
    assert not hasattr(get_stage("grpo"), "check_data")


def test_a_replayed_candidate_gets_the_environments_results_and_reward():
    env_cls = limited_env_class(
        load_env(f"{SHOP}:make_env"), Limits(max_turns=3, tool_timeout=5, max_tool_output=200)
    )
    row = {"prompt": PROMPT, "order_id": "A1"}
    ep = replay(row, env_cls, solved(), env_cls._limits)
    assert ep.done and ep.turns == 2 and ep.ended == "answered" and ep.env._reward() == 1.0
    tool = next(m for m in ep.messages if m["role"] == "tool")
    assert tool["content"].startswith("order A1") and "will not give" not in tool["content"]
    assert ep.final_answer == "It has shipped."
    wrong = replay(row, env_cls, solved("B2"), env_cls._limits)
    assert wrong.env._reward() == 0.0
    # turns past --max_turns are not played: the last allowed turn's calls are not run
    long = [lookup("B2"), lookup("C3"), lookup("A1"), {"role": "assistant", "content": "done"}]
    cut = replay(row, env_cls, long, env_cls._limits)
    assert cut.turns == 3 and cut.ended == "max_turns" and cut.env._reward() == 0.0


def test_a_text_candidate_is_one_assistant_turn():
    episodes = candidate_episodes({"candidates": ["plain answer", solved()]})
    assert episodes[0] == [{"role": "assistant", "content": "plain answer"}] and episodes[1] == solved()


def test_rft_trains_on_the_assistant_turns_only(calc):
    from ark_trainer.app.demo.model import train_tokenizer
    from ark_trainer.stages.agent.rft import tokenized_episodes
    from ark_trainer.stages.agent.toolcall import AGENT_CHAT_TEMPLATE

    tok = train_tokenizer(["add the numbers", call("add", a=2, b=3), "It is 5."], vocab_size=300)
    tok.chat_template = AGENT_CHAT_TEMPLATE
    ep = start(row(target=5), calc)
    step(ep, call("add", a=2, b=3), False)
    step(ep, "It is 5.", False)
    [item] = tokenized_episodes(tok, [{"messages": ep.messages, "tools": calc._spec.schemas}])
    learnt = tok.decode([t for t, m in zip(item["input_ids"], item["assistant_masks"], strict=True) if m])
    assert learnt == call("add", a=2, b=3) + "<|im_end|>It is 5.<|im_end|>"  # no prompt, no tool result
