"""Deterministic train / dev / test split and data statistics.

Each split has one job: the model trains on **train**; every choice a run makes from held-out results (the
best GRPO step, ``--final_model best``) reads **dev**; every reported figure (report, ``status``,
``diagnose``, the dashboard) comes from **test**, which no choice reads, so a reported gain is not inflated
by having been picked on the same prompts.

The side a row lands on is decided by a hash of its prompt's text, so the same prompt always lands on the
same side (no prompt is shared between splits, even when the file repeats it) and the split does not
depend on file order or on the random seed. The held-out share (``--eval_ratio``) is halved: the lower half
of the held-out hash range is dev, the upper half test (:data:`DEV_SHARE`). A user's ``--eval_dataset`` is
divided into dev and test by the same hash, half and half.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ark_trainer.data.labels import normalize_label

DEV_SHARE = 0.5  # of the held-out rows (and of a user's --eval_dataset): the rest is the test split
MDE_USEFUL = 10.0  # points: a test split that cannot detect a difference this size gets a warning
DISCORDANT = 0.25  # the MDE's assumed share of prompts whose outcome differs between two models


@dataclass(frozen=True)
class Splits:
    """The rows of each split: ``train`` trains, ``dev`` decides, ``test`` is reported."""

    train: list[dict]
    dev: list[dict]
    test: list[dict]


def prompt_key(row: dict[str, Any]) -> str:
    return json.dumps(row["prompt"], ensure_ascii=False, sort_keys=True)


def _bucket(row: dict[str, Any]) -> float:
    digest = hashlib.sha1(prompt_key(row).encode("utf-8")).hexdigest()
    return int(digest[:8], 16) / 0xFFFFFFFF


def split_rows(rows: list[dict], eval_ratio: float) -> tuple[list[dict], list[dict]]:
    """Split ``rows`` into (train, eval) by prompt hash; both sides non-empty when there are ≥ 2 prompts."""
    if eval_ratio <= 0:
        return list(rows), []
    train = [r for r in rows if _bucket(r) >= eval_ratio]
    held = [r for r in rows if _bucket(r) < eval_ratio]
    if not held and len({prompt_key(r) for r in rows}) > 1:
        # Too few rows for the ratio to catch one: hold out the prompt with the smallest hash.
        smallest = prompt_key(min(rows, key=_bucket))
        held = [r for r in rows if prompt_key(r) == smallest]
        train = [r for r in rows if prompt_key(r) != smallest]
    assert_disjoint(train, held)
    return train, held


def split_three(rows: list[dict], eval_ratio: float) -> Splits:
    """``rows`` divided by prompt hash: dev below ``eval_ratio * DEV_SHARE``, test up to ``eval_ratio``,
    train above. With ≥ 3 prompts every split holds at least one (the prompts next in hash order fill an
    empty one), so a small file still has a dev and a test row."""
    if eval_ratio <= 0:
        return Splits(list(rows), [], [])
    order = _prompts_by_hash(rows)
    buckets = [_bucket(rows_of[0]) for rows_of in order.values()]
    n_dev = sum(b < eval_ratio * DEV_SHARE for b in buckets)
    n_test = sum(eval_ratio * DEV_SHARE <= b < eval_ratio for b in buckets)
    if len(order) >= 3:
        n_dev = min(max(n_dev, 1), len(order) - 2)  # one prompt at least stays to test and to train on
        n_test = min(max(n_test, 1), len(order) - 1 - n_dev)
    elif len(order) == 2:
        n_dev, n_test = 0, 1
    else:
        n_dev = n_test = 0
    groups = list(order.values())
    return _checked(
        Splits(_flat(groups[n_dev + n_test :]), _flat(groups[:n_dev]), _flat(groups[n_dev : n_dev + n_test]))
    )


def divide_eval(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """A user's eval file divided into (dev, test) by prompt hash, :data:`DEV_SHARE` of it dev; both
    non-empty when it has ≥ 2 prompts (one prompt: test only)."""
    groups = list(_prompts_by_hash(rows).values())
    hashed = sum(_bucket(g[0]) < DEV_SHARE for g in groups)
    # a single prompt is reported (test): a run without a dev split chooses nothing
    n_dev = min(max(hashed, 1), len(groups) - 1) if len(groups) >= 2 else 0
    dev, test = _flat(groups[:n_dev]), _flat(groups[n_dev:])
    assert_disjoint(dev, test)
    return dev, test


def _prompts_by_hash(rows: list[dict]) -> dict[str, list[dict]]:
    """The rows grouped by prompt (file order within a group), the groups in hash order."""
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(prompt_key(row), []).append(row)
    return dict(sorted(groups.items(), key=lambda item: (_bucket(item[1][0]), item[0])))


def _flat(groups: list[list[dict]]) -> list[dict]:
    return [row for group in groups for row in group]


def _checked(splits: Splits) -> Splits:
    assert_disjoint(splits.train, splits.dev)
    assert_disjoint(splits.train, splits.test)
    assert_disjoint(splits.dev, splits.test)
    return splits


def assert_disjoint(train: list[dict], held: list[dict]) -> None:
    shared = {prompt_key(r) for r in train} & {prompt_key(r) for r in held}
    assert not shared, f"{len(shared)} prompts are in both train and eval"


def drop_overlap(train: list[dict], eval_rows: list[dict]) -> tuple[list[dict], int]:
    """Remove from ``train`` the prompts that also appear in a user-given eval set."""
    eval_keys = {prompt_key(r) for r in eval_rows}
    kept = [r for r in train if prompt_key(r) not in eval_keys]
    return kept, len(train) - len(kept)


def mde_points(n: int, discordant: float = DISCORDANT) -> float:
    """The smallest difference in a binary metric (percentage points) that a paired comparison of two
    models on ``n`` prompts detects with 80% power at a two-sided 5% level: (z₀.₉₇₅ + z₀.₈) · √(d / n), the
    normal approximation of McNemar's test where a share ``d`` of prompts is answered differently by the
    two models (:data:`DISCORDANT`)."""
    if n <= 0:
        return math.inf
    return 100 * (1.959964 + 0.841621) * math.sqrt(discordant / n)


def rows_for_mde(points: float, discordant: float = DISCORDANT) -> int:
    """The fewest prompts on which a paired comparison detects a difference of ``points`` (percentage
    points) with 80% power at a two-sided 5% level: :func:`mde_points` solved for ``n``."""
    if not points > 0:
        raise ValueError(f"a detectable difference must be above 0 points, got {points}")
    return math.ceil(discordant * (100 * (1.959964 + 0.841621) / points) ** 2)


def small_test_warning(n_test: int) -> str | None:
    """One line when the test split is too small to detect a :data:`MDE_USEFUL`-point difference."""
    mde = mde_points(n_test)
    if mde <= MDE_USEFUL:
        return None
    return (
        f"the test split has {n_test} prompts: the smallest difference it can detect between two models is "
        f"about {mde:.0f} points (80% power, 5% two-sided, paired, assuming {DISCORDANT:.0%} of prompts "
        f"change outcome); give more data or a larger --eval_ratio / --eval_dataset for finer figures"
    )


MDE_NOTE = (
    "The smallest detectable difference is what a paired comparison of two models on that many prompts "
    f"detects with 80% power at a two-sided 5% level, assuming {DISCORDANT:.0%} of prompts change outcome."
)


def sizes_line(splits: Any) -> str | None:
    """What a reader of any figure needs first, in one line: the test split's n (every reported figure) and
    the dev split's (every choice), each with the smallest difference it can detect (:func:`mde_points`),
    from ``data/stats.json``'s ``splits``. None when the run recorded no split sizes."""
    if not isinstance(splits, dict):
        return None
    raw = {name: splits.get(name) for name in ("test", "dev", "train")}
    n = {name: v for name, v in raw.items() if isinstance(v, int) and not isinstance(v, bool) and v >= 0}
    if len(n) < len(raw):
        return None

    def detects(count: int) -> str:
        return f"≈ {mde_points(count):.0f} pts" if count else "undefined (no prompts)"

    dev = f"choices; {detects(n['dev'])}" if n["dev"] else "no dev split: the last stage ships"
    return (
        f"Splits: test n = {n['test']} (every reported figure; smallest detectable difference "
        f"{detects(n['test'])}), dev n = {n['dev']} ({dev}), train n = {n['train']}."
    )


def row_hash(rows: list[dict]) -> str:
    """A short hash of the rows' prompts in order: two evaluations on the same rows share it."""
    digest = hashlib.sha1()
    for row in rows:
        digest.update(prompt_key(row).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()[:16]


def describe(rows: list[dict]) -> dict[str, Any]:
    labels: Counter[str] = Counter()
    for r in rows:
        raw = r.get("label")
        norm = normalize_label(raw)
        if norm is not None or raw is not None:
            labels[norm or str(raw)] += 1
    chars = [sum(len(m["content"]) for m in r["prompt"]) for r in rows]
    return {
        "n": len(rows),
        "with_candidates": sum(bool(r.get("candidates")) for r in rows),
        "with_pairs": sum("chosen" in r and "rejected" in r for r in rows),
        "labels": dict(sorted(labels.items())),
        "prompt_chars_mean": round(sum(chars) / max(len(chars), 1), 1),
    }
