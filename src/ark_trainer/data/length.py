"""Refuse prompts longer than the model can read, before anything runs (one 10 MB row ran a run out of memory).

The window a prompt may fill is the model's positions (``max_position_embeddings`` in ``config.json``, or
the tokenizer's ``model_max_length`` when smaller) minus ``--max_completion_length``. A longer prompt is
refused with ``file:line`` (every such row, in one pass), not cut: cutting would train on a prompt the
user never wrote. The check is cheap: the prompt is rendered as the model sees it (chat template); a text
with no more UTF-8 bytes than the window cannot hold more tokens and is not tokenized; otherwise only a
prefix long enough to overflow the window is tokenized, so a 10 MB prompt costs a few kilobytes of work.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import read_json

log = logging.getLogger("ark_trainer")

CHARS_PER_TOKEN_BOUND = 32  # a prefix of (window + 1) * this many characters holds > window tokens, or is all
_POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")
_NO_LIMIT = 1_000_000_000  # tokenizers without a limit report a huge sentinel (1e30)


def model_positions(model_path: str | Path, tokenizer) -> tuple[int | None, str]:
    """(positions the model reads, where the number comes from), or (None, "") when nothing says."""
    config = read_json(Path(model_path) / "config.json")
    found = [(config[k], k) for k in _POSITION_KEYS if isinstance(config.get(k), int)]
    text_config = config.get("text_config")
    if not found and isinstance(text_config, dict):
        found = [(text_config[k], k) for k in _POSITION_KEYS if isinstance(text_config.get(k), int)]
    limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(limit, int) and 0 < limit < _NO_LIMIT:
        found.append((limit, "the tokenizer's model_max_length"))
    return min(found) if found else (None, "")


def check_prompt_lengths(
    model_path: str,
    max_completion_length: int,
    sources: list[tuple[Path, list[dict]]],
    trust_remote_code=False,
    tools: list[dict] | None = None,
) -> None:
    """Raise :class:`UserError` listing every prompt of ``sources`` (path, rows) that overflows the window;
    under ``--env`` each prompt is rendered with the environment's ``tools`` (their schemas are in every
    prompt)."""
    from ark_trainer.core.models.loading import load_tokenizer

    try:
        tok = load_tokenizer(model_path, trust_remote_code)
    except Exception as exc:  # noqa: BLE001 - the run's own model loading reports this better
        log.warning("prompt lengths not checked: the tokenizer did not load (%s)", exc)
        return
    positions, where = model_positions(model_path, tok)
    if positions is None:
        return
    window = positions - max_completion_length
    if window <= 0:
        raise UserError(
            f"--max_completion_length: {max_completion_length} leaves no room for a prompt in the model's "
            f"{positions} positions ({where}); lower it"
        )
    reason = f"{where} {positions} - --max_completion_length {max_completion_length}"
    problems = []
    for path, rows in sources:
        counts = prompt_token_counts(tok, rows, window, tools)
        for row, (count, exact) in zip(rows, counts, strict=True):
            if count > window:
                size = f"{count} tokens" if exact else f"over {count} tokens"
                with_tools = f" with the {len(tools)} tools of --env" if tools else ""
                fix = "; or show fewer tools (toolFilter)" if tools else ""
                problems.append(
                    f"{path}:{row['_line']}: prompt: {size}{with_tools}, longer than the model's window of "
                    f"{window} tokens ({reason}); shorten the prompt, drop the row, or lower "
                    f"--max_completion_length{fix}"
                )
    if problems:
        raise UserError(*problems)


def prompt_token_counts(
    tokenizer, rows: list[dict], window: int, tools: list[dict] | None = None
) -> list[tuple[int, bool]]:
    """(tokens, exact) per row; a count is a lower bound (exact False) once it is past ``window``."""
    from ark_trainer.core.models.prompts import render_prompt

    # Counting a long prompt is the point here, not a mistake: silence transformers' "longer than" warning.
    getattr(tokenizer, "deprecation_warnings", {})["sequence-length-is-longer-than-the-specified-maximum"] = (
        True
    )
    counts: list[tuple[int, bool]] = []
    for row in rows:
        text = render_prompt(tokenizer, row["prompt"], tools)
        if len(text) <= window and len(text.encode("utf-8", "surrogatepass")) <= window:  # chars first
            counts.append((0, True))  # fewer bytes than the window: fits whatever the tokenizer does
            continue
        counts.append(_count(tokenizer, text, window))
    return counts


def _count(tokenizer, text: str, window: int) -> tuple[int, bool]:
    cut = (window + 1) * CHARS_PER_TOKEN_BOUND
    n = len(tokenizer(text[:cut], add_special_tokens=False)["input_ids"])
    if len(text) <= cut:
        return n, True
    if n > window:
        return n, False
    return len(tokenizer(text, add_special_tokens=False)["input_ids"]), True
