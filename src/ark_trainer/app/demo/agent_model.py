"""The agent demo's tiny base model: it knows the tool-call format but chooses tools and arguments poorly.

Made here from nothing downloaded, with the QC demo's pieces (``demo.model``: tokenizer training, the tiny
``Qwen2ForCausalLM``, the SFT warm-up):

1. a byte-level BPE tokenizer trained on the warm-up episodes rendered with ``AGENT_CHAT_TEMPLATE`` (the
   ``<tool_call>`` JSON and the tool list become a few tokens each), which it keeps as its chat template;
2. a randomly initialised ``Qwen2ForCausalLM`` (hidden 64, 2 layers by default);
3. a short TRL ``SFTTrainer`` warm-up on whole episodes (loss on the assistant turns only: tool results and
   requests are masked), played through the real environment by a deliberately careless scripted agent
   (``agent_data.Flaws``): it often acts on the decoy order the request mentions first, opens a ticket where
   a refund was due, tells the customer a wrong status, files a ticket under the wrong issue.

So the model calls tools in the right format but often with the wrong tool or argument, and sampling still
finds a solved episode for many tasks: what RFT and GRPO over episodes need to have something to select. A toy
for the demo, not a real model; ``ARK_DEMO_MODEL.md`` beside the weights says how it was made.

Run it::

    PYTHONPATH=src python -m ark_trainer.app.demo.agent_model OUT_DIR
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from ark_trainer.app.demo.agent_data import CARELESS, Flaws, env_tools, generate_tasks, play, task_key
from ark_trainer.app.demo.agent_env import ORDER_IDS, TICKET_IDS, CustomerServiceEnv
from ark_trainer.app.demo.model import MODEL_CARD, make_model, train_tokenizer, warm_up
from ark_trainer.stages.agent.toolcall import AGENT_CHAT_TEMPLATE

WARMUP_SEED_OFFSET = 7919  # warm-up tasks come from seed + this: not the train or held-out tasks
# The careless agent of the warm-up. Measured on the 240 held-out tasks (seed 0, `agent_check`): the base model
# solves 26% of them greedily, and at least one of 8 samples at temperature 1 solves 50% (18% of the samples).
# The copying of order ids is learned late (the warm-up loss drops from 0.2 to 0.08 between steps 120 and 240):
# fewer warm-up steps leave a model that always names the same order.
WARMUP_FLAWS = CARELESS
WARMUP_MAX_LENGTH = 256
# Whole tokens for the format's tags and the tools' names (as Qwen2.5's tokenizer has ``<tool_call>``): shorter
# episodes for a model with a small window, and one token to choose where the model chooses a tool.
FORMAT_TOKENS = (
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    '{"name": "',
    '", "arguments": {',
    "order_id",
)


def warmup_episodes(n: int, seed: int, exclude: list[str], flaws: Flaws = WARMUP_FLAWS) -> list[list[dict]]:
    """``n`` episodes of the careless agent on warm-up tasks (none whose ``task_key`` is in ``exclude``)."""
    rng = random.Random(f"ark-agent-demo:warmup:{seed}")
    rows = generate_tasks(n, seed + WARMUP_SEED_OFFSET, exclude=exclude)
    return [play(row, flaws, rng)[0] for row in rows]


def tokenized_episode(tokenizer: Any, messages: list[dict], tools: list) -> dict[str, list[int]]:
    """``input_ids`` and ``assistant_masks`` of one episode rendered with the tokenizer's (agent) template."""
    out = tokenizer.apply_chat_template(
        messages, tools=tools, return_dict=True, return_assistant_tokens_mask=True
    )
    return {"input_ids": list(out["input_ids"]), "assistant_masks": list(out["assistant_masks"])}


def agent_tokenizer(train_rows: list[dict], episodes: list[list[dict]], vocab_size: int) -> Any:
    """A tokenizer trained on the task prompts and the rendered warm-up episodes, with the agent template."""
    render = train_tokenizer(["x"], vocab_size=300)  # only to render text; its own vocabulary is not used
    render.chat_template = AGENT_CHAT_TEMPLATE
    tools = env_tools(CustomerServiceEnv())
    texts = [row["prompt"][0]["content"] for row in train_rows]
    texts += [render.apply_chat_template(e, tools=tools, tokenize=False) for e in episodes]
    tokenizer = train_tokenizer(texts, vocab_size=vocab_size)
    # not special tokens: decoding keeps them
    tokenizer.add_tokens([*FORMAT_TOKENS, *(f.__name__ for f in tools), *ORDER_IDS, *TICKET_IDS])
    tokenizer.chat_template = AGENT_CHAT_TEMPLATE
    return tokenizer


