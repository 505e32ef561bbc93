"""Scoring answers with the composite reward, in one place for every caller.

- **sample N, score, select** (RFT): :func:`sample_and_select` samples ``--rft_num_samples`` answers per
  prompt, adds the ones the row came with (``candidates``/``chosen``/``rejected``), scores them all with
  :func:`score_completions` and keeps, by :func:`select`, each prompt's best answer at or above
  ``--rft_min_reward`` (an SFT target) and its best/worst pair. It samples only the prompts RFT's steps
  will train on (:func:`rft_budget`: steps × batch × gradient accumulation × processes), in rounds
  (:func:`next_round`): the first samples twice that many (``KEEP_RATE_GUESS``: half of them are expected to
  reach the threshold), each later one the rows still missing ÷ the keep rate measured so far, plus
  ``ROUND_MARGIN``; it stops once enough are kept, the file is used up, or after ``MAX_ROUNDS``. The probe (``stages/probe.py``), the
  evaluation (``stages/evaluate.py``) and ``resume.reselect`` use the same functions, so no one imports a stage
  to score.
- **``ark-trainer score``**: a dry run of a grader spec on a data file, before hours of training depend on
  it. Scores the answers a data file already holds, or answers a model generates for its prompts, and
  summarises each grader: how often it applies, mean/std/min/max, a 10-bin histogram, and — what GRPO
  cares about — the share of prompts whose answers all get the same score (a group with zero variance
  gives GRPO no gradient). A grader that gives every answer the same score is flagged.

Answers ``score`` takes from a row (all of them, in this order): a trailing assistant turn of
``messages``, ``completion``, ``candidates``/``answers``, ``response``/``output``, ``chosen``, ``rejected``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import write_jsonl
from ark_trainer.core.generation import Sampler, SamplingSettings
from ark_trainer.core.metrics import COMPLIANCE_GRADER, VERIFIERS, reference_task
from ark_trainer.core.models.device import Runtime
from ark_trainer.core.models.prompts import is_conversational, model_prompt
from ark_trainer.core.runtime.distributed import ranks
from ark_trainer.core.runtime.monitor import Monitor
from ark_trainer.rewards.composite import TOTAL, Component, CompositeReward, reward_columns
from ark_trainer.rewards.contract import SCORE_LIMIT
from ark_trainer.rewards.graders import failures
from ark_trainer.rewards.guards import Skips, unguarded
from ark_trainer.rewards.registry import get_reward

log = logging.getLogger("ark_trainer")

SCORE_CHUNK = 64  # prompts scored per reward call
KEEP_RATE_GUESS = 0.5  # RFT's first round: share of sampled prompts expected to reach --rft_min_reward
ROUND_MARGIN = 1.25  # later rounds sample 25% more than the keep rate measured so far says is missing
MIN_KEEP_RATE = 0.1  # a keep rate measured below this is taken as this (a round is at most 10× the gap)
MAX_ROUNDS = 3  # sampling rounds before RFT trains on what it has (repeating answers)


def _given_answers(row: dict[str, Any]) -> list[tuple[str, str]]:
    given = [(c, "candidate") for c in row.get("candidates", [])]
    given += [(row[k], k) for k in ("chosen", "rejected") if row.get(k)]
    return given


def score_completions(
    reward: CompositeReward, rows: list[dict], answers: list[list[Any]], envs: list[list[Any]] | None = None
) -> list[list[dict]]:
    """Score each row's answers in chunks; returns, per row, ``{total, scores}`` per answer.

    An agent run's answers are episodes (message lists) and ``envs`` their environments, which the
    graders receive as ``environments`` (as TRL passes them in GRPO).
    """
    out: list[list[dict]] = []
    for start in range(0, len(rows), SCORE_CHUNK):
        chunk_rows, chunk_answers = rows[start : start + SCORE_CHUNK], answers[start : start + SCORE_CHUNK]
        if envs is not None:
            columns_envs = [e for row_envs in envs[start : start + SCORE_CHUNK] for e in row_envs]
        prompts: list[Any] = []
        completions: list[Any] = []
        columns: dict[str, list[Any]] = {}
        names = sorted({k for r in chunk_rows for k in reward_columns(r)})
        for row, texts in zip(chunk_rows, chunk_answers, strict=True):
            for text in texts:
                prompts.append(row["prompt"])
                completions.append(text)
                for name in names:
                    columns.setdefault(name, []).append(row.get(name))
        if envs is not None:
            columns["environments"] = columns_envs
        table = reward.score(prompts, completions, **columns)
        i = 0
        for texts in chunk_answers:
            per_row = []
            for _ in texts:
                per_row.append({"total": table[TOTAL][i], "scores": {n: table[n][i] for n in reward.names}})
                i += 1
            out.append(per_row)
    return out


def metric_scores(
    reward: CompositeReward,
    rows: list[dict],
    answers: list,
    envs: list | None = None,
    verifiers: bool = True,
) -> dict[str, list]:
    """Per-answer scores of the composite plus the accuracy and compliance verifiers (for the metrics); the
    compliance verifier only on QC data (``metrics.reference_task``), unless the run's reward grades it.

    ``verifiers=False`` (agent episodes): only the run's own graders; the QC verifiers would grade an
    agent's sign-off as if it were a QC verdict.
    """
    scored = score_completions(reward, rows, [[a] for a in answers], [[e] for e in envs] if envs else None)
    table: dict[str, list] = {TOTAL: [s[0]["total"] for s in scored]}
    for name in reward.names:
        table[name] = [s[0]["scores"][name] for s in scored]
    extra = [n for n in VERIFIERS if n not in table] if verifiers else []
    if extra:
        checks = CompositeReward([Component(n, get_reward(n), 1.0) for n in extra])
        more = score_completions(checks, rows, [[a] for a in answers])
        for name in extra:
            table[name] = [s[0]["scores"][name] for s in more]
        if reference_task(table) and COMPLIANCE_GRADER in extra:  # QC reply rules on a reference task
            del table[COMPLIANCE_GRADER]
    return table


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


def rft_budget(steps: int, batch_size: int, gradient_accumulation_steps: int, num_processes: int) -> int:
    """Answers RFT's ``steps`` train on: one per example of every optimizer step, over all processes."""
    return steps * batch_size * gradient_accumulation_steps * num_processes


