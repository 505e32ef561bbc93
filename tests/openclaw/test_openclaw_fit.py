"""Real OpenClaw CLI against a model served by ``ark-trainer deploy``: the question survives prompt fitting.

OpenClaw 2026.9.6 sends a ~40k-character system prompt, then ``[date] question`` + runtime notes, then an
internal-context note. Cut to its last tokens (as the server once did) that prompt keeps the notes,
and every question got the same answer. A tiny model (window 256) is trained here in a few seconds to
answer two questions from prompts shaped like OpenClaw's (noise around the question, fitted by the
server's own :class:`~ark_trainer.services.deploy.fit.PromptFitter`); asked through ``openclaw agent --local``,
each question must get its own answer.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from ark_trainer.base.fileio import read_json
from ark_trainer.cli import main
from ark_trainer.core.folders import claim_folder
from ark_trainer.services.deploy.process import stop_server

QA = {
    "What is the capital of France?": "Paris is the capital of France.",
    "How many legs does a spider have?": "A spider has eight legs.",
}
WINDOW = 256
LIST_Q = "List the files in the workspace."
LS_CALL = '<tool_call>\n{"name": "ls", "arguments": {"path": "."}}\n</tool_call>'
LISTED = "The files are listed."
ALPHABET = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,:;|=/-_()[]<>!?'\"#*\n"


def _noise(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(n))


def _word(rng: random.Random) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789-") for _ in range(rng.randint(2, 12)))


def _wrapped(rng: random.Random, question: str) -> str:
    """``question`` as OpenClaw wraps it: ``[date] question`` and its runtime note, with the values that change
    from day to day and machine to machine (the moment, session, host, workspace path, OS, node, model) drawn
    at random, so the model learns they say nothing: the served request carries today's date and this
    machine's values, which a tiny model trained on a few fixed ones may read as a different question."""
    when = datetime(2026, 1, 1) + timedelta(minutes=rng.randrange(6 * 366 * 24 * 60))
    session, model = _word(rng), "ark-" + _word(rng)
    path = "/".join(_word(rng) for _ in range(rng.randint(2, 6)))
    note = " | ".join(
        [
            "agent=main", f"session=agent:main:explicit:{session}", f"sessionId={session}",
            f"host={_word(rng)}", f"repo=/{path}/.openclaw/workspace",
            f"os=Linux {rng.randint(4, 7)}.{rng.randint(0, 20)}.{rng.randint(0, 99)}-{_word(rng)} (x64)",
            f"node=v{rng.randint(18, 26)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}", "active_node=unknown",
            f"model=ark/{model}", f"default_model=ark/{model}", "shell=bash",
        ]
    )  # fmt: skip
    return f"{when:[%a %Y-%m-%d %H:%M UTC]} {question}\n\nRuntime: {note}"


def _request(rng: random.Random, question: str) -> list[dict]:
    """A request shaped like OpenClaw's (system prompt, question with its notes, a context note)."""
    return [
        {
            "role": "system",
            "content": "You are a personal assistant running inside OpenClaw.\n" + _noise(rng, 3000),
        },
        {"role": "user", "content": _wrapped(rng, question)},
        {"role": "user", "content": "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\n" + _noise(rng, 220)},
    ]


