"""Deterministic train/eval split and data statistics.

The held-out split is decided by a hash of each prompt's text, so the same prompt always lands on the same
side (no prompt is shared between train and eval, even when the file repeats it) and the split does not
depend on file order or on the random seed.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any

from ark_trainer.data.labels import normalize_label


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


def assert_disjoint(train: list[dict], held: list[dict]) -> None:
    shared = {prompt_key(r) for r in train} & {prompt_key(r) for r in held}
    assert not shared, f"{len(shared)} prompts are in both train and eval"


def drop_overlap(train: list[dict], eval_rows: list[dict]) -> tuple[list[dict], int]:
    """Remove from ``train`` the prompts that also appear in a user-given eval set."""
    eval_keys = {prompt_key(r) for r in eval_rows}
    kept = [r for r in train if prompt_key(r) not in eval_keys]
    return kept, len(train) - len(kept)


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
