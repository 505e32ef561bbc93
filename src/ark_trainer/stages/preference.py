"""Preference data for the DPO and KTO stages: the data's own, or sampled and scored the RFT way.

- **DPO pairs**: rows that carry ``chosen`` and ``rejected`` are used as they are. Data without any pair
  gets pairs built like RFT's: ``--rft_num_samples`` answers sampled per prompt from the stage's starting
  model (plus the row's own candidates), scored with the run's composite reward, best versus worst. A prompt
  whose best and worst score the same (a tie) or differ by less than ``--dpo_min_margin`` gives no pair;
  both are counted, with the other numbers, in ``OUT/data/dpo_pairs.jsonl``'s ``dpo_pairs`` event.
- **KTO examples**: rows whose ``label`` is ``true`` or ``false`` (thumbs up/down; a text ``label`` keeps
  its QC meaning, a violation type) mark each of the row's answers desirable or not, and a row's
  ``chosen``/``rejected`` count as one desirable and one undesirable answer. Data with none of these gets
  sampled answers split by reward: desirable at or above ``--kto_threshold`` (default ``--pass_threshold``).

Both are written to ``OUT/data/`` and read back by ``--resume`` (the same data, not a new sample).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ark_trainer.base.fileio import read_jsonl, write_jsonl
from ark_trainer.core.generation import SamplingSettings
from ark_trainer.core.models.loading import load_tokenizer
from ark_trainer.core.models.prompts import is_conversational, model_prompt
from ark_trainer.core.runfolder import RunFolder
from ark_trainer.core.runtime.distributed import ranks
from ark_trainer.rewards.scoring import ANSWER_COLUMNS, sample_and_score
from ark_trainer.stages.common import rft_sampling
from ark_trainer.stages.registry import StageContext

log = logging.getLogger("ark_trainer")
TIE = 1e-9  # rewards closer than this are equal


@dataclass
class PreferenceData:
    """The rows a TRL preference trainer reads, and what building them kept and dropped."""

    rows: list[dict]
    stats: dict[str, Any]


def answer(text: str, conversational: bool) -> Any:
    """One answer as TRL's preference datasets hold it: an assistant turn, or plain text."""
    return [{"role": "assistant", "content": text}] if conversational else text


def has_pair(row: dict) -> bool:
    return bool(row.get("chosen")) and bool(row.get("rejected"))


def thumbs(row: dict) -> bool | None:
    """A row's thumbs-up/down: ``label`` ``true``/``false`` (any other label is not a thumbs label)."""
    label = row.get("label")
    return label if isinstance(label, bool) else None


def labelled_answers(row: dict) -> list[tuple[str, bool]]:
    """A row's own answers with their thumbs label; ``chosen``/``rejected`` are good/bad answers too."""
    out: list[tuple[str, bool]] = []
    if (up := thumbs(row)) is not None:
        texts = list(row.get("candidates", []))
        texts += [row[k] for k in ANSWER_COLUMNS if isinstance(row.get(k), str) and row[k].strip()]
        out += [(t, up) for t in texts]
    return out + [(row[k], k == "chosen") for k in ("chosen", "rejected") if row.get(k)]


def pairs_from_scores(
    rows: list[dict], answers: list[list[tuple[str, str]]], scores: list[list[dict]], min_margin: float
) -> tuple[list[dict], dict[str, Any]]:
    """Best vs worst answer of each prompt; ties and pairs below ``min_margin`` dropped and counted."""
    pairs, margins = [], []
    ties = below = unscored = 0
    for row, row_answers, row_scores in zip(rows, answers, scores, strict=True):
        items = [
            (s["total"], t)
            for (t, _), s in zip(row_answers, row_scores, strict=True)
            if s["total"] is not None
        ]
        if not items:
            unscored += 1
            continue
        best, worst = max(items, key=lambda x: x[0]), min(items, key=lambda x: x[0])
        margin = best[0] - worst[0]
        if margin <= TIE:
            ties += 1
        elif margin < min_margin - TIE:
            below += 1
        else:
            pairs.append({"prompt": row["prompt"], "chosen": best[1], "rejected": worst[1]})
            margins.append(margin)
    stats = {
        "source": "sampled",
        "n_prompts": len(rows),
        "n_pairs": len(pairs),
        "n_ties": ties,
        "n_below_margin": below,
        "n_unscored": unscored,
        "min_margin": min_margin,
        "mean_margin": round(sum(margins) / len(margins), 4) if margins else None,
    }
    return pairs, stats


def examples_from_scores(
    rows: list[dict], answers: list[list[tuple[str, str]]], scores: list[list[dict]], threshold: float
) -> tuple[list[dict], dict[str, Any]]:
    """Every scored answer, desirable when its reward reaches ``threshold``; unscored ones dropped."""
    examples, unscored = [], 0
    for row, row_answers, row_scores in zip(rows, answers, scores, strict=True):
        for (text, _), s in zip(row_answers, row_scores, strict=True):
            if s["total"] is None:
                unscored += 1
            else:
                examples.append(
                    {"prompt": row["prompt"], "completion": text, "label": s["total"] >= threshold - TIE}
                )
    stats = {"source": "sampled", "n_prompts": len(rows), "threshold": threshold, "n_unscored": unscored}
    return examples, stats