def next_round(needed: int, kept: int, sampled: int, available: int, rounds: int) -> int:
    """Prompts the next sampling round takes (0: stop): see the module's docstring."""
    if kept >= needed or sampled >= available or rounds >= MAX_ROUNDS:
        return 0
    rate = KEEP_RATE_GUESS if sampled == 0 else max(kept / sampled, MIN_KEEP_RATE)
    margin = 1.0 if sampled == 0 else ROUND_MARGIN
    return min(math.ceil((needed - kept) / rate * margin), available - sampled)


def sample_and_score(
    sampling: SamplingSettings,
    rt: Runtime,
    monitor: Monitor,
    model_path: str,
    rows: list[dict],
    reward: CompositeReward,
    stage: str = "rft_sampling",
) -> tuple[list[list[tuple[str, str]]], list[list[dict]], Any]:
    """Sample ``--rft_num_samples`` answers per prompt, add the row's own, score them all.

    Returns, per row, its ``(text, source)`` answers and their scores (gathered from every process: each
    samples and scores its own slice of the prompts, ``ark_trainer.core.runtime.distributed``), and the tokenizer.
    RFT selects from them (:func:`sample_and_select`); DPO and KTO pair or label them (``stages/preference.py``).
    """
    sampler = Sampler(sampling, rt, model_path)
    try:
        with monitor.stage(stage, total=len(ranks().shard(rows))):
            answers, scores = _sample_round(sampling.seed, monitor, sampler, rows, reward, stage, 0, 0)
    finally:
        sampler.close()
    return answers, scores, sampler.tok


