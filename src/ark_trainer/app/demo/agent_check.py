"""Measure the agent demo's base model: a minimal, batched episode loop over the demo environment.

This is a check of the demo's ingredients, not ark-trainer's episode runner: it renders each episode with the
model's chat template, generates one assistant turn for every open episode at once, parses the turn with
``agent.toolcall.parse_tool_calls``, runs the calls on the episode's environment and appends the results as
``tool`` messages, until the model answers without a call or ``max_turns`` turns have passed.

Run it (builds data and model in OUT_DIR, about two minutes on CPU, then prints the figures)::

    PYTHONPATH=src python -m ark_trainer.app.demo.agent_check OUT_DIR
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ark_trainer.app.demo.agent_data import env_tools
from ark_trainer.app.demo.agent_env import CustomerServiceEnv, make_env, tool_names
from ark_trainer.base.chat.toolcall import parse_tool_calls


@dataclass
class Episode:
    row: dict
    env: CustomerServiceEnv
    messages: list[dict]
    turns: int = 0
    calls: int = 0
    invalid: int = 0
    done: bool = False
    results: list[str] = field(default_factory=list)


def start(row: dict) -> Episode:
    env = make_env()
    env.reset(**row)  # the whole row, as TRL passes it
    return Episode(row, env, [dict(m) for m in row["prompt"]])


def execute(episode: Episode, text: str) -> None:
    """Append the assistant turn ``text`` and, for each call in it, the tool's result (an error as text)."""
    content, calls, invalid = parse_tool_calls(text)
    episode.turns += 1
    episode.invalid += invalid
    episode.messages.append(
        {"role": "assistant", "content": content, "tool_calls": calls}
        if calls
        else {"role": "assistant", "content": content}
    )
    names = set(tool_names(episode.env))
    for call in calls:
        fn = call["function"]
        episode.calls += 1
        try:
            if fn["name"] not in names:
                raise ValueError(f"no tool {fn['name']}")
            result = str(getattr(episode.env, fn["name"])(**fn["arguments"]))
        except Exception as exc:  # the model sees the error, as agents do
            episode.invalid += 1
            result = f"error: {exc}"
        episode.messages.append({"role": "tool", "name": fn["name"], "content": result})
    episode.done = not calls


def _generate(
    model: Any, tokenizer: Any, episodes: list[Episode], temperature: float, max_new: int
) -> list[str]:
    import torch

    tools = env_tools(episodes[0].env)
    texts = [
        tokenizer.apply_chat_template(e.messages, tools=tools, add_generation_prompt=True, tokenize=False)
        for e in episodes
    ]
    tokenizer.padding_side = "left"
    enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    sampling = (
        {"do_sample": True, "temperature": temperature, "top_k": 0}
        if temperature > 0
        else {"do_sample": False}
    )
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=max_new, pad_token_id=tokenizer.pad_token_id, **sampling)
    return tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)


def run_episodes(
    model: Any,
    tokenizer: Any,
    rows: list[dict],
    *,
    samples: int = 1,
    temperature: float = 0.0,
    max_turns: int = 4,
    max_new_tokens: int = 32,
    batch_size: int = 256,
    max_length: int = 512,
) -> list[Episode]:
    """Play ``samples`` episodes per row, every open episode one turn at a time, in batches."""
    episodes = [start(row) for row in rows for _ in range(samples)]
    for _turn in range(max_turns):
        open_ = [e for e in episodes if not e.done]
        for i in range(0, len(open_), batch_size):
            batch = open_[i : i + batch_size]
            for episode, text in zip(
                batch, _generate(model, tokenizer, batch, temperature, max_new_tokens), strict=True
            ):
                execute(episode, text)
        for e in open_:  # an episode whose next prompt would not fit the window ends here
            if (
                not e.done
                and len(tokenizer.apply_chat_template(e.messages, tools=env_tools(e.env)))
                > max_length - max_new_tokens
            ):
                e.done = True
    return episodes


def summary(episodes: list[Episode], samples: int = 1) -> dict[str, float]:
    """task_success (greedy: share solved; with samples: share of tasks with a solved sample) and the rest."""
    solved = [e.env.get_reward() >= 1.0 for e in episodes]
    per_task = [any(solved[i : i + samples]) for i in range(0, len(solved), samples)]
    calls = sum(e.calls for e in episodes)
    return {
        "n": len(per_task),
        "task_success": round(sum(per_task) / len(per_task), 4),
        "sample_success": round(sum(solved) / len(solved), 4),
        "mean_reward": round(sum(e.env.get_reward() for e in episodes) / len(episodes), 4),
        "tool_call_validity": round(
            1 - sum(e.invalid for e in episodes) / max(1, calls + sum(e.invalid for e in episodes)), 4
        ),
        "mean_turns": round(sum(e.turns for e in episodes) / len(episodes), 3),
        "mean_tool_calls": round(calls / len(episodes), 3),
    }


def check(
    out_dir: Path, seed: int = 0, n_eval: int = 240, samples: int = 8, **model_kwargs: Any
) -> dict[str, dict]:
    """Build the demo data and base model in ``out_dir`` (``model_kwargs`` go to ``build_agent_model``);
    measure greedy and best-of-``samples`` task success on the held-out tasks."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ark_trainer.app.demo.agent_data import write_agent_data
    from ark_trainer.app.demo.agent_model import build_agent_model
    from ark_trainer.base.fileio import read_jsonl

    train_path, eval_path = write_agent_data(out_dir / "data", n_eval=n_eval, seed=seed)
    build_agent_model(
        out_dir / "base_model",
        read_jsonl(train_path),
        seed=seed,
        held_out=read_jsonl(eval_path),
        **model_kwargs,
    )
    model = AutoModelForCausalLM.from_pretrained(out_dir / "base_model").eval()
    tokenizer = AutoTokenizer.from_pretrained(out_dir / "base_model")
    rows = read_jsonl(eval_path)
    torch.manual_seed(seed)
    greedy = summary(run_episodes(model, tokenizer, rows))
    sampled = summary(run_episodes(model, tokenizer, rows, samples=samples, temperature=1.0), samples)
    return {"greedy": greedy, f"best_of_{samples}": sampled}


if __name__ == "__main__":
    extra = {k: int(v) for k, v in (a.split("=") for a in sys.argv[2:])}  # e.g. warmup_steps=200
    print(json.dumps(check(Path(sys.argv[1] if len(sys.argv) > 1 else "agent_check"), **extra), indent=2))
