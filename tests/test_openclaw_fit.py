"""Real OpenClaw CLI against a model served by ``ark-trainer deploy``: the question survives prompt fitting.

OpenClaw 2026.9.6 sends a ~40k-character system prompt, then ``[date] question`` + runtime notes, then an
internal-context note. Cut to its last tokens (the server before issue 16) that prompt keeps the notes,
and every question got the same answer. A tiny model (window 256) is trained here in a few seconds to
answer two questions from prompts shaped like OpenClaw's (noise around the question, fitted by the
server's own :class:`~ark_trainer.deploy.fit.PromptFitter`); asked through ``openclaw agent --local``,
each question must get its own answer.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ark_trainer.cli import main
from ark_trainer.deploy.process import stop_server
from ark_trainer.fileio import read_json

QA = {
    "What is the capital of France?": "Paris is the capital of France.",
    "How many legs does a spider have?": "A spider has eight legs.",
}
WINDOW = 256
ALPHABET = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,:;|=/-_()[]<>!?'\"#*\n"


def _noise(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(n))


def _request(rng: random.Random, question: str) -> list[dict]:
    """A request shaped like OpenClaw's (system prompt, question with its notes, a context note)."""
    day = f"[{rng.choice(['Mon', 'Tue', 'Wed'])} 2026-12-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:00 UTC]"
    return [
        {
            "role": "system",
            "content": "You are a personal assistant running inside OpenClaw.\n" + _noise(rng, 3000),
        },
        {"role": "user", "content": f"{day} {question}\n\nRuntime: agent=main | {_noise(rng, 250)}"},
        {"role": "user", "content": "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\n" + _noise(rng, 220)},
    ]


def train_answering_model(path: Path, qa: dict[str, str], window: int = WINDOW, steps: int = 120) -> Path:
    """A tiny Qwen2 (1 layer) trained on fitted OpenClaw-shaped prompts until each question gets its answer."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    from ark_trainer.demo.model import train_tokenizer
    from ark_trainer.deploy.fit import PromptFitter

    rng = random.Random(0)
    tok = train_tokenizer([*qa, *qa.values(), _noise(rng, 4000)] * 3, vocab_size=400)
    tok.model_max_length = window

    def render(messages, tools=None):
        return tok.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)

    fitter = PromptFitter(
        render, lambda s: tok(s, add_special_tokens=False)["input_ids"], window - 64, log=str
    )
    rows = []
    for i in range(64):
        question = list(qa)[i % len(qa)]
        prompt = render(fitter(_request(rng, question), None)[0])
        ids = tok(prompt + qa[question] + "<|im_end|>", add_special_tokens=False)["input_ids"]
        n_prompt = len(tok(prompt, add_special_tokens=False)["input_ids"])
        rows.append((ids, n_prompt))
    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=window, pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )  # fmt: skip
    model = Qwen2ForCausalLM(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step in range(steps):
        ids, n_prompt = rows[step % len(rows)]
        x = torch.tensor([ids])
        labels = x.clone()
        labels[0, :n_prompt] = -100  # the loss on the answer only
        loss = model(input_ids=x, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    model.generation_config = GenerationConfig(
        do_sample=False, eos_token_id=tok.eos_token_id, max_new_tokens=32
    )
    model.save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return path


def _answer(openclaw, question: str, session: str) -> dict:
    return openclaw.run_json(
        ["agent", "--local", "--json", "--timeout", "120", "--session-id", session, "--message", question],
        timeout=180,
    )


@pytest.mark.slow
def test_two_questions_through_openclaw_get_their_own_answers(openclaw, tmp_path, capsys):
    out = tmp_path / "run"
    train_answering_model(out / "model", QA)
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