def build_agent_model(
    out_dir: Path,
    train_rows: list[dict],
    *,
    seed: int = 0,
    hidden_size: int = 64,
    num_layers: int = 2,
    warmup_steps: int = 300,
    n_warmup: int = 3000,
    vocab_size: int = 1000,
    batch_size: int = 32,
    flaws: Flaws = WARMUP_FLAWS,
    progress: bool = True,
    held_out: list[dict] | None = None,
) -> Path:
    """Make the agent demo's base model in ``out_dir`` (safetensors, tokenizer with the agent template, card).

    ``train_rows`` (the demo's training tasks) feed the tokenizer; no warm-up task repeats a request of theirs
    or of ``held_out`` (the evaluation tasks)."""
    from transformers import set_seed

    started = time.monotonic()
    set_seed(seed)
    exclude = [task_key(row) for row in [*train_rows, *(held_out or [])]]
    episodes = warmup_episodes(n_warmup, seed, exclude, flaws)
    tokenizer = agent_tokenizer(train_rows, episodes, vocab_size)
    tools = env_tools(CustomerServiceEnv())
    rows = [tokenized_episode(tokenizer, e, tools) for e in episodes]
    model = make_model(tokenizer, hidden_size, num_layers)
    history = (
        warm_up(model, tokenizer, rows, warmup_steps, seed, progress, batch_size, WARMUP_MAX_LENGTH)
        if warmup_steps > 0
        else []
    )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    facts = {
        "seed": seed,
        "hidden_size": hidden_size,
        "num_layers": num_layers,
        "n_parameters": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(tokenizer),
        "warmup_steps": warmup_steps,
        "warmup_batch_size": batch_size,
        "n_warmup_episodes": len(episodes),
        "longest_episode_tokens": max(len(r["input_ids"]) for r in rows),
        "warmup_flaws": flaws.__dict__,
        "final_loss": next((round(e["loss"], 4) for e in reversed(history) if "loss" in e), None),
        "build_seconds": round(time.monotonic() - started, 1),
    }
    (out_dir / MODEL_CARD).write_text(_model_card(facts), encoding="utf-8")
    return out_dir


def _model_card(facts: dict) -> str:
    return f"""# ark-trainer agent demo base model: a toy, not a real model

Made by `ark_trainer.app.demo.agent_model.build_agent_model` on CPU in {facts["build_seconds"]} s, from nothing
downloaded, to run RFT and GRPO over tool-using episodes end to end. Point `--model_path` at a real
checkpoint for real work.

- **Tokenizer**: byte-level BPE, {facts["vocab_size"]} tokens, trained on the demo's requests and episodes;
  chat template: `ark_trainer.stages.agent.toolcall.AGENT_CHAT_TEMPLATE` (`<tool_call>` JSON blocks).
- **Model**: `Qwen2ForCausalLM`, hidden {facts["hidden_size"]}, {facts["num_layers"]} layers,
  {facts["n_parameters"]:,} parameters, randomly initialised (seed {facts["seed"]}).
- **Warm-up**: {facts["warmup_steps"]} steps of TRL `SFTTrainer` (batch {facts["warmup_batch_size"]}, loss on the
  assistant turns only) on {facts["n_warmup_episodes"]} episodes of a *careless* scripted agent played
  through `ark_trainer.app.demo.agent_env` (tasks drawn with seed {facts["seed"]} + {WARMUP_SEED_OFFSET}).

## Its deliberate flaws

The careless agent's mistakes (the share of episodes where each can happen): acting on the older order the
request mentions first (`decoy_id`), telling a wrong status, opening a ticket where a refund was due
(`skip_refund`), claiming a refund that was refused (`false_refund`), filing the wrong issue. So the model
writes well-formed tool calls but often the wrong tool or argument.

```json
{json.dumps(facts, ensure_ascii=False, indent=2)}
```
"""


if __name__ == "__main__":
    print(
        build_agent_model(Path(sys.argv[1] if len(sys.argv) > 1 else "agent_model"), generate_tasks(600, 0))
    )
