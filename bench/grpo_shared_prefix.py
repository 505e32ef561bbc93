"""GRPO step time with each prompt run once per group (``stages/grpo/shared_prefix.py``) against TRL's own
``GRPOTrainer``, the same settings in the same process, one after the other.

Both train the same model from the same seed on the same QC prompts: ``--prompts`` prompts × ``--generations``
answers a step through gradient accumulation (``--batch_size`` answers a micro-batch), ``--completion``
tokens sampled (the QC decision lines), β 0, DAPO loss, the task's exact indicator ``qc_type`` as the reward,
bf16 autocast where ``--bf16``. Each step's time comes from a trainer callback; the first step (warm-up) is
left out of the median. Writes ``bench/results/<--out>.{md,json}``.

    python bench/grpo_shared_prefix.py --model_path OUT/base_model --data_path OUT/data/train.jsonl --steps 4
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import median, write_results  # type: ignore[import-not-found]  # noqa: E402


def qc_dataset(path: str, n: int, conversational: bool) -> list[dict]:
    from ark_trainer.data.loader import load_jsonl
    from ark_trainer.stages.grpo.stage import grpo_rows

    return grpo_rows(load_jsonl(path)[:n], conversational)


def run(trainer_cls, a, rows, tok) -> dict:
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig

    from ark_trainer.rewards.composite import CompositeReward

    reward = CompositeReward.from_spec(None)
    weights = {c.name: float(c.name == "qc_type") for c in reward.components}
    funcs, trl_weights = reward.reweighted(weights).trl_reward_funcs()
    stamps: list[float] = []

    class Stamp(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if not stamps:
                stamps.append(time.perf_counter())

        def on_step_end(self, args, state, control, **kwargs):
            stamps.append(time.perf_counter())

    accumulation = a.prompts * a.generations // a.batch_size
    args = GRPOConfig(
        output_dir=str(Path(a.work) / trainer_cls.__name__), max_steps=a.steps, learning_rate=2e-6,
        per_device_train_batch_size=a.batch_size, gradient_accumulation_steps=accumulation, logging_steps=1,
        save_strategy="no", seed=0, report_to="none", use_cpu=True, bf16=a.bf16, fp16=False,
        model_init_kwargs={"dtype": torch.float32}, num_generations=a.generations,
        max_completion_length=a.completion, temperature=1.0, beta=0.0, loss_type="dapo",
        reward_weights=trl_weights, shuffle_dataset=False, dataloader_num_workers=0,
        gradient_checkpointing=False,  # as ark-trainer trains (TRL's GRPOConfig turns it on by default)
    )  # fmt: skip
    trainer = trainer_cls(
        model=a.model_path, reward_funcs=funcs, args=args, train_dataset=Dataset.from_list(rows),
        processing_class=tok, callbacks=[Stamp()],
    )  # fmt: skip
    trainer.train()
    steps = [b - s for s, b in zip(stamps, stamps[1:], strict=False)]
    logs = [h for h in trainer.state.log_history if "loss" in h]
    return {
        "trainer": trainer_cls.__name__,
        "step_seconds": [round(s, 2) for s in steps],
        "median_step_s": round(median(steps[1:]), 2),
        "reward": [round(h.get("reward", float("nan")), 3) for h in logs],
        "loss": [round(h["loss"], 5) for h in logs],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model_path", required=True)
    ap.add_argument("--data_path", required=True)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--prompts", type=int, default=6)
    ap.add_argument("--generations", type=int, default=4)
    ap.add_argument("--batch_size", type=int, default=8)
    ap.add_argument("--completion", type=int, default=32)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--work", default="/tmp/grpo_shared_prefix")
    ap.add_argument("--out", default="grpo_shared_prefix")
    ap.add_argument("--out_dir", default=None, help="where the results go (default bench/results/)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: says so in the results")
    a = ap.parse_args()
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    from ark_trainer.stages.grpo.shared_prefix import shared_prefix_trainer

    tok = AutoTokenizer.from_pretrained(a.model_path)
    rows = qc_dataset(a.data_path, a.steps * a.prompts, tok.chat_template is not None)
    results = [run(cls, a, rows, tok) for cls in (GRPOTrainer, shared_prefix_trainer(GRPOTrainer))]
    trl_s, shared_s = results[0]["median_step_s"], results[1]["median_step_s"]
    lines = [
        "# GRPO step time: each prompt once per group vs TRL's GRPOTrainer",
        f"{a.prompts} prompts × {a.generations} answers a step ({a.batch_size} a micro-batch), {a.completion} "
        f"tokens sampled, {'bf16 autocast' if a.bf16 else 'fp32'}, {a.steps} steps each (median of steps 2+).",
        "",
        "| trainer | median step (s) | steps (s) | reward per step | loss per step |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in results:
        lines.append(
            f"| {r['trainer']} | {r['median_step_s']} | {r['step_seconds']} | {r['reward']} | {r['loss']} |"
        )
    lines += ["", f"Ratio (TRL / shared): **{trl_s / shared_s:.2f}×**."]
    write_results(
        a.out,
        lines,
        {"args": vars(a), "results": results, "ratio": trl_s / shared_s},
        quick=a.quick,
        out_dir=a.out_dir,
    )
    print(json.dumps({"ratio": round(trl_s / shared_s, 2), "trl": trl_s, "shared": shared_s}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
