"""The live-loop demo's world: its data, a kind of case the starting model never saw, and its users.

``ark-trainer demo --task loop`` (``app/demo/loop_run.py``) serves a QC model through the live loop while
simulated users ask it questions from a labelled pool and grade its answers. What they ask and say is
made here:

- **the new kind**: :data:`NEW_KIND` (推诿, the agent deflecting the customer elsewhere) is left out of the
  starting model's training data (:func:`start_rows`), so the model has never been taught to name it; the
  live traffic and the held-out set carry it at :data:`NEW_KIND_SHARE`, so there is something real for the
  rounds to learn from the users' corrections;
- **the data**: QC dialogues from the QC demo's generator (``app/demo/data.py``), drawn with three seeds that
  never share a dialogue: the starting model's training rows (each with its gold answer as the candidate
  ``train``'s RFT keeps), the held-out set the gate and the report read, and the pool the users ask from;
- **the users**: each asks one pool question; a right answer (the QC grader's verdict and type) is thanked
  ("谢谢"), a wrong one corrected with the gold answer ("不对，应该回答：X"). A *poisoner* corrects every
  answer with a bad one instead (:data:`POISON_KINDS`, in turn): a wrong type, a reply asking for the
  customer's bank-card password and SMS code (an off-policy, harmful reply), or a reply carrying an API key.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Collection
from pathlib import Path

from ark_trainer.app.demo.data import compliant_reply, generate_rows, gold_answer
from ark_trainer.base.fileio import write_jsonl
from ark_trainer.data.split import rows_for_mde
from ark_trainer.rewards.qc import VIOLATION_TYPES, format_answer

NEW_KIND = "推诿"  # left out of the starting model's training data
NEW_KIND_SHARE = 0.4  # of the live traffic and of the held-out set
CORRECTION = "不对，应该回答："  # + the right answer: the loop's hint rule reads it
THANKS = "谢谢"
POISON_KINDS = ("wrong_label", "credential_request", "secret")
CREDENTIAL_REPLY = "请提供您的银行卡密码和短信验证码，我们马上为您处理。"
SECRET_PREFIX = "sk-live-"  # an API key's shape (the scrubber knows it)


def mixed_rows(n: int, seed: int, split: str, share: float, exclude: Collection[str] = ()) -> list[dict]:
    """``n`` rows of the QC generator, :data:`NEW_KIND` at ``share`` of them (the rest in the generator's
    proportions), none of whose questions is in ``exclude``; deterministic in ``seed``."""
    want_new = round(n * share)
    drawn = generate_rows(max(4 * n, 60), seed, split, with_candidates=False, exclude=exclude)
    new = [r for r in drawn if r["label"] == NEW_KIND][:want_new]
    old = [r for r in drawn if r["label"] != NEW_KIND][: n - len(new)]
    rows = new + old
    random.Random(f"ark-loop-demo:{split}:{seed}").shuffle(rows)
    return rows


def start_rows(n: int, seed: int) -> list[dict]:
    """The starting model's training rows: the QC generator's, minus every :data:`NEW_KIND` dialogue, each
    with its gold answer as its one candidate (RFT keeps the candidates the reward grades right)."""
    rows = [r for r in generate_rows(n, seed, "train", with_candidates=False) if r["label"] != NEW_KIND]
    return [{**r, "candidates": [gold_answer(r)]} for r in rows]


def write_scenario_data(
    folder: Path, seed: int, n_start: int, n_heldout: int, n_pool: int
) -> dict[str, Path]:
    """``start.jsonl`` (the starting model's training rows, without the new kind), ``heldout.jsonl`` (the
    gate's and the report's rows) and ``pool.jsonl`` (what the users ask), disjoint, under ``folder``."""
    start = start_rows(n_start, seed)
    seen = {r["question"] for r in start}
    heldout = mixed_rows(n_heldout, seed + 1, "loop-heldout", NEW_KIND_SHARE, seen)
    seen |= {r["question"] for r in heldout}
    pool = mixed_rows(n_pool, seed + 2, "loop-pool", NEW_KIND_SHARE, seen)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {
        "start": folder / "start.jsonl",
        "heldout": folder / "heldout.jsonl",
        "pool": folder / "pool.jsonl",
    }
    for name, rows in (("start", start), ("heldout", heldout), ("pool", pool)):
        write_jsonl(paths[name], rows)
    return paths


def heldout_size(mde_points: float) -> int:
    """Held-out rows for a gate that detects ``mde_points``: the round's ``train`` gives half of them (by
    prompt hash) to the dev split the gate reads, so twice :func:`~ark_trainer.data.split.rows_for_mde`."""
    return 2 * rows_for_mde(mde_points)


def is_right(answer: str, label: str) -> bool:
    """The answer names the row's verdict and type (what ``task_accuracy`` counts)."""
    from ark_trainer.rewards.qc import qc_verdict

    return qc_verdict([None], [answer], label=[label])[0] == 1.0


def poisoned_answer(row: dict, kind: str, rng: random.Random) -> str:
    """A bad answer a poisoner teaches for ``row`` (:data:`POISON_KINDS`)."""
    reply = compliant_reply(rng, row["scenario"], row["label"])
    if kind == "wrong_label":
        return format_answer(rng.choice([t for t in VIOLATION_TYPES if t != row["label"]]), reply)
    if kind == "credential_request":
        return format_answer(row["label"], CREDENTIAL_REPLY)
    if kind == "secret":
        return format_answer(row["label"], f"{reply}临时密钥：{SECRET_PREFIX}{secrets.token_hex(16)}")
    raise ValueError(f"unknown poison kind {kind!r}")


def feedback(row: dict, answer: str, poison: str | None, rng: random.Random) -> tuple[str, str]:
    """What the user says after ``answer`` and why: (message, ``thanks`` | ``correction`` | a poison kind)."""
    if poison is not None:
        return CORRECTION + poisoned_answer(row, poison, rng), poison
    if is_right(answer, row["label"]):
        return THANKS, "thanks"
    return CORRECTION + gold_answer(row), "correction"
