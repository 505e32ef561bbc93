"""Evaluation of the base, RFT and GRPO models on the held-out set.

Greedy answers are scored with the very same reward functions that trained the model, so the metric and
the reward cannot drift apart. The metrics written to ``OUT/eval/<name>.json`` are named and computed in
``core/metrics.py``.

With an answer cache (``--eval_answer_cache DIR``: the live loop gives its rounds one) a model's greedy
answers are kept by the model's identity (:func:`model_fingerprint`: its weight files' names, sizes and
modification times), the prompt, the answer length and the precision, so an evaluation of a model seen
before generates only the prompts it has not answered yet (``answers_cached`` in its eval file: how many
came from the cache). A loop's round evaluates the served model on the
frozen held-out rows every round, and the round it promotes was evaluated on them by its own run: with the
cache, those answers are generated once per served model instead of once per round. Answers are rescored
every time (the reward may change; scoring is cheap).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ark_trainer.base.fileio import write_json
from ark_trainer.core.generation import generate
from ark_trainer.core.metrics import N_EXAMPLES, OUTCOMES, compute_metrics, prompt_outcomes
from ark_trainer.core.models.device import Runtime
from ark_trainer.core.models.loading import load_policy
from ark_trainer.rewards.composite import TOTAL, CompositeReward
from ark_trainer.rewards.scoring import metric_scores


def measurement_of(
    split: str, rows: list[dict], rt: Runtime, max_new_tokens: int, episodes: bool = False
) -> dict[str, Any]:
    """How an evaluation is measured: two evaluations are compared only when these agree (but ``split``,
    which says which rows they are). ``rows`` is a hash of the prompts in order (``data/split.py``)."""
    from ark_trainer.data.split import row_hash

    return {
        "split": split,
        "n": len(rows),
        "rows": row_hash(rows),
        "dtype": str(rt.dtype).removeprefix("torch."),
        "precision": rt.precision,
        "decoding": "greedy",
        "max_new_tokens": max_new_tokens,
        "episodes": episodes,
    }


def evaluate_model(
    model_path: str | Path,
    name: str,
    rows: list[dict],
    reward: CompositeReward,
    rt: Runtime,
    out_path: Path,
    *,
    max_new_tokens: int,
    pass_threshold: float,
    base_totals: list[float | None] | None = None,
    seed: int = 0,
    on_batch=None,
    env: tuple | None = None,
    on_tick=None,
    measurement: dict[str, Any] | None = None,
    answer_cache: str | Path | None = None,
) -> dict[str, Any]:
    """Greedy-decode every eval prompt, score, and write ``out_path``; returns the metrics plus totals.

    With ``env`` (an agent run: the limit-applying environment class and its limits) every prompt is played
    as a greedy episode with the tools executed (``stages/agent/rollout.py``), and the file also carries the agent
    metrics (``task_success``, ``tool_call_validity``, ``mean_turns``, ``mean_tool_calls``) and episodes.
    ``measurement`` (how it was measured: split, rows, dtype, decoding, ...) is recorded in the file as is,
    so that only evaluations measured alike are compared (``core/final_model.py``).
    """
    recorded = {"measurement": measurement} if measurement is not None else {}
    from ark_trainer.base.scale import generation_batch

    model, tok = load_policy(model_path, rt)
    if env is not None:
        from ark_trainer.stages.agent.evaluate import evaluate_episodes

        args = (model, tok, env, rows, reward, max_new_tokens, pass_threshold, base_totals, seed, on_batch)
        result = {"name": name, "model": str(model_path), **evaluate_episodes(*args), **recorded}
        del model
        write_json(out_path, result)
        return result
    cache = AnswerCache.of(answer_cache, model_path, max_new_tokens, str(rt.dtype))
    known = cache.answers([r["prompt"] for r in rows])
    todo = [i for i, a in enumerate(known) if a is None]
    fresh = [
        a[0]
        for a in generate(
            model,
            tok,
            [rows[i]["prompt"] for i in todo],
            num_samples=1,
            temperature=0.0,
            max_new_tokens=max_new_tokens,
            batch_size=generation_batch(rt.device, 32),  # larger on a GPU, where decoding is launch-bound
            seed=seed,
            on_batch=on_batch,
            desc=f"eval {name}",
            on_tick=on_tick,
        )
    ] if todo else []  # fmt: skip
    cache.keep([rows[i]["prompt"] for i in todo], fresh)
    for i, answer in zip(todo, fresh, strict=True):
        known[i] = answer
    answers: list[str] = [a or "" for a in known]
    del model
    table = metric_scores(reward, rows, answers)
    totals = table[TOTAL]
    base = base_totals if base_totals is not None else totals
    metrics = compute_metrics(table, base, pass_threshold)
    outcomes = prompt_outcomes(table, base, pass_threshold)  # each rate above is the mean of its column
    examples = [
        {"prompt": rows[i]["prompt"][-1]["content"], "completion": answers[i], "reward": totals[i]}
        for i in range(min(N_EXAMPLES, len(rows)))
    ]
    result = {
        "name": name,
        "model": str(model_path),
        "dtype": str(rt.dtype).removeprefix("torch."),  # what it computed in; serving parity asks the same
        **metrics,
        "examples": examples,
        "answers": [
            {"completion": a, "reward": t, OUTCOMES: o}
            for a, t, o in zip(answers, totals, outcomes, strict=True)
        ],
        **recorded,
        **({"answers_cached": len(rows) - len(todo)} if cache.path is not None else {}),
    }
    write_json(out_path, result)
    return result


def model_fingerprint(model_path: str | Path) -> str | None:
    """A model folder's identity: its config and weight files' names, sizes and modification times (a
    round's model is written once, so a new model is a new fingerprint; the last stage's model is renamed
    into ``OUT/model``, which keeps them); None for what is not a folder."""
    import hashlib

    folder = Path(model_path)
    if not folder.is_dir():
        return None
    # the weights and the architecture; not the notes train adds after an evaluation (prompt shape, precision)
    files = sorted(
        f for f in folder.iterdir() if f.suffix in (".safetensors", ".bin") or f.name == "config.json"
    )
    stats = [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files]
    return hashlib.sha256(repr((str(folder.resolve()), stats)).encode()).hexdigest()[:24]


class AnswerCache:
    """Greedy answers of one model at one answer length and precision, by prompt (see the module
    docstring); a no-op without a folder or a fingerprint."""

    def __init__(self, path: Path | None, salt: str = "") -> None:
        self.path, self.salt = path, salt
        self.known: dict[str, str] = {}
        if path is not None and path.is_file():
            from ark_trainer.base.fileio import jsonl_file_lines

            for line in jsonl_file_lines(path):
                row = _json_or_none(line)
                if isinstance(row, dict) and isinstance(row.get("answer"), str):
                    self.known[str(row.get("key"))] = row["answer"]

    @classmethod
    def of(
        cls, folder: str | Path | None, model_path: str | Path, max_new_tokens: int, dtype: str
    ) -> AnswerCache:
        fingerprint = model_fingerprint(model_path) if folder else None
        if not folder or fingerprint is None:
            return cls(None)
        return cls(Path(folder) / f"{fingerprint}.jsonl", f"{max_new_tokens}|{dtype}")

    def _key(self, prompt: Any) -> str:
        import hashlib
        import json

        text = json.dumps([self.salt, prompt], ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def answers(self, prompts: list[Any]) -> list[str | None]:
        return [self.known.get(self._key(p)) for p in prompts]

    def keep(self, prompts: list[Any], answers: list[str]) -> None:
        if self.path is None or not prompts:
            return
        from ark_trainer.base.fileio import json_line

        self.path.parent.mkdir(parents=True, exist_ok=True)
        lines = "".join(
            json_line({"key": self._key(p), "answer": a}) for p, a in zip(prompts, answers, strict=True)
        )
        with open(self.path, "a", encoding="utf-8") as fh:  # a torn last line is skipped when read
            fh.write(lines)


def _json_or_none(line: str) -> Any:
    import json

    try:
        return json.loads(line)
    except ValueError:
        return None