def dpo_pairs(ctx: StageContext, model_in: str) -> PreferenceData:
    """The DPO pairs of this run (the data's own, or sampled from ``model_in``)."""
    given = [r for r in ctx.train if has_pair(r)]
    if given:
        pairs = [{k: r[k] for k in ("prompt", "chosen", "rejected")} for r in given]
        stats = {"source": "data", "n_prompts": len(ctx.train), "n_pairs": len(pairs)}
        stats["n_without_pair"] = len(ctx.train) - len(given)
    else:
        answers, scores, _ = sample_and_score(
            _sampling(ctx), ctx.rt, ctx.monitor, model_in, ctx.train, ctx.reward, "dpo_sampling"
        )
        pairs, stats = pairs_from_scores(ctx.train, answers, scores, ctx.options.dpo_min_margin)
    conv = _conversational(ctx, model_in)
    rows = [
        {"prompt": model_prompt(p["prompt"], conv), **{k: answer(p[k], conv) for k in ("chosen", "rejected")}}
        for p in pairs
    ]
    return _record(ctx, "dpo_pairs", rows, stats)


def kto_examples(ctx: StageContext, model_in: str) -> PreferenceData:
    """The KTO examples of this run (the data's thumbs labels and pairs, or sampled and split by reward)."""
    given = [(r, t, up) for r in ctx.train for t, up in labelled_answers(r)]
    if given:
        examples = [{"prompt": r["prompt"], "completion": t, "label": up} for r, t, up in given]
        stats = {"source": "data", "n_prompts": len(ctx.train)}
    else:
        own = ctx.options.kto_threshold
        threshold = ctx.run.pass_threshold if own is None else own
        answers, scores, _ = sample_and_score(
            _sampling(ctx), ctx.rt, ctx.monitor, model_in, ctx.train, ctx.reward, "kto_sampling"
        )
        examples, stats = examples_from_scores(ctx.train, answers, scores, threshold)
    good = sum(bool(e["label"]) for e in examples)
    stats.update(n_desirable=good, n_undesirable=len(examples) - good)
    conv = _conversational(ctx, model_in)
    rows = [
        {
            "prompt": model_prompt(e["prompt"], conv),
            "completion": answer(e["completion"], conv),
            "label": e["label"],
        }
        for e in examples
    ]
    return _record(ctx, "kto_examples", rows, stats)


def earlier(ctx: StageContext, event: str) -> PreferenceData | None:
    """What an earlier attempt of this run built (``--resume``): its rows and the stats it logged."""
    path = RunFolder(ctx.out).data_dir / f"{event}.jsonl"
    if not ctx.done or not ctx.done.has(event) or not path.is_file():
        return None
    stats = next(e for e in reversed(ctx.done.events) if e.get("event") == event)
    log.info("resume: %s already built (%s)", event, path)
    return PreferenceData(
        read_jsonl(path), {k: v for k, v in stats.items() if k not in ("event", "time", "ts")}
    )


def _sampling(ctx: StageContext) -> SamplingSettings:
    """How the stage samples answers without pairs or labels of its own: as RFT does, by its options'
    ``--rft_num_samples`` and ``--rft_temperature``."""
    return rft_sampling(ctx.run, ctx.options.rft_num_samples, ctx.options.rft_temperature)


def _conversational(ctx: StageContext, model_in: str) -> bool:
    return is_conversational(load_tokenizer(model_in, ctx.rt.trust_remote_code))


def _record(ctx: StageContext, event: str, rows: list[dict], stats: dict[str, Any]) -> PreferenceData:
    """Write the rows to ``OUT/data/<event>.jsonl`` (main process), then log ``event`` with the numbers."""
    if ranks().is_main:
        write_jsonl(RunFolder(ctx.out).data_dir / f"{event}.jsonl", rows)
    ctx.monitor.event(event, **stats)
    log.info("%s: %s", event, ", ".join(f"{k} {v}" for k, v in stats.items()))
    return PreferenceData(rows, stats)


def stats_blocks(run, event: str, title: str) -> list:
    """A stage's report section from its last ``event`` (nothing when the stage did not run)."""
    from ark_trainer.stages.report import short
    from ark_trainer.stages.report.render import Heading, Table

    events = run.of(event)
    if not events:
        return []
    e = {k: v for k, v in events[-1].items() if k not in ("event", "time", "ts")}
    return [Heading(title), Table(["field", "value"], [[k, short(v)] for k, v in e.items()])]


def given_answers(rows: list[dict]) -> bool:
    """Whether the data carries the answers DPO and KTO would otherwise sample (pairs or labelled answers):
    the stages' ``given_answers`` hook, for the estimate (``stages/estimate.py``)."""
    return any(has_pair(r) or labelled_answers(r) for r in rows)


def estimate_parts(name: str, run: Any, options: Any, steps: int, t: Any, size: Any) -> list:
    """What ``steps`` steps of DPO or KTO (``name``) cost: the answers sampled for every training prompt
    unless the data carries them, then its steps (``core/runtime/estimate.py``)."""
    from ark_trainer.core.auto_defaults import new_tokens
    from ark_trainer.core.runtime.estimate import preference_parts

    sampled = 0 if size.given_preferences else size.train
    tokens = new_tokens(run.max_completion_length)
    return preference_parts(
        t, name, steps, run.gradient_accumulation_steps, sampled, options.rft_num_samples, tokens
    )
