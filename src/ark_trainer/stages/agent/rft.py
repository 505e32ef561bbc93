"""RFT on whole episodes: sample N episodes per task with the tools executed, score, keep the best.

Each training task is played ``--rft_num_samples`` times (``--rft_temperature``, up to ``--max_turns``
turns, ``stages/agent/rollout.py``), and the candidate episodes its row carries (``candidates``: message lists, or
texts read as one assistant turn) are replayed in a fresh environment (``rollout.replay``); every episode
is scored by the run's composite reward (environment reward and episode graders, with the environments
passed as ``environments``); a task's best episode at or above ``--rft_min_reward`` becomes one training
example. ``--rft_num_samples 0`` samples nothing and loads no model: the data's candidates alone, as RFT
on single answers does, for a model too weak to find a solved episode itself. The example is tokenized here with the chat template,
tools included, and the mask of its assistant turns (``{% generation %}`` markers; TRL's training template
for known models without them), so TRL's SFTTrainer puts the loss on the assistant turns only, tool results
and prompts masked. (Tokenizing here, rather than handing TRL a ``messages`` column, keeps each call's
arguments as they were: a datasets table would merge every call's argument names into one struct.)

Writes ``OUT/data/rft_scored.jsonl`` (every episode: messages, tool calls, turns, rewards) and
``OUT/data/rft_selected.jsonl`` (the chosen episodes, reread on ``--resume``).
"""

from __future__ import annotations

import logging
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import read_jsonl, write_jsonl
from ark_trainer.core.auto_defaults import new_tokens
from ark_trainer.core.runfolder import RunFolder
from ark_trainer.rewards.composite import reward_columns
from ark_trainer.rewards.scoring import score_completions
from ark_trainer.stages.agent.rollout import CPU_EPISODE_BATCH, replay, run_episodes

log = logging.getLogger("ark_trainer")
SELECTED = "rft_selected.jsonl"


def sample_episodes(ctx, model_path: str, env: tuple) -> list[dict]:
    """Sample, score and select episodes; returns the selected ``{messages, tools}`` (also written)."""
    from ark_trainer.base.scale import generation_batch
    from ark_trainer.core.models.loading import load_policy

    run, opts, rows = ctx.run, ctx.options, ctx.train  # the shared flags and RFT's own options
    env_cls, limits = env
    with ctx.monitor.stage("rft_sampling", total=len(rows)):
        groups: list[list] = [[] for _ in rows]
        if opts.rft_num_samples:
            model, tok = load_policy(model_path, ctx.rt)
            groups = run_episodes(
                model,
                tok,
                env_cls,
                rows,
                limits,
                num_samples=opts.rft_num_samples,
                temperature=opts.rft_temperature,
                max_new_tokens=new_tokens(run.max_completion_length),
                batch_size=generation_batch(ctx.rt.device, CPU_EPISODE_BATCH),
                seed=run.seed,
                on_batch=ctx.monitor.progress,
            )
            del model
        replayed = [[replay(row, env_cls, c, limits) for c in candidate_episodes(row)] for row in rows]
        groups = [g + r for g, r in zip(groups, replayed, strict=True)]
        scores = score_completions(
            ctx.reward,
            rows,
            [[ep.completion for ep in g] for g in groups],
            [[ep.env for ep in g] for g in groups],
        )
    selected, scored, stats = select_episodes(
        rows, groups, scores, opts.rft_min_reward, env_cls._spec.schemas
    )
    stats["n_candidates"] = sum(map(len, replayed))  # of n_scored: the data's episodes, replayed
    data_dir = RunFolder(ctx.out).data_dir
    from ark_trainer.core.runtime.distributed import ranks

    if ranks().is_main:  # every process plays every task with the same seed (no sharding of episodes yet)
        write_jsonl(data_dir / "rft_scored.jsonl", scored)
        write_jsonl(data_dir / SELECTED, selected)
    ctx.monitor.event("rft_selection", **stats)
    log.info("RFT selection: %(n_selected)s of %(n_prompts)s tasks kept (episodes)", stats)
    return selected


def candidate_episodes(row: dict) -> list[list[dict]]:
    """The row's candidates as episodes: a message list as it is, a text as one assistant turn."""
    return [
        c if isinstance(c, list) else [{"role": "assistant", "content": c}] for c in row.get("candidates", [])
    ]


def check_episode_sources(
    env: str | dict | None, data_path: str, rft_num_samples: int, rows: list[dict]
) -> None:
    """Before anything is written: RFT over episodes (``--env``) needs samples (``rft_num_samples``) or
    candidates to choose from."""
    if env and rft_num_samples == 0 and not any(r.get("candidates") for r in rows):
        raise UserError(
            f"--rft_num_samples: 0 plays no episode, and no training row of --data_path {data_path} carries "
            "candidate episodes to replay; use 1 or more, or give the rows candidates"
        )


def select_episodes(
    rows: list[dict], groups: list, scores: list[list[dict]], threshold: float, schemas: list[dict]
) -> tuple[list[dict], list[dict], dict[str, Any]]:
    """Each task's best episode at or above ``threshold``; every episode's record; the selection's stats."""
    selected, scored, bests, alls = [], [], [], []
    for row, group, row_scores in zip(rows, groups, scores, strict=True):
        items = [
            {**ep.record(), "reward": s["total"], "scores": s["scores"]}
            for ep, s in zip(group, row_scores, strict=True)
        ]
        ranked = sorted(
            (i for i, it in enumerate(items) if it["reward"] is not None), key=lambda i: -items[i]["reward"]
        )
        scored.append({"prompt": row["prompt"], **reward_columns(row), "episodes": items})
        alls += [items[i]["reward"] for i in ranked]
        if not ranked:
            continue
        best = items[ranked[0]]
        bests.append(best["reward"])
        if best["reward"] >= threshold:
            selected.append({"messages": best["messages"], "tools": schemas, "reward": best["reward"]})
    stats = {
        "n_prompts": len(rows),
        "n_scored": len(alls),
        "n_selected": len(selected),
        "n_pairs": 0,
        "mean_best": round(sum(bests) / len(bests), 4) if bests else None,
        "mean_all": round(sum(alls) / len(alls), 4) if alls else None,
        "threshold": threshold,
    }
    return selected, scored, stats


def earlier_selection(done) -> list[dict] | None:
    """The episodes an earlier attempt selected (``rft_selection`` is logged after the file is written)."""
    path = RunFolder(done.out).data_dir / SELECTED
    return read_jsonl(path) if done.has("rft_selection") and path.is_file() else None


def tokenized_episodes(tokenizer, selected: list[dict]) -> list[dict]:
    """``input_ids`` and ``assistant_masks`` of each episode: loss on the assistant turns only."""
    from trl.chat_template_utils import get_training_chat_template, has_generation_markers

    template = tokenizer.chat_template
    if not has_generation_markers(template):
        try:
            template = get_training_chat_template(tokenizer)
        except Exception:  # noqa: BLE001 - TRL knows a few templates only
            raise UserError(
                "--env: the model's chat template has no {% generation %} markers, so RFT cannot put the loss on "
                "the assistant turns only; use a template with them (ark_trainer.stages.agent.toolcall.AGENT_CHAT_TEMPLATE)"
            ) from None
    out = []
    for item in selected:
        enc = tokenizer.apply_chat_template(
            item["messages"],
            tools=item["tools"],
            chat_template=template,
            tokenize=True,
            return_dict=True,
            return_assistant_tokens_mask=True,
        )
        if 1 in enc["assistant_masks"]:
            out.append({"input_ids": list(enc["input_ids"]), "assistant_masks": list(enc["assistant_masks"])})
    return out
