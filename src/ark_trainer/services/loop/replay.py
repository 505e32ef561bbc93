"""Replay: each round trains on its new turns mixed with rows the served model already learned.

A round that trains only on the newest corrections learns them and forgets the rest: measured on the loop
demo, a round taught a kind of case the model had never seen (0% → 100% on it) while the other kinds fell
from 29.6% to 7.4% on the test split. The usual cure is rehearsal: mix into every round a sample of what
the model was trained on before, so each gradient step sees old cases beside the new ones.

The replay pool (:func:`replay_pool`):

- the starting model's own training rows: ``--replay_data FILE`` when given, else ``data/train.jsonl`` of
  the ``train`` run folder the starting ``--model_path`` came from (``RUN/model`` or ``RUN``), when it has
  one; a model from elsewhere has none (said once, when the loop starts);
- every earlier decided round's new turns (``rounds/N/data.jsonl`` less its replayed rows:
  ``rounds/N/replay.json`` says how many were new), promoted or refused: the users' corrections stay true;
  a failed round's turns come back as new turns of the next round anyway.

Rows whose prompt is one of the loop's frozen held-out rows are never replayed (the gate reads those).
Replayed rows are scrubbed as the recorder scrubs every turn (``data/scrub.py``: phone and ID numbers,
cards, keys), so a round's data holds no such value whatever the starting model's rows held (the loop's
demo: 34 phone and ID numbers of its generated dialogues otherwise).

How many (:func:`replay_count`): ``--replay_share`` of the round's training rows are replayed rows
(default :data:`DEFAULT_SHARE` = 0.5: as many replayed rows as new ones, the one-to-one mix common in
rehearsal, so the old cases weigh as much as the new in every batch while the new ones are still half of
what the round sees), at most the whole pool; ``--replay_share 0`` turns replay off. The sample is drawn
without repeats, seeded by the round's number (a round started again draws the same rows). The round
writes its new rows first, then the replayed ones, to ``rounds/N/data.jsonl``, and what it mixed to
``rounds/N/replay.json``.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import read_json, write_json
from ark_trainer.core.runfolder import RunFolder

DEFAULT_SHARE = 0.5  # replayed rows / all the round's training rows: as many replayed rows as new ones
RECORD = "replay.json"


def check_share(share: float) -> None:
    if not 0 <= share < 1:  # nan fails too
        raise UserError(
            f"--replay_share: expected a share in [0, 1) of each round's training rows, got {share}; "
            f"0 turns replay off, {DEFAULT_SHARE:g} (the default) mixes as many replayed rows as new ones"
        )


def replay_count(n_new: int, share: float) -> int:
    """Replayed rows for ``n_new`` new rows, so that they are ``share`` of the round's training rows."""
    if share <= 0 or n_new <= 0:
        return 0
    return round(n_new * share / (1 - share))


def starting_data(model_path: str | None, replay_data: str | None) -> tuple[Path | None, str]:
    """The starting model's training rows file and where it came from: ``--replay_data``, else
    ``data/train.jsonl`` of the run folder ``model_path`` is (or is the ``model/`` of); (None, why) when
    neither is known."""
    if replay_data:
        from ark_trainer.data.loader import load_jsonl

        load_jsonl(replay_data, "--replay_data")  # refused here, one line per problem, before anything runs
        return Path(replay_data).resolve(), "--replay_data"
    if model_path:
        model = Path(model_path)
        for run in (model.parent, model):
            rows = run / "data" / "train.jsonl"
            if RunFolder(run).plan_path.is_file() and rows.is_file():
                return (
                    rows.resolve(),
                    f"the training rows of the run folder {run} the starting model came from",
                )
    return None, "the starting model is not a train run's model and no --replay_data was given"


def as_round_row(loaded: dict) -> dict:
    """A loaded row (``prompt`` + ``candidates``) in a round's own shape: ``messages`` with its first
    candidate as the answer (none: the prompt alone, as a plain correction's row), its other columns kept."""
    messages = list(loaded["prompt"])
    if loaded.get("candidates"):
        messages.append({"role": "assistant", "content": loaded["candidates"][0]})
    rest = {k: v for k, v in loaded.items() if k not in ("prompt", "candidates") and not k.startswith("_")}
    return {"messages": messages, **rest}


def replay_pool(
    loop: Path, start: Path | None, rounds_before: list[int], heldout: list[dict]
) -> dict[str, list[dict]]:
    """The rows a round may replay, by source (``start``, ``round N``), in round shape, none of them a
    held-out prompt (``heldout``: loaded rows)."""
    from ark_trainer.data.loader import load_jsonl
    from ark_trainer.data.split import prompt_key

    frozen = {prompt_key(r) for r in heldout}
    sources: dict[str, list[dict]] = {}
    if start is not None and start.is_file():
        sources["start"] = load_jsonl(start, "--replay_data")
    for n in rounds_before:
        folder = Path(loop) / "rounds" / str(n)
        if not (folder / "data.jsonl").is_file():
            continue
        rows = load_jsonl(folder / "data.jsonl", f"round {n}'s data.jsonl")
        record = read_json(folder / RECORD) if (folder / RECORD).is_file() else {}
        sources[f"round {n}"] = rows[: int(record.get("n_new", len(rows)))]
    from ark_trainer.data.scrub import Scrubber

    return {
        name: [Scrubber().value(as_round_row(r)) for r in rows if prompt_key(r) not in frozen]
        for name, rows in sources.items()
    }


def mix(
    new_rows: list[dict], pool: dict[str, list[dict]], share: float, seed: int
) -> tuple[list[dict], dict]:
    """The round's training rows (its new rows, then the replayed sample) and what was mixed."""
    everything = [(name, row) for name, rows in pool.items() for row in rows]
    wanted = replay_count(len(new_rows), share)
    drawn = random.Random(f"ark-loop-replay:{seed}").sample(everything, min(wanted, len(everything)))
    by_source: dict[str, int] = {}
    for name, _ in drawn:
        by_source[name] = by_source.get(name, 0) + 1
    record: dict[str, Any] = {
        "share": share, "n_new": len(new_rows), "n_replay": len(drawn), "wanted": wanted,
        "pool": {name: len(rows) for name, rows in pool.items()}, "from": by_source,
    }  # fmt: skip
    return new_rows + [row for _, row in drawn], record


def write_record(folder: Path, record: dict) -> None:
    write_json(Path(folder) / RECORD, record)


def replay_line(record: dict, start_source: str) -> str:
    """The round's replay, said with its other automatic choices."""
    share, n_new, n_replay = record["share"], record["n_new"], record["n_replay"]
    if share <= 0:
        return f"replay: off (--replay_share 0): {n_new} new rows only"
    sources = ", ".join(f"{k} from {name}" for name, k in record["from"].items()) or "none"
    short = f" (the pool holds only {sum(record['pool'].values())})" if n_replay < record["wanted"] else ""
    start = "" if "start" in record["pool"] else f"; no starting rows: {start_source}"
    return (
        f"replay: {n_new} new rows + {n_replay} replayed{short} (--replay_share {share:g}: replayed rows are "
        f"that share of the round's rows, so it keeps rehearsing what the served model learned: {sources}"
        f"{start}); {RECORD}"
    )