def _sample_round(
    seed: int,
    monitor: Monitor,
    sampler: Sampler,
    rows: list[dict],
    reward: CompositeReward,
    stage: str,
    round_index: int,
    done: int,
) -> tuple[list[list[tuple[str, str]]], list[list[dict]]]:
    """One round: this process's slice of ``rows`` sampled and scored, gathered from every process."""
    dist = ranks()
    mine = dist.shard(rows)
    samples = sampler(
        [r["prompt"] for r in mine],
        seed=seed + dist.index + 1000 * round_index,  # round 0: the seed of a run that samples all
        on_batch=lambda n: monitor.progress(done + n),
        desc=stage.replace("_", " "),
        on_tick=monitor.tick,
    )
    answers = [
        _given_answers(r) + [(s, "sample") for s in row_samples]
        for r, row_samples in zip(mine, samples, strict=True)
    ]
    scores = score_completions(reward, mine, [[t for t, _ in a] for a in answers])
    return dist.gather(answers), dist.gather(scores)


def budget_order(rows: list[dict], needed: int | None, seed: int) -> list[dict]:
    """The rows in the order RFT samples them: the file's order when it samples them all, else shuffled
    with ``seed`` (a file sorted by type must not give the first rounds one type only)."""
    if needed is None or needed >= len(rows):
        return rows
    import random

    order = list(rows)
    random.Random(seed).shuffle(order)
    return order


def sample_and_select(
    sampling: SamplingSettings,
    rt: Runtime,
    monitor: Monitor,
    model_path: str,
    rows: list[dict],
    reward: CompositeReward,
    data_dir: Path,
    needed: int | None = None,
    *,
    min_reward: float,
) -> Selection:
    """Sample from the model, score everything, select at ``min_reward`` (``--rft_min_reward``); writes
    rft_scored.jsonl and rft_pairs.jsonl.

    ``needed`` (:func:`rft_budget`) bounds the sampling: only as many prompts as it takes to keep that
    many answers, in rounds (:func:`next_round`); ``None`` samples every row. Every process selects from the
    same full, gathered list.
    """
    dist = ranks()
    order = budget_order(rows, needed, sampling.seed)
    want = len(order) if needed is None else needed
    sampled: list[dict] = []
    answers: list[list[tuple[str, str]]] = []
    scores: list[list[dict]] = []
    sampler = Sampler(sampling, rt, model_path)
    conversational = is_conversational(sampler.tok)
    kept, rounds, done = 0, 0, 0  # done: prompts this process sampled in earlier rounds
    first = next_round(want, 0, 0, len(order), 0) if needed is not None else len(order)
    try:
        with monitor.stage("rft_sampling", total=len(dist.shard(order[:first]))):
            size = first
            while size:
                chunk = order[len(sampled) : len(sampled) + size]
                monitor.progress(done, done + len(dist.shard(chunk)))
                more_answers, more_scores = _sample_round(
                    sampling.seed, monitor, sampler, chunk, reward, "rft_sampling", rounds, done
                )
                sampled += chunk
                done += len(dist.shard(chunk))
                answers += more_answers
                scores += more_scores
                rounds += 1
                kept = len(select(sampled, answers, scores, min_reward, conversational).sft_rows)
                size = next_round(want, kept, len(sampled), len(order), rounds) if needed is not None else 0
                if size:
                    log.info(
                        "RFT sampling: %d of %d prompts kept, %d needed; sampling %d more",
                        kept, len(sampled), want, size,
                    )  # fmt: skip
    finally:
        sampler.close()
    sel = select(sampled, answers, scores, min_reward, conversational)
    sel.stats.update(n_rows=len(rows), n_needed=needed, rounds=rounds)
    if needed is not None and 0 < kept < needed:
        monitor.warn(
            f"RFT kept {kept} answers for the {needed} its steps train on (steps × batch × gradient "
            f"accumulation), after sampling {len(sampled)} of {len(rows)} prompts; it repeats them"
        )
    if dist.is_main:
        write_jsonl(data_dir / "rft_scored.jsonl", sel.scored)
        write_jsonl(data_dir / "rft_pairs.jsonl", sel.pairs)
    monitor.event("rft_selection", **sel.stats)
    log.info("RFT selection: %(n_selected)s of %(n_prompts)s prompts kept, %(n_pairs)s pairs", sel.stats)
    return sel


# --- ark-trainer score: per-grader summaries ---

