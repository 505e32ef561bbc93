"""Serving parity through the real OpenClaw CLI: the budget OpenClaw asks for, a real model's answer, a
trained QC model's verdict (slow tier: each ``openclaw agent --local`` turn costs 10–15 s of CPU here).

- The provider entry deploy writes makes OpenClaw ask for ``maxTokens`` (before: 1 token, its prompt
  being larger than the registered window), read from the request OpenClaw sends.
- The base SmolLM2-135M-Instruct, deployed directly from its folder, answers "What is the capital of
  France?" with Paris (before: a line of OpenClaw's BOOTSTRAP.md), within the budget OpenClaw asked.
- A QC model trained here on bare task prompts answers a QC request sent through the agent in the
  canonical format with the right verdict.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import pytest

from ark_trainer.base.fileio import read_json
from ark_trainer.cli import main

SMOLLM2 = Path(os.environ.get("ARK_SMOLLM2_HF", "/work/models/smollm2-hf"))
TURN_LINE = re.compile(
    r"\[ark serve\] turn: asked max_completion_tokens=(\d+); prompt (\d+) tokens, reply (\d+) tokens"
)


def _ask(openclaw, message: str, session: str) -> tuple[str, dict]:
    reply = openclaw.run_json(
        ["agent", "--local", "--json", "--timeout", "300", "--session-id", session, "--message", message],
        timeout=400,
    )
    return "".join(p.get("text") or "" for p in reply["payloads"]).strip(), reply


def _turns(log: Path) -> list[tuple[int, int, int]]:
    """(asked, prompt, reply) tokens of every request the server answered, the smoke request first."""
    return [tuple(map(int, m.groups())) for m in TURN_LINE.finditer(log.read_text())]  # type: ignore[misc]


@pytest.mark.slow
def test_openclaw_asks_for_the_budget_the_provider_entry_gives(openclaw):
    """OpenClaw's whole default prompt (~16k tokens by its estimate) and a model of 512 positions: the
    entry's contextTokens covers the prompt the server will fit, so OpenClaw asks for maxTokens."""
    from ark_trainer.services.openclaw.deploy import provider_patch
    from ark_trainer.services.openclaw.shape import capture_turn

    patch = provider_patch("ark-small", 1, 512, 128, None, "k", "openclaw")
    body, reply = capture_turn(patch, "What is the capital of France?")
    assert reply["payloads"][0]["text"] == "ok"
    assert len(body["messages"][0]["content"]) > 20_000 and len(body["tools"]) >= 10  # the whole prompt
    assert body["max_completion_tokens"] == 128  # maxTokens, not 1


