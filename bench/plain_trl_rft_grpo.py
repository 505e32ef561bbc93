"""Raw TRL RFT+GRPO: the baseline ``bench/real_model.py`` runs against ``ark-trainer train --strategy RFT+GRPO``.

Only TRL, transformers and datasets plus the product's QC reward functions (so both sides score alike):
each row's candidate answers scored with the QC preset, the best one at or above ``--rft_min_reward`` kept,
``SFTTrainer`` on those (prompt-completion, loss on the completion), then ``GRPOTrainer`` from its result.
The settings mirror what ``train`` passes (``stages/common.trainer_kwargs``, ``stages/rft/stage.py``,
``stages/grpo/stage.py``), gradient checkpointing off. Prints one JSON line: ``{"rft_runtime", "grpo_runtime"}``
(transformers' ``train_runtime`` of each trainer).

    python bench/plain_trl_rft_grpo.py --model_path M --data_path D.jsonl --output_dir OUT --rft_steps 8
"""

from __future__ import annotations

import argparse
import json

import torch
from datasets import Dataset
from transformers import AutoTokenizer
from trl import GRPOConfig, GRPOTrainer, SFTConfig, SFTTrainer

from ark_trainer.rewards.composite import TOTAL, CompositeReward, preset_path


def main() -> None:
    ap = argparse.ArgumentParser()
    for name, kind, default in (
        ("model_path", str, None), ("data_path", str, None), ("output_dir", str, None),
        ("rft_steps", int, 8), ("grpo_steps", int, 3), ("batch_size", int, 8), ("num_generations", int, 4),
        ("max_completion_length", int, 96), ("rft_learning_rate", float, 1e-4),
        ("grpo_learning_rate", float, 1e-6), ("rft_min_reward", float, 0.9), ("seed", int, 0),
    ):  # fmt: skip
        ap.add_argument(f"--{name}", type=kind, default=default)
    ap.add_argument(
        "--bf16", action="store_true", help="bf16 autocast over fp32 weights (as train under bf16)"
    )
    a = ap.parse_args()
    with open(a.data_path, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    reward = CompositeReward.from_spec(preset_path("qc"))
    columns = [{k: v for k, v in r.items() if k not in ("question", "candidates")} for r in rows]
    sft = []
    for row, cols in zip(rows, columns, strict=True):
        cands = row.get("candidates", [])
        if not cands:
            continue
        prompt = [{"role": "user", "content": row["question"]}]
        table = reward.score([prompt] * len(cands), cands, **{k: [v] * len(cands) for k, v in cols.items()})
        best = max(range(len(cands)), key=lambda i: table[TOTAL][i] if table[TOTAL][i] is not None else -1)
        if table[TOTAL][best] is not None and table[TOTAL][best] >= a.rft_min_reward:
            sft.append({"prompt": prompt, "completion": [{"role": "assistant", "content": cands[best]}]})
    tok = AutoTokenizer.from_pretrained(a.model_path)
    shared = {
        "per_device_train_batch_size": a.batch_size, "gradient_accumulation_steps": 1, "warmup_steps": 0.0,
        "lr_scheduler_type": "linear", "logging_steps": 1, "save_strategy": "no", "seed": a.seed,
        "report_to": "none", "use_cpu": not torch.cuda.is_available(), "fp16": False, "bf16": a.bf16,
        "dataloader_num_workers": 0, "gradient_checkpointing": False,
        "model_init_kwargs": {"dtype": torch.float32, "use_safetensors": True, "trust_remote_code": False},
    }  # fmt: skip
    sft_args = SFTConfig(
        output_dir=a.output_dir + "/rft", max_steps=a.rft_steps, learning_rate=a.rft_learning_rate,
        completion_only_loss=True, max_length=None, **shared,
    )  # fmt: skip
    trainer = SFTTrainer(
        model=a.model_path, args=sft_args, train_dataset=Dataset.from_list(sft), processing_class=tok
    )
    rft_runtime = trainer.train().metrics["train_runtime"]
    trainer.save_model(a.output_dir + "/rft/final")
    tok.save_pretrained(a.output_dir + "/rft/final")
    funcs, weights = reward.trl_reward_funcs()
    grpo_args = GRPOConfig(
        output_dir=a.output_dir + "/grpo", max_steps=a.grpo_steps, learning_rate=a.grpo_learning_rate,
        num_generations=a.num_generations, max_completion_length=a.max_completion_length, temperature=1.0,
        beta=0.0, loss_type="dapo", reward_weights=weights, **shared,
    )  # fmt: skip
    data = [
        {"prompt": [{"role": "user", "content": r["question"]}], **c}
        for r, c in zip(rows, columns, strict=True)
    ]
    grpo = GRPOTrainer(
        model=a.output_dir + "/rft/final", reward_funcs=funcs, args=grpo_args,
        train_dataset=Dataset.from_list(data), processing_class=tok,
    )  # fmt: skip
    grpo_runtime = grpo.train().metrics["train_runtime"]
    print(
        json.dumps({"rft_runtime": rft_runtime, "grpo_runtime": grpo_runtime, "n_sft": len(sft)}), flush=True
    )


if __name__ == "__main__":
    main()