ANSWER_COLUMNS = ("response", "output")
BARS = " ▁▂▃▄▅▆▇█"
N_BINS = 10


def given_answers(row: dict[str, Any]) -> list[str]:
    answers = list(row.get("candidates", []))
    answers += [row[k] for k in ANSWER_COLUMNS if isinstance(row.get(k), str) and row[k].strip()]
    answers += [row[k] for k in ("chosen", "rejected") if row.get(k)]
    return answers


def collect_answers(rows: list[dict], path: str) -> tuple[list[dict], list[list[str]], list[int]]:
    """The rows that hold answers, their answers, and the lines of rows without any (skipped).

    No answer in the whole file is an error: there is nothing to score (pass --model_path to generate)."""
    kept, answers, skipped = [], [], []
    for row in rows:
        got = given_answers(row)
        if got:
            kept.append(row)
            answers.append(got)
        else:
            skipped.append(row["_line"])
    if not kept:
        raise UserError(
            f"{path}:{skipped[0]}: completion: no row holds an answer to score; give completion, candidates, "
            "response, chosen or rejected, or pass --model_path to generate answers"
        )
    return kept, answers, skipped


@dataclass
class GraderSummary:
    name: str
    weight: float | None
    n: int
    applicable: int
    mean: float | None = None
    std: float | None = None
    min: float | None = None
    max: float | None = None
    distinct: int = 0
    histogram: list[int] = field(default_factory=list)
    hist_range: tuple[float, float] = (0.0, 1.0)
    groups: int = 0
    zero_variance_groups: int = 0
    warnings: list[str] = field(default_factory=list)


def summarise(name: str, weight: float | None, per_row: list[list[float | None]]) -> GraderSummary:
    values = [v for row in per_row for v in row if v is not None]
    s = GraderSummary(name, weight, n=sum(len(r) for r in per_row), applicable=len(values))
    if not values:
        s.warnings.append(
            f"grader {name!r} applies to no answer (None everywhere); check its columns/templates"
        )
        return s
    mean = sum(values) / len(values)
    s.mean, s.min, s.max = mean, min(values), max(values)
    s.std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    s.distinct = len({round(v, 9) for v in values})
    lo, hi = (0.0, 1.0) if s.min >= 0 and s.max <= 1 else (s.min, s.max)
    s.hist_range, s.histogram = (lo, hi), [0] * N_BINS
    for v in values:
        s.histogram[min(int((v - lo) / (hi - lo) * N_BINS), N_BINS - 1) if hi > lo else 0] += 1
    for row in per_row:
        got = [v for v in row if v is not None]
        if len(got) >= 2:
            s.groups += 1
            s.zero_variance_groups += max(got) - min(got) < 1e-9
    if len(values) >= 2 and s.max - s.min < 1e-9:
        s.warnings.append(
            f"grader {name!r} gives every answer the same score {s.min:g}: it is constant, so it adds no "
            "signal (GRPO learns nothing from it); check its spec, or drop it"
        )
    elif s.groups and s.zero_variance_groups == s.groups:
        s.warnings.append(
            f"grader {name!r} gives all answers of each prompt the same score: within a GRPO group it is "
            "constant and adds no signal"
        )
    return s


def judge_stats(reward: CompositeReward) -> dict[str, dict[str, int]]:
    """Counters of every LLM judge (top level or inside a multi grader), by name."""
    out: dict[str, dict[str, int]] = {}
    stack = [unguarded(c.fn) for c in reward.components]
    while stack:
        fn = stack.pop()
        if isinstance(getattr(fn, "stats", None), dict):
            out[fn.__name__] = dict(fn.stats)
        stack += list(getattr(fn, "graders", {}).values())
    return out