@pytest.mark.slow
def test_the_base_smollm2_deployed_directly_answers_paris(openclaw, tmp_path, capsys):
    if not (SMOLLM2 / "config.json").is_file():
        pytest.skip(f"no SmolLM2-135M-Instruct HF folder at {SMOLLM2} (ARK_SMOLLM2_HF)")
    config = Path(os.environ["OPENCLAW_STATE_DIR"]) / "openclaw.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("{ // mine\n  gateway: { port: 19002 },\n}\n")
    before = hashlib.sha256(config.read_bytes()).hexdigest()
    assert main(["deploy", str(SMOLLM2)]) == 0
    said = capsys.readouterr().out
    assert "prompt shape bare" in said and 'agents.defaults.contextInjection="never"' in said
    record = read_json(Path(os.environ["OPENCLAW_STATE_DIR"]) / "ark-trainer" / "deployments.json")[-1]
    try:
        text, reply = _ask(openclaw, "What is the capital of France?", "paris")
        assert reply["meta"]["executionTrace"]["winnerProvider"] == "ark"
        assert "Paris" in text, text
        asked, prompt, answered = _turns(Path(record["log"]))[-1]
        assert (
            asked == record["reply_tokens"] == 64
        )  # what the entry gives: train's length, not a window share
        assert 1 < answered <= asked and prompt < 64  # the answer in that budget; the bare request alone
    finally:
        assert main(["deploy", "--rollback"]) == 0
    assert hashlib.sha256(config.read_bytes()).hexdigest() == before
    assert (SMOLLM2 / "ark_prompt_shape.json").exists() is False  # the model's own folder is not written


@pytest.mark.slow
def test_a_trained_qc_model_gives_the_right_verdict_through_the_agent(openclaw, tmp_path):
    from ark_trainer.app.demo.data import generate_rows, gold_answer
    from ark_trainer.rewards.qc import parse_answer
    from tests.openclaw.test_openclaw_fit import train_tiny_chat_model

    rows = [r for r in generate_rows(40, 3, "eval", with_candidates=False) if len(r["question"]) < 260]
    pick = [next(r for r in rows if r["label"] == "无"), next(r for r in rows if r["label"] == "辱骂")]
    examples = [([{"role": "user", "content": r["question"]}], gold_answer(r)) for r in pick] * 32
    from ark_trainer.core.folders import claim_folder

    out = claim_folder(tmp_path / "run")  # a run of ours: deploy writes OUT/deploy/ inside it
    train_tiny_chat_model(out / "model", examples, steps=160, window=512)
    assert read_json(out / "model" / "ark_prompt_shape.json")["shape"] == "bare"  # bare task prompts
    assert main(["deploy", str(out)]) == 0
    record = read_json(out / "deploy" / "deploy.json")
    try:
        for i, row in enumerate(pick):
            text, reply = _ask(openclaw, row["question"], f"qc-{i}")
            assert reply["meta"]["executionTrace"]["winnerProvider"] == "ark"
            answer = parse_answer(text)
            assert text.startswith("结论：") and answer.type is not None, text  # the canonical format
            assert answer.verdict == ("合规" if row["label"] == "无" else "违规"), text
            assert answer.type == row["label"], text
        asked, _prompt, answered = _turns(Path(record["log"]))[-1]
        assert asked == record["reply_tokens"] == 128 and 1 < answered <= asked
    finally:
        assert main(["deploy", "--rollback"]) == 0
    _parity_of_the_same_model(out, pick)


def _parity_of_the_same_model(out: Path, rows: list[dict]) -> None:
    """Its held-out set, evaluated bare (``evaluate_model``, as train does) and through the server in
    OpenClaw's recorded request (``ark-trainer eval OUT --through openclaw``): the same metrics, no gap."""
    from ark_trainer.base.fileio import write_json, write_jsonl
    from ark_trainer.core.models.device import Runtime
    from ark_trainer.data.loader import load_jsonl
    from ark_trainer.rewards.builder import build_reward
    from ark_trainer.stages.evaluate import evaluate_model

    write_jsonl(out / "data" / "eval.jsonl", [{"question": r["question"], "label": r["label"]} for r in rows])
    (out / "run.yaml").write_text(f"model_path: {out / 'model'}\ndata_path: {out / 'data' / 'eval.jsonl'}\n")
    write_json(
        out / "plan.json", {"stages": [{"name": "grpo", "steps": 1, "learning_rate": 1e-5, "last": True}]}
    )
    held_out = load_jsonl(out / "data" / "eval.jsonl")
    reward = build_reward({}, held_out, "cpu")
    bare = evaluate_model(
        out / "model", "grpo", held_out, reward, Runtime("cpu", False, False, []), out / "eval" / "grpo.json",
        max_new_tokens=128, pass_threshold=0.5,
    )  # fmt: skip
    assert main(["eval", str(out), "--through", "openclaw"]) == 0
    through = read_json(out / "eval" / "grpo-openclaw.json")
    assert set(bare) - {"examples", "answers", "name", "model"} <= set(through)  # the same metric names
    assert through["n"] == 2 and through["request_shape"]["openclaw"].startswith("OpenClaw")
    assert through["task_accuracy"] == through["bare"]["task_accuracy"] == bare["task_accuracy"] == 1.0
    assert through["gap"]["task_accuracy"] == 0 and through["prompt_shape"]["shape"] == "bare"
    assert through["dtype"] == bare["dtype"] == "float32"  # served in the precision it was evaluated in
    assert [a["completion"] for a in through["answers"]] == [a["completion"] for a in bare["answers"]]
