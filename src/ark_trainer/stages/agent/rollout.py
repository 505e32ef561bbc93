"""Multi-turn episodes with the tools really executed, generated with Hugging Face ``generate``.

Each turn renders every running episode with its tools through the chat template, generates the next
assistant turn for all of them in batches (left padding; sampling or greedy), reads the ``<tool_call>``
blocks (``stages/agent/toolcall.py``), runs the calls through the environment wrapper (``stages/agent/env.py``: limits,
error texts, counters) and appends the assistant turn and the ``tool`` messages. An episode ends with a
turn that calls no tool, after ``--max_turns`` assistant turns (the last turn's calls are not run, as in
TRL's tool loop with ``max_tool_calling_iterations = max_turns - 1``), or when the next turn would not
fit the model's context. RFT sampling and evaluation use this loop; GRPO uses TRL's own.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ark_trainer.base.chat.toolcall import TOOL_CALL_RE, format_tool_calls, parse_tool_calls
from ark_trainer.rewards.composite import reward_columns
from ark_trainer.stages.agent.env import Limits, ToolEnv

# Episodes per ``generate`` call on CPU. Each turn of an episode is short, so a small model's decoding is bound
# by the per-step overhead, not by arithmetic: 256 sampled episodes of the agent demo's model took 64 s in
# batches of 32 and 40 s in batches of 256 (2 busy cores). A GPU gets ``scale.generation_batch``'s larger size.
CPU_EPISODE_BATCH = 128


@dataclass
class Episode:
    """One episode being played, then its record."""

    row: dict
    env: ToolEnv
    messages: list[dict]  # the prompt (with reset's observation) and every turn since
    n_prompt: int
    turns: int = 0
    done: bool = False
    ended: str = "answered"  # answered | max_turns | context
    final_answer: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def completion(self) -> list[dict]:
        return self.messages[self.n_prompt :]

    def record(self) -> dict[str, Any]:
        """The episode as JSON (``rft_scored.jsonl``, eval files, the report's examples)."""
        return {
            "messages": self.messages,
            "tool_calls": self.env.calls,
            "turns": self.turns,
            "n_invalid": self.env.n_invalid,
            "tool_errors": self.env.tool_errors,
            "final_answer": self.final_answer,
            "ended": self.ended,
            "env_reward": self.env._reward(),
        }


def start(row: dict, env_cls: type[ToolEnv]) -> Episode:
    """A new episode for ``row``: a fresh environment reset with the row's columns."""
    env = env_cls()
    observation = env.reset(prompt=row["prompt"], **reward_columns(row))
    messages = copy.deepcopy(row["prompt"])
    if observation:
        messages[-1] = {**messages[-1], "content": messages[-1]["content"] + observation}
    return Episode(row, env, messages, len(messages))


def step(ep: Episode, text: str, last_turn: bool) -> None:
    """Append the assistant turn ``text``; run its tool calls unless it is the last turn."""
    ep.turns += 1
    content, calls, malformed = parse_tool_calls(text)
    bad_blocks = [b for b in TOOL_CALL_RE.findall(text) if parse_tool_calls(f"<tool_call>{b}</tool_call>")[2]]
    raw = [f"<tool_call>\n{b}\n</tool_call>" for b in bad_blocks]
    if len(bad_blocks) < malformed:  # an unclosed block (cut by the token limit)
        raw.append(text[text.rfind("<tool_call>") :])
    kept = "\n".join([content, *raw]).strip()  # what the model wrote stays, as TRL leaves an unparseable turn
    message: dict[str, Any] = {"role": "assistant", "content": kept}
    if calls:
        message["tool_calls"] = calls
    ep.messages.append(message)
    ep.final_answer = content
    if not calls and not malformed:
        ep.done, ep.ended = True, "answered"
        return
    if last_turn:
        ep.done, ep.ended = True, "max_turns"
        return
    for call in calls:
        fn = call["function"]
        result = ep.env._call(fn["name"], fn["arguments"])
        ep.messages.append({"role": "tool", "name": fn["name"], "content": result})
    for body in raw:
        ep.messages.append({"role": "tool", "name": "error", "content": ep.env._malformed(body)})


def replay(row: dict, env_cls: type[ToolEnv], candidate: list[dict], limits: Limits) -> Episode:
    """A candidate episode of the data played again in a fresh environment, as if the model wrote its assistant
    turns: the calls run through the same limits, and the results are the environment's (the candidate's own
    ``tool`` messages are not read), so the record is what this environment makes of those turns."""
    ep = start(row, env_cls)
    for turn in (m for m in candidate if m["role"] == "assistant"):
        if ep.done:
            break
        calls = format_tool_calls(turn.get("tool_calls") or [])
        text = "\n".join(part for part in (turn.get("content") or "", calls) if part)
        step(ep, text, last_turn=ep.turns == limits.max_turns - 1)
    ep.done = True
    return ep


def run_episodes(
    model,
    tokenizer,
    env_cls: type[ToolEnv],
    rows: list[dict],
    limits: Limits,
    *,
    num_samples: int = 1,
    temperature: float = 0.0,
    max_new_tokens: int = 64,
    batch_size: int = 16,
    seed: int = 0,
    on_batch: Callable[[int], None] | None = None,
) -> list[list[Episode]]:
    """``num_samples`` episodes per row (greedy when ``temperature`` is 0), grouped by row."""
    import torch

    episodes = [start(row, env_cls) for row in rows for _ in range(num_samples)]
    schemas = env_cls._spec.schemas
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        for turn in range(limits.max_turns):
            running = [ep for ep in episodes if not ep.done]
            if not running:
                break
            texts = _render(tokenizer, running, schemas, max_new_tokens, _context(model))
            live = [ep for ep in running if not ep.done]
            outputs = _generate(
                model, tokenizer, [texts[id(ep)] for ep in live], temperature, max_new_tokens, batch_size
            )
            for ep, text in zip(live, outputs, strict=True):
                step(ep, text, last_turn=turn == limits.max_turns - 1)
            if on_batch:
                on_batch(sum(ep.done for ep in episodes) // num_samples)
    finally:
        torch.random.set_rng_state(state)
    for ep in episodes:
        ep.done = True
    return [episodes[i : i + num_samples] for i in range(0, len(episodes), num_samples)]


def _context(model) -> int | None:
    return getattr(model.config, "max_position_embeddings", None)


def _render(
    tokenizer, running: list[Episode], schemas: list[dict], max_new: int, context: int | None
) -> dict:
    """Each running episode's prompt text; one that would not fit the context ends (``ended: context``)."""
    texts = {}
    for ep in running:
        text = tokenizer.apply_chat_template(
            ep.messages, tools=schemas, add_generation_prompt=True, tokenize=False
        )
        if (
            context is not None
            and ep.turns
            and len(tokenizer(text, add_special_tokens=False)["input_ids"]) + max_new > context
        ):
            ep.done, ep.ended = True, "context"
            continue
        texts[id(ep)] = text
    return texts


def _generate(
    model, tokenizer, texts: list[str], temperature: float, max_new: int, batch_size: int
) -> list[str]:
    """One continuation per text, batched with left padding; each batch is a stop point for Ctrl-C."""
    import torch

    from ark_trainer.core.runtime.signals import check_stop

    tokenizer.padding_side = "left"
    kwargs: dict[str, Any] = {
        "max_new_tokens": max_new,
        "do_sample": temperature > 0,
        "pad_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }
    if temperature > 0:
        kwargs.update(temperature=temperature, top_p=1.0, top_k=0)
    else:
        kwargs.update(temperature=None, top_p=None, top_k=None)
    out: list[str] = []
    for start_at in range(0, len(texts), batch_size):
        check_stop()
        batch = tokenizer(
            texts[start_at : start_at + batch_size],
            return_tensors="pt",
            padding=True,
            add_special_tokens=False,
        ).to(model.device)
        with torch.no_grad():
            ids = model.generate(**batch, **kwargs)
        out += tokenizer.batch_decode(ids[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
    return out