def score_rows(reward: CompositeReward, rows: list[dict], answers: list[list[str]]) -> dict[str, Any]:
    """Score everything; returns the per-answer records, the per-grader summaries and the warnings."""
    scored = score_completions(reward, rows, answers)
    weights = {c.name: c.weight for c in reward.components}
    summaries = []
    for name in [*reward.names, TOTAL]:
        values = [[a["total"] if name == TOTAL else a["scores"][name] for a in row] for row in scored]
        summaries.append(summarise(name, weights.get(name), values))
    records = [
        {"line": row["_line"], "answer": text, "total": s["total"], "scores": s["scores"]}
        for row, texts, row_scores in zip(rows, answers, scored, strict=True)
        for text, s in zip(texts, row_scores, strict=True)
    ]
    judges = judge_stats(reward)
    warnings = [w for s in summaries if s.name != TOTAL for w in s.warnings]
    skips = getattr(reward, "guard_stats", None) or Skips()
    for comp in reward.components:
        failed, reason = failures(unguarded(comp.fn))
        if failed:
            warnings.append(
                f"grader {comp.name!r}: {failed} answers not graded ({reason}); counted as not applicable"
            )
        if skips.get(comp.name, 0) > failed:  # the guard skipped more: the grader raised or timed out
            warnings.append(
                f"grader {comp.name!r}: {skips[comp.name] - failed} answers skipped, as train would skip them "
                f"(it raised, or took longer than --reward_timeout; first: {skips.first[comp.name]}); counted "
                "as not applicable"
            )
    for name, count in reward.rejected.items():
        warnings.append(
            f"grader {name!r}: {count} scores refused (not a finite number within ±{SCORE_LIMIT:g}); those "
            "answers count as not applicable"
        )
    for name, st in judges.items():
        failed = st["request_failures"] + st["parse_failures"]
        if failed:
            warnings.append(
                f"llm_judge {name!r}: {failed} failed samples ({st['request_failures']} requests failed after "
                f"retries, {st['parse_failures']} replies without a score in range)"
            )
    return {"summaries": summaries, "records": records, "judges": judges, "warnings": warnings}


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def sparkline(hist: list[int]) -> str:
    top = max(hist) if hist else 0
    return (
        "".join(BARS[0 if c == 0 else max(1, round(c / top * (len(BARS) - 1)))] for c in hist) if top else ""
    )


def render_text(result: dict[str, Any], header: str) -> str:
    lines = [header]
    head = f"{'grader':<22} {'weight':>6} {'applies':>9} {'mean':>6} {'std':>6} {'min':>6} {'max':>6}"
    lines.append(f"{head} {'flat groups':>11}  distribution (10 bins)")
    for s in result["summaries"]:
        weight = "" if s.weight is None else f"{s.weight:.2f}"
        groups = f"{s.zero_variance_groups}/{s.groups}" if s.groups else "-"
        dist = f"|{sparkline(s.histogram)}| {s.hist_range[0]:g}..{s.hist_range[1]:g}" if s.histogram else ""
        lines.append(
            f"{s.name[:22]:<22} {weight:>6} {f'{s.applicable}/{s.n}':>9} {_fmt(s.mean):>6} {_fmt(s.std):>6} "
            f"{_fmt(s.min):>6} {_fmt(s.max):>6} {groups:>11}  {dist}"
        )
    for name, st in result["judges"].items():
        lines.append(f"llm_judge {name}: " + ", ".join(f"{k} {v}" for k, v in st.items()))
    lines += [f"warning: {w}" for w in result["warnings"]]
    return "\n".join(lines)


def to_json(result: dict[str, Any]) -> dict[str, Any]:
    graders = {}
    for s in result["summaries"]:
        d = {k: v for k, v in vars(s).items() if k not in ("name", "warnings")}
        d["constant"] = s.applicable >= 2 and s.max is not None and s.max - s.min < 1e-9
        graders[s.name] = d
    return {"graders": graders, "judges": result["judges"], "warnings": result["warnings"]}


def reselect(scored: list[dict], threshold: float, conversational: bool) -> Selection:
    """Rebuild the RFT selection from ``rft_scored.jsonl`` exactly as :func:`select` made it (resume)."""
    extra = ("answers", "best", "worst")
    rows = [{k: v for k, v in r.items() if k not in extra} for r in scored]
    answers = [[(a["text"], a["source"]) for a in r["answers"]] for r in scored]
    scores = [[{"total": a["reward"], "scores": a["scores"]} for a in r["answers"]] for r in scored]
    return select(rows, answers, scores, threshold, conversational)
