"""RFT (reward fine-tuning): sample → score → select → supervised fine-tune on the best.

For every training prompt the candidates it came with (``candidates``/``answers``/``chosen``/``rejected``)
and ``--rft_num_samples`` fresh samples from the model are scored by the composite reward, with no human
label needed. The best completion at or above ``--rft_min_reward`` becomes an SFT target; the best and
worst form a preference pair. Writes ``OUT/data/rft_scored.jsonl`` and ``OUT/data/rft_pairs.jsonl``, then
fine-tunes for ``--rft_steps`` with TRL's SFTTrainer into ``OUT/rft/``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ark_trainer.config import TrainConfig
from ark_trainer.distributed import check_replicas, ranks
from ark_trainer.fileio import write_jsonl
from ark_trainer.generation import sample_prompts
from ark_trainer.monitor import Monitor
from ark_trainer.resume import run_trainer
from ark_trainer.rewards.composite import TOTAL, CompositeReward
from ark_trainer.scale import peft_config
from ark_trainer.stages.common import (
    Runtime,
    is_conversational,
    load_tokenizer,
    model_prompt,
    save_final,
    stage_callbacks,
    trainer_kwargs,
)
from ark_trainer.stages.registry import Plot, StageContext, register_stage

if TYPE_CHECKING:
    from ark_trainer.plan import PlanStage

log = logging.getLogger("ark_trainer")

NON_COLUMNS = ("prompt", "candidates", "chosen", "rejected", "_line")
SCORE_CHUNK = 64  # prompts scored per reward call
GEN_SEQUENCES = 128  # sequences per generate call while sampling (prompts × samples)


def reward_columns(row: dict[str, Any]) -> dict[str, Any]:
    """The row's extra columns, as the reward functions receive them."""
    return {k: v for k, v in row.items() if k not in NON_COLUMNS}


def _given_answers(row: dict[str, Any]) -> list[tuple[str, str]]:
    given = [(c, "candidate") for c in row.get("candidates", [])]
    given += [(row[k], k) for k in ("chosen", "rejected") if row.get(k)]
    return given


def score_completions(
    reward: CompositeReward, rows: list[dict], answers: list[list[str]]
) -> list[list[dict]]:
    """Score each row's answers in chunks; returns, per row, ``{total, scores}`` per answer."""
    out: list[list[dict]] = []
    for start in range(0, len(rows), SCORE_CHUNK):
        chunk_rows, chunk_answers = rows[start : start + SCORE_CHUNK], answers[start : start + SCORE_CHUNK]
        prompts, completions, columns = [], [], {}
        names = sorted({k for r in chunk_rows for k in reward_columns(r)})
        for row, texts in zip(chunk_rows, chunk_answers, strict=True):
            for text in texts:
                prompts.append(row["prompt"])
                completions.append(text)
                for name in names:
                    columns.setdefault(name, []).append(row.get(name))
        table = reward.score(prompts, completions, **columns)
        i = 0
        for texts in chunk_answers:
            per_row = []
            for _ in texts:
                per_row.append({"total": table[TOTAL][i], "scores": {n: table[n][i] for n in reward.names}})
                i += 1
            out.append(per_row)
    return out


@dataclass
class Selection:
    scored: list[dict]
    sft_rows: list[dict]
    pairs: list[dict]
    stats: dict[str, Any]


def select(
    rows: list[dict],
    answers: list[list[tuple[str, str]]],
    scores: list[list[dict]],
    threshold: float,
    conversational: bool,
) -> Selection:
    """Keep each prompt's best answer at or above ``threshold``; pair best with worst when they differ."""
    scored, sft_rows, pairs, bests, alls = [], [], [], [], []
    for row, row_answers, row_scores in zip(rows, answers, scores, strict=True):
        items = [
            {"text": text, "source": source, "reward": s["total"], "scores": s["scores"]}
            for (text, source), s in zip(row_answers, row_scores, strict=True)
        ]
        ranked = [i for i in range(len(items)) if items[i]["reward"] is not None]
        ranked.sort(key=lambda i: items[i]["reward"], reverse=True)
        cols = reward_columns(row)
        record = {"prompt": row["prompt"], **cols, "answers": items}
        if ranked:
            best, worst = items[ranked[0]], items[ranked[-1]]
            record.update(best=ranked[0], worst=ranked[-1])
            bests.append(best["reward"])
            alls += [items[i]["reward"] for i in ranked]
            if best["reward"] >= threshold:
                sft_rows.append(
                    {
                        "prompt": model_prompt(row["prompt"], conversational),
                        "completion": [{"role": "assistant", "content": best["text"]}]
                        if conversational
                        else best["text"],
                    }
                )
            if best["reward"] > worst["reward"]:
                pairs.append(
                    {
                        "prompt": row["prompt"],
                        "chosen": best["text"],
                        "rejected": worst["text"],
                        "chosen_reward": best["reward"],
                        "rejected_reward": worst["reward"],
                        **cols,
                    }
                )
        scored.append(record)
    stats = {
        "n_prompts": len(rows),
        "n_scored": len(alls),
        "n_selected": len(sft_rows),
        "n_pairs": len(pairs),
        "mean_best": round(sum(bests) / len(bests), 4) if bests else None,
        "mean_all": round(sum(alls) / len(alls), 4) if alls else None,
        "threshold": threshold,
    }
    return Selection(scored, sft_rows, pairs, stats)


