"""RFT (reward fine-tuning): supervised fine-tune on the reward-selected answers.

The answers are sampled, scored and selected by :func:`ark_trainer.scoring.sample_and_select` (best at or
above ``--rft_min_reward`` per prompt, written to ``OUT/data/rft_scored.jsonl`` and ``rft_pairs.jsonl``);
this stage only trains: ``--rft_steps`` with TRL's SFTTrainer into ``OUT/rft/``.
"""

from __future__ import annotations

from pathlib import Path

from ark_trainer.config import TrainConfig
from ark_trainer.distributed import check_replicas
from ark_trainer.monitor import Monitor
from ark_trainer.resume import run_trainer
from ark_trainer.scale import peft_config
from ark_trainer.stages.common import (
    Runtime,
    load_tokenizer,
    save_final,
    stage_callbacks,
    trainer_kwargs,
)


def train_rft(
    cfg: TrainConfig,
    rt: Runtime,
    monitor: Monitor,
    model_path: str,
    sft_rows: list[dict],
    out_dir: Path,
    log_dir: Path,
    final_dir: Path,
) -> Path:
    """Fine-tune on the selected completions with TRL's SFTTrainer; returns the saved model folder."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    tok = load_tokenizer(model_path, rt.trust_remote_code)
    args = SFTConfig(
        **trainer_kwargs(cfg, rt, out_dir, cfg.rft_steps, cfg.rft_learning_rate),
        completion_only_loss=True,
        max_length=None,
    )
    with monitor.stage("rft", total=cfg.rft_steps):
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
        save_final(trainer, tok, final_dir, adapter_only=cfg.save_adapter_only and not cfg.grpo_steps)
    return final_dir
