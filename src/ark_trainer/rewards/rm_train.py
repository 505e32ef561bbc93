"""``ark-trainer rm train``: a Bradley-Terry reward model from ``chosen``/``rejected`` pairs, on TRL.

Input is any JSONL the data loader reads with ``chosen`` and ``rejected`` answers per prompt: user
preference data, or ``OUT/data/rft_pairs.jsonl`` exactly as the RFT stage writes it (best vs worst
completion by the rule graders). So rules → pairs → reward model → ``train --rm_model_path`` needs no
human labels.

Recipe: the base model is loaded as ``AutoModelForSequenceClassification`` with one output (a fresh
score head), the pairs are split by prompt hash (``data/split.py``, no prompt on both sides), TRL's
``RewardTrainer`` minimises ``-log σ(r_chosen − r_rejected)``, and the held-out pairs are then scored with
:class:`~ark_trainer.rewards.reward_model.RewardModelScorer`, the very scorer ``--rm_model_path`` uses, to
report pair accuracy (share of held-out pairs whose chosen answer scores above the rejected one). Texts
are rendered by ``rm_text`` in both places, so training and scoring see the same tokens.

The model (safetensors), tokenizer and ``rm_metrics.json`` are built in a hidden sibling folder and
moved to ``--output_dir`` only when everything succeeded, so a crash leaves nothing half-written.

    ark-trainer rm train --data_path runs/qc/data/rft_pairs.jsonl --model_path BASE --output_dir runs/rm
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import write_json
from ark_trainer.data.split import split_rows

if TYPE_CHECKING:
    from peft import PeftModel

log = logging.getLogger("ark_trainer")
METRICS_FILE = "rm_metrics.json"


@dataclass
class RMTrainArgs:
    data_path: str
    model_path: str
    output_dir: str
    eval_ratio: float = 0.1
    num_train_epochs: float = 1.0
    max_steps: int = -1
    learning_rate: float = 1e-5
    batch_size: int = 8
    gradient_accumulation_steps: int = 1
    max_length: int = 1024
    seed: int = 0
    device: str = "auto"
    bf16: bool = False
    overwrite_output_dir: bool = False
    lora_r: int = 0
    lora_alpha: int | None = None
    lora_dropout: float = 0.05
    lora_target_modules: str = "all-linear"

    def check(self) -> None:
        if not 0 <= self.eval_ratio < 1:
            raise UserError(f"--eval_ratio: expected a number in [0, 1), got {self.eval_ratio}")
        from ark_trainer.base.ranges import BIG, MAX_BATCH, MAX_NEW_TOKENS

        for flag, high in (
            ("batch_size", MAX_BATCH),
            ("gradient_accumulation_steps", BIG),
            ("max_length", MAX_NEW_TOKENS),
        ):
            if not 1 <= getattr(self, flag) <= high:
                raise UserError(f"--{flag}: expected an integer in [1, {high}], got {getattr(self, flag)}")
        if not 0 < self.learning_rate < math.inf:  # nan fails this too
            raise UserError(f"--learning_rate: expected a number > 0, got {self.learning_rate}")
        if self.max_steps <= 0 and not 0 < self.num_train_epochs < math.inf:
            raise UserError("--num_train_epochs: expected a number > 0 (or give --max_steps)")
        from ark_trainer.base.ranges import range_problems
        from ark_trainer.base.scale import lora_problems
        from ark_trainer.core.config import RANGES

        lora = {n: RANGES[n] for n in ("lora_r", "lora_alpha")}  # train's: a rank of 1e9 allocates 64 GB
        if problems := range_problems(vars(self), lora) or lora_problems(
            self.lora_r, self.lora_alpha, self.lora_dropout
        ):
            raise UserError(*problems)
        if self.device not in ("auto", "cpu") and not self.device.startswith("cuda"):
            raise UserError(f"--device: unknown device {self.device!r}; use auto, cpu, cuda or cuda:N")


def _answer(value: Any) -> str | None:
    if isinstance(value, list) and all(isinstance(m, dict) for m in value):
        return "".join(str(m.get("content", "")) for m in value)  # a chat-message answer
    return value if isinstance(value, str) else None


def load_pairs(path: str | Path) -> tuple[list[dict], int]:
    """Rows with a prompt, ``chosen`` and ``rejected``; identical pairs are dropped and counted.

    The prompt is read by the data loader's own rules; ``chosen``/``rejected`` may be empty text (a policy
    sample can be empty, and rft_pairs.jsonl keeps it as the rejected answer, which it rightly is).
    """
    from ark_trainer.data.files import check_data_file
    from ark_trainer.data.loader import _normalise, _Problems, json_objects

    path = check_data_file(path, "--data_path")
    problems, rows = _Problems(path), []
    for lineno, raw in json_objects(path, problems):
        answers = {k: raw.pop(k, None) for k in ("chosen", "rejected")}
        for key, value in answers.items():
            if value is None:
                problems.add(lineno, key, "missing; every row of a pairs file needs 'chosen' and 'rejected'")
            elif _answer(value) is None:
                problems.add(lineno, key, f"expected text, got {type(value).__name__}")
        row = _normalise(raw, lineno, problems)
        if row is not None and all(_answer(v) is not None for v in answers.values()):
            rows.append(
                {
                    "prompt": row["prompt"],
                    "chosen": _answer(answers["chosen"]),
                    "rejected": _answer(answers["rejected"]),
                    "_line": lineno,
                }
            )
    if problems.items:
        raise UserError(*problems.items)
    if not rows:
        raise UserError(f"{path}: no pairs; the file is empty")
    pairs = [r for r in rows if r["chosen"].strip() != r["rejected"].strip()]
    if not pairs:
        raise UserError(f"{path}: no usable pairs; every row's chosen answer equals its rejected one")
    return pairs, len(rows) - len(pairs)


def _device(want: str) -> str:
    from ark_trainer.core.runtime.system import resolve_device

    return resolve_device(want, fallback=log.warning)


def _texts(tok, rows: list[dict], max_length: int) -> tuple[list[dict], int]:
    from ark_trainer.rewards.reward_model import rm_text

    out, too_long = [], 0
    for row in rows:
        chosen, rejected = (
            rm_text(tok, row["prompt"], row["chosen"]),
            rm_text(tok, row["prompt"], row["rejected"]),
        )
        n = max(len(tok(t, add_special_tokens=True)["input_ids"]) for t in (chosen, rejected))
        if n > max_length:
            too_long += 1
            continue
        out.append({"chosen": chosen, "rejected": rejected})
    return out, too_long


def pair_accuracy(model_dir: Path, rows: list[dict], device: str, max_length: int) -> dict[str, Any]:
    """Share of pairs whose chosen answer the saved reward model scores above the rejected one."""
    from ark_trainer.rewards.reward_model import RewardModelScorer

    if not rows:
        return {"pair_accuracy": None, "mean_margin": None, "n": 0}
    scorer = RewardModelScorer(str(model_dir), device=device, max_length=max_length)
    prompts = [r["prompt"] for r in rows]
    # The reward model scores every text (None is only the reward contract's "no score", never used here).
    chosen = cast(list[float], scorer(prompts, [r["chosen"] for r in rows]))
    rejected = cast(list[float], scorer(prompts, [r["rejected"] for r in rows]))
    wins = [c > r for c, r in zip(chosen, rejected, strict=True)]
    margins = [c - r for c, r in zip(chosen, rejected, strict=True)]
    return {
        "pair_accuracy": round(sum(wins) / len(wins), 4),
        "mean_margin": round(sum(margins) / len(margins), 4),
        "n": len(rows),
    }


def _prepare_output(args: RMTrainArgs) -> tuple[Path, Path]:
    from ark_trainer.core.folders import check_folder

    check_folder(args.output_dir, "--output_dir", "reward model")  # new, empty, or a reward model of ours
    out = Path(args.output_dir).resolve()
    if out.is_dir() and any(out.iterdir()) and not args.overwrite_output_dir:
        raise UserError(
            f"--output_dir: {out} is not empty; pick a new folder or pass --overwrite_output_dir True"
        )
    staging = out.with_name(f".{out.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    return out, staging


def train_reward_model(args: RMTrainArgs) -> dict[str, Any]:
    """Train, evaluate on the held-out pairs, save; returns the metrics written to rm_metrics.json."""
    from ark_trainer.core.folders import claim_folder
    from ark_trainer.core.models.loading import load_tokenizer
    from ark_trainer.core.models.source import check_model, convert

    args.check()
    source = check_model(args.model_path, flag="--model_path")  # an HF folder, a .gguf file or ollama:NAME
    pairs, n_identical = load_pairs(args.data_path)
    out, staging = _prepare_output(args)
    train_rows, eval_rows = split_rows(pairs, args.eval_ratio)
    if not train_rows:
        raise UserError(f"{args.data_path}: no training pairs left after holding out the eval split")
    base = convert(source)  # a GGUF is converted once, into the per-user cache (models/source.py)
    given, args = args, dataclasses.replace(args, model_path=str(base.path))
    tok = load_tokenizer(args.model_path)
    train_texts, too_long = _texts(tok, train_rows, args.max_length)
    if not train_texts:
        raise UserError(f"--max_length {args.max_length}: every training pair is longer; raise --max_length")
    device = _device(args.device)
    started = time.time()
    try:
        train_log = _fit(args, tok, train_texts, device, staging)
        held = pair_accuracy(staging, eval_rows, device, args.max_length)
        seen = pair_accuracy(staging, train_rows[:512], device, args.max_length)
        metrics = {
            "pair_accuracy": held["pair_accuracy"],
            "mean_margin": held["mean_margin"],
            "n_eval_pairs": held["n"],
            "train_pair_accuracy": seen["pair_accuracy"],
            "n_train_pairs": len(train_texts),
            "n_dropped_identical": n_identical,
            "n_dropped_too_long": too_long,
            **train_log,
            "seconds": round(time.time() - started, 1),
            "device": device,
            "base_model": base.to_json(),
            "args": asdict(given),
        }
        write_json(staging / METRICS_FILE, metrics)
        claim_folder(staging, "reward model")  # a later --overwrite_output_dir may replace it
        if out.exists():
            shutil.rmtree(out)
        os.replace(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return metrics


def _logging_steps(args: RMTrainArgs, n_pairs: int) -> int:
    """About ten loss records per run, so the first and last loss are different points."""
    per_epoch = math.ceil(n_pairs / (args.batch_size * args.gradient_accumulation_steps))
    total = args.max_steps if args.max_steps > 0 else math.ceil(args.num_train_epochs * per_epoch)
    return max(1, total // 10)


def _fit(args: RMTrainArgs, tok, texts: list[dict], device: str, dest: Path) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForSequenceClassification
    from transformers.utils import logging as hf_logging
    from trl import RewardConfig, RewardTrainer

    from ark_trainer.base.scale import peft_config
    from ark_trainer.core.runtime.monitor import use_console_progress

    use_cpu = device == "cpu"
    bf16 = args.bf16 and not use_cpu
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # its load report lists the new score head as MISSING: expected here
    try:
        model = AutoModelForSequenceClassification.from_pretrained(
            args.model_path,
            num_labels=1,
            use_safetensors=True,
            trust_remote_code=False,
            dtype=torch.bfloat16 if bf16 else torch.float32,
        )
    finally:
        hf_logging.set_verbosity(level)
    model.config.pad_token_id = tok.pad_token_id
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
    config = RewardConfig(
        output_dir=str(dest / "trainer"),
        num_train_epochs=args.num_train_epochs,
        max_steps=args.max_steps,
        learning_rate=args.learning_rate,
        per_device_train_batch_size=args.batch_size,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        lr_scheduler_type="linear",
        warmup_steps=0.05,
        max_length=None,  # over-long pairs are already dropped (and counted) by _texts
        logging_steps=_logging_steps(args, len(texts)),
        save_strategy="no",
        report_to="none",
        seed=args.seed,
        use_cpu=use_cpu,
        bf16=bf16,
        fp16=False,
        gradient_checkpointing=not use_cpu,
        dataloader_num_workers=0,
        disable_tqdm=False,
    )
    trainer = RewardTrainer(
        model=model,
        args=config,
        train_dataset=Dataset.from_list(texts),
        processing_class=tok,
        peft_config=peft_config(
            args.lora_r, args.lora_alpha, args.lora_dropout, args.lora_target_modules, "SEQ_CLS"
        ),
    )
    use_console_progress(trainer, "rm")
    result = trainer.train()
    if args.lora_r > 0:  # merged: the scorer and --rm_model_path load a plain sequence classifier
        peft_model = cast("PeftModel", trainer.model)  # TRL wrapped the model, as peft_config was given
        peft_model.merge_and_unload().save_pretrained(str(dest), safe_serialization=True)
    else:
        trainer.save_model(str(dest))
    tok.save_pretrained(str(dest))
    shutil.rmtree(dest / "trainer", ignore_errors=True)
    (dest / "training_args.bin").unlink(missing_ok=True)  # a pickle; the settings are in rm_metrics.json
    history = [h for h in trainer.state.log_history if "loss" in h]
    return {
        "steps": trainer.state.global_step,
        "train_loss": round(float(result.training_loss), 4),
        "first_loss": round(history[0]["loss"], 4) if history else None,
        "last_loss": round(history[-1]["loss"], 4) if history else None,
    }