def sample_and_select(
    cfg: TrainConfig,
    rt: Runtime,
    monitor: Monitor,
    model_path: str,
    rows: list[dict],
    reward: CompositeReward,
    data_dir: Path,
) -> Selection:
    """Sample from the model, score everything, select; writes rft_scored.jsonl and rft_pairs.jsonl.

    Under several processes each samples and scores its own slice of the prompts; the slices are gathered
    and every process selects from the same full list (``ark_trainer.distributed``).
    """
    dist = ranks()
    mine = dist.shard(rows)
    with monitor.stage("rft_sampling", total=len(mine)):
        samples, tok = sample_prompts(
            cfg,
            rt,
            model_path,
            [r["prompt"] for r in mine],
            seed=cfg.seed + dist.index,
            on_batch=monitor.progress,
        )
        answers = [
            _given_answers(r) + [(s, "sample") for s in row_samples]
            for r, row_samples in zip(mine, samples, strict=True)
        ]
        scores = score_completions(reward, mine, [[t for t, _ in a] for a in answers])
        answers, scores = dist.gather(answers), dist.gather(scores)
        sel = select(rows, answers, scores, cfg.rft_min_reward, is_conversational(tok))
    if dist.is_main:
        write_jsonl(data_dir / "rft_scored.jsonl", sel.scored)
        write_jsonl(data_dir / "rft_pairs.jsonl", sel.pairs)
    monitor.event("rft_selection", **sel.stats)
    log.info("RFT selection: %(n_selected)s of %(n_prompts)s prompts kept, %(n_pairs)s pairs", sel.stats)
    return sel


def train_rft(
    cfg: TrainConfig,
    rt: Runtime,
    monitor: Monitor,
    model_path: str,
    sft_rows: list[dict],
    out_dir: Path,
    log_dir: Path,
    final_dir: Path,
    plan: PlanStage,
) -> Path:
    """Fine-tune on the selected completions with TRL's SFTTrainer; returns the saved model folder."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    tok = load_tokenizer(model_path, rt.trust_remote_code)
    args = SFTConfig(
        **trainer_kwargs(cfg, rt, out_dir, plan.steps, plan.learning_rate),
        completion_only_loss=True,
        max_length=None,
    )
    with monitor.stage("rft", total=plan.steps):
        trainer = run_trainer(  # resume, crash-safe saves, guards, rollbacks (a fresh trainer each)
            lambda: SFTTrainer(
                model=model_path,
                args=args,
                train_dataset=Dataset.from_list(sft_rows),
                processing_class=tok,
                callbacks=stage_callbacks(monitor, log_dir, "rft", cfg.report_to),
                peft_config=peft_config(cfg),
            ),
            cfg,
            monitor,
            "rft",
            out_dir,
        )
        check_replicas(trainer, "rft")
        save_final(trainer, tok, final_dir, adapter_only=cfg.save_adapter_only and plan.last)
    return final_dir


@register_stage
class RFTStage:
    """Sample → score → select → SFT on the best (resume reuses an earlier attempt's scored samples)."""

    name, label = "rft", "RFT"
    steps_flag, lr_flag = "rft_steps", "rft_learning_rate"
    plots = (Plot("rft_loss.png", "loss", "RFT loss"),)
    headline_metric = "preference_alignment"  # the report's headline compares it with the base model

    def run(self, ctx: StageContext, plan: PlanStage, model_in: str, final_dir: Path) -> str:
        import gc

        if ctx.done and (scored := _earlier_selection(ctx.done)) is not None:
            conversational = is_conversational(load_tokenizer(model_in, ctx.rt.trust_remote_code))
            sel = reselect(scored, ctx.cfg.rft_min_reward, conversational)
            log.info("resume: RFT sampling already done (%d prompts kept)", len(sel.sft_rows))
        else:
            sel = sample_and_select(
                ctx.cfg, ctx.rt, ctx.monitor, model_in, ctx.train, ctx.reward, ctx.out / "data"
            )
        gc.collect()
        if not sel.sft_rows:
            ctx.monitor.warn(
                f"RFT kept no answer at or above --rft_min_reward {ctx.cfg.rft_min_reward}; RFT training "
                "skipped, GRPO starts from the base model (lower the threshold or raise --rft_num_samples)"
            )
            return model_in
        args = (ctx.cfg, ctx.rt, ctx.monitor, model_in, sel.sft_rows, ctx.out / self.name, ctx.log_dir)
        return str(train_rft(*args, final_dir, plan))

    def report_blocks(self, run) -> list:
        """The report's "RFT data selection" section: what sampling and selection kept."""
        from ark_trainer.render import Heading, Para, Table
        from ark_trainer.report import short

        events = run.of("rft_selection")
        if not events:
            return [Heading("RFT data selection"), Para("Not run.")]
        e = events[-1]
        keys = ("n_prompts", "n_scored", "n_selected", "n_pairs", "mean_best", "mean_all", "threshold")
        return [
            Heading("RFT data selection"),
            Table(["field", "value"], [[k, short(e.get(k, "—"))] for k in keys]),
        ]


def _earlier_selection(done) -> list[dict] | None:
    """The scored RFT candidates of an earlier attempt (``rft_selection`` is logged after both files)."""
    from ark_trainer.fileio import read_jsonl

    path = done.out / "data" / "rft_scored.jsonl"
    return read_jsonl(path) if done.has("rft_selection") and path.is_file() else None


def reselect(scored: list[dict], threshold: float, conversational: bool) -> Selection:
    """Rebuild the RFT selection from ``rft_scored.jsonl`` exactly as :func:`select` made it."""
    extra = ("answers", "best", "worst")
    rows = [{k: v for k, v in r.items() if k not in extra} for r in scored]
    answers = [[(a["text"], a["source"]) for a in r["answers"]] for r in scored]
    scores = [[{"total": a["reward"], "scores": a["scores"]} for a in r["answers"]] for r in scored]
    return select(rows, answers, scores, threshold, conversational)
