"""A plain TRL GRPO script: the baseline ``bench/overhead.py`` runs against ``ark-trainer-inner train``.

Only TRL, transformers and datasets, plus the same reward functions the product uses (so both sides
score the same way). The settings mirror what ``ark-trainer-inner train --strategy GRPO --eval_auto False``
passes to ``GRPOConfig`` (see ``ark_trainer.stages.common.trainer_kwargs`` and ``stages/grpo/stage.py``).
Prints one JSON line with its timings: ``{"import_s", "setup_s", "train_s", "train_runtime", "total_s"}``:
``train_runtime`` is transformers' own timer of the training loop (what ark-trainer's TensorBoard events
hold as ``train/train_runtime``), ``train_s`` spans trainer construction, ``train()`` and saving, the span
ark-trainer records as its ``grpo`` stage.

    python bench/plain_trl_grpo.py --model_path M --data_path D.jsonl --output_dir OUT --max_steps 10
"""

from __future__ import annotations

import time

T0 = time.time()

import argparse  # noqa: E402
import json  # noqa: E402

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from ark_trainer.rewards.composite import CompositeReward, preset_path  # noqa: E402


def main() -> None:
    t_import = time.time()
    ap = argparse.ArgumentParser()
    for name, kind, default in (
        ("model_path", str, None),
        ("data_path", str, None),
        ("output_dir", str, None),
        ("max_steps", int, 10),
        ("batch_size", int, 8),
        ("num_generations", int, 4),
        ("max_completion_length", int, 64),
        ("learning_rate", float, 1e-6),
        ("seed", int, 42),
        ("preset", str, "qc"),
    ):
        ap.add_argument(f"--{name}", type=kind, default=default)
    a = ap.parse_args()
    with open(a.data_path, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    # the columns ark-trainer hands the rewards: everything but the prompt and the candidate answers
    dropped = ("question", "candidates", "chosen", "rejected")
    data = [
        {
            "prompt": [{"role": "user", "content": r["question"]}],
            **{k: v for k, v in r.items() if k not in dropped},
        }
        for r in rows
    ]
    tok = AutoTokenizer.from_pretrained(a.model_path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    funcs, weights = CompositeReward.from_spec(preset_path(a.preset)).trl_reward_funcs()
    args = GRPOConfig(
        output_dir=a.output_dir,
        max_steps=a.max_steps,
        learning_rate=a.learning_rate,
        per_device_train_batch_size=a.batch_size,
        gradient_accumulation_steps=1,
        warmup_steps=0.0,
        lr_scheduler_type="linear",
        logging_steps=5,
        save_strategy="no",
        save_total_limit=2,
        seed=a.seed,
        report_to="none",
        use_cpu=not torch.cuda.is_available(),
        fp16=False,  # as ark-trainer with --mixed_precision no (GRPOConfig would default to bf16=True, even on CPU)
        bf16=False,
        dataloader_num_workers=0,
        model_init_kwargs={"dtype": torch.float32, "use_safetensors": True, "trust_remote_code": False},
        num_generations=a.num_generations,
        max_completion_length=a.max_completion_length,
        temperature=1.0,
        beta=0.04,
        loss_type="dapo",
        reward_weights=weights,
    )
    dataset = Dataset.from_list(data)
    t_setup = time.time()
    trainer = GRPOTrainer(
        model=a.model_path, reward_funcs=funcs, args=args, train_dataset=dataset, processing_class=tok
    )
    result = trainer.train()
    trainer.save_model(a.output_dir + "/model")
    tok.save_pretrained(a.output_dir + "/model")
    t_end = time.time()
    print(
        "PLAIN_TIMINGS "
        + json.dumps(
            {
                "import_s": t_import - T0,
                "setup_s": t_setup - t_import,
                "train_s": t_end - t_setup,
                "train_runtime": result.metrics["train_runtime"],
                "total_s": t_end - T0,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