def train_tiny_chat_model(
    path: Path, examples: list, template: str | None = None, steps: int = 120, window: int = WINDOW
) -> Path:
    """A tiny Qwen2 (1 layer, window 256) trained on ``(messages, target)`` pairs, their prompts fitted as
    the server fits them, the loss on the target only; greedy by default."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    from ark_trainer.app.demo.model import train_tokenizer
    from ark_trainer.services.deploy.fit import PromptFitter
    from ark_trainer.services.deploy.policy import shape_of_rows, write_shape

    texts = [str(m.get("content")) for messages, _ in examples[:8] for m in messages] + [
        t for _, t in examples
    ]
    tok = train_tokenizer(texts, vocab_size=400)
    tok.model_max_length = window
    if template:
        tok.chat_template = template

    def render(messages, tools=None):
        return tok.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)

    def ids(text: str) -> list[int]:
        return tok(text, add_special_tokens=False)["input_ids"]

    fitter = PromptFitter(render, ids, window - window // 4, log=str)
    rows = []
    for messages, target in examples:
        prompt = render(fitter(messages, None)[0])
        rows.append((ids(prompt + target + "<|im_end|>"), len(ids(prompt))))
    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=window, pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )  # fmt: skip
    model = Qwen2ForCausalLM(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step in range(steps):
        row, n_prompt = rows[step % len(rows)]
        x = torch.tensor([row])
        labels = x.clone()
        labels[0, :n_prompt] = -100  # the loss on the target only
        model(input_ids=x, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()
    model.generation_config = GenerationConfig(
        do_sample=False, eos_token_id=tok.eos_token_id, max_new_tokens=32
    )
    model.save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    # the prompt shape it learnt, as train records it: the server shows it the same (deploy/policy.py)
    rows = [{"prompt": messages} for messages, _ in examples]
    # and the answers' length it was trained with (train records --max_completion_length): the reply budget
    write_shape(path, shape_of_rows(rows, with_tools=template is not None).with_reply_tokens(window // 4))
    return path


def answering_examples(n: int = 64) -> list:
    rng = random.Random(0)
    return [(_request(rng, q), QA[q]) for q in (list(QA)[i % len(QA)] for i in range(n))]


def tool_examples(n: int = 64) -> list:
    """Asked to list the files, call OpenClaw's ``ls``; with its result in the turn, say so."""
    rng = random.Random(1)
    examples = []
    for i in range(n):
        messages = _request(rng, LIST_Q)
        if i % 2:
            call = {"type": "function", "function": {"name": "ls", "arguments": {"path": "."}}}
            listing = "\n".join(f'"{_noise(rng, 8).strip()}.md"' for _ in range(rng.randint(2, 6)))
            messages[2:2] = [
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "content": listing},
            ]
        examples.append((messages, LISTED if i % 2 else LS_CALL))
    return examples


def _answer(openclaw, question: str, session: str) -> dict:
    return openclaw.run_json(
        ["agent", "--local", "--json", "--timeout", "120", "--session-id", session, "--message", question],
        timeout=180,
    )


@pytest.mark.slow
def test_two_questions_through_openclaw_get_their_own_answers(openclaw, tmp_path, capsys):
    out = claim_folder(tmp_path / "run")  # a run of ours: deploy writes OUT/deploy/ inside it
    train_tiny_chat_model(out / "model", answering_examples())
    assert main(["deploy", str(out)]) == 0
    record = read_json(out / "deploy" / "deploy.json")
    try:
        answers = {}
        for i, question in enumerate(QA):
            reply = _answer(openclaw, question, f"fit-{i}")
            assert reply["meta"]["executionTrace"]["winnerProvider"] == "ark"
            answers[question] = "".join(p.get("text") or "" for p in reply["payloads"]).strip()
        assert answers == QA, answers  # each question its own, right answer (not one answer for both)
        log = Path(record["log"]).read_text()
        assert log.count("[ark serve] prompt of") == 1 and "fitted into 192" in log  # said once
    finally:
        stop_server(record["pid"])


@pytest.mark.slow
def test_openclaw_runs_the_tool_the_deployed_model_calls(openclaw, tmp_path, capsys):
    from ark_trainer.stages.agent.toolcall import AGENT_CHAT_TEMPLATE

    out = claim_folder(tmp_path / "run")
    train_tiny_chat_model(out / "model", tool_examples(), AGENT_CHAT_TEMPLATE, steps=160)
    assert main(["deploy", str(out)]) == 0
    record = read_json(out / "deploy" / "deploy.json")
    try:
        reply = _answer(openclaw, LIST_Q, "tools-1")
        assert reply["meta"]["executionTrace"]["winnerProvider"] == "ark"
        assert "".join(p.get("text") or "" for p in reply["payloads"]).strip() == LISTED
        (tmp_path / "ws").mkdir()
        export = openclaw.run_json(
            ["sessions", "export-trajectory", "--session-key", "agent:main:explicit:tools-1", "--json",
             "--workspace", str(tmp_path / "ws"), "--output", "t1"], timeout=120,
        )  # fmt: skip
        branch = json.loads((Path(export["outputDir"]) / "session-branch.json").read_text())
        messages = [e["message"] for e in branch["entries"] if isinstance(e.get("message"), dict)]
        calls = [
            part
            for m in messages
            if m.get("role") == "assistant" and isinstance(m.get("content"), list)
            for part in m["content"]
            if part.get("type") == "toolCall"
        ]
        assert [(c["name"], c["arguments"]) for c in calls] == [
            ("ls", {"path": "."})
        ]  # our call, as OpenClaw read it
        results = [m for m in messages if m.get("role") in ("toolResult", "tool")]
        assert results and "AGENTS.md" in json.dumps(results)  # ...which OpenClaw ran in its workspace
    finally:
        stop_server(record["pid"])
