"""``ark-trainer rm train``: train a reward model on preference pairs (see ``stages/reward_model.py``)."""

from __future__ import annotations

import argparse


def register(sub) -> None:
    rm = sub.add_parser(
        "rm", help="reward models: 'rm train' on chosen/rejected pairs (e.g. rft_pairs.jsonl)"
    )
    rm_sub = rm.add_subparsers(dest="rm_command", metavar="SUBCOMMAND", parser_class=type(rm))
    train = rm_sub.add_parser(
        "train",
        help="train a Bradley-Terry reward model with TRL's RewardTrainer; report held-out pair accuracy",
        description="Train a reward model on chosen/rejected pairs. The result goes to train --rm_model_path "
        "or to a reward_model grader.",
    )
    train.add_argument(
        "--data_path", required=True, help="JSONL with prompt, chosen, rejected (rft_pairs.jsonl works)"
    )
    train.add_argument("--model_path", required=True, help="local Hugging Face base model (safetensors)")
    train.add_argument("--output_dir", required=True, help="where the reward model and rm_metrics.json go")
    train.add_argument(
        "--eval_ratio", type=float, default=0.1, help="share of prompts held out (default: 0.1)"
    )
    train.add_argument("--num_train_epochs", type=float, default=1.0, help="epochs (default: 1)")
    train.add_argument("--max_steps", type=int, default=-1, help="optimizer steps; overrides epochs when > 0")
    train.add_argument("--learning_rate", type=float, default=1e-5, help="(default: 1e-5)")
    train.add_argument("--batch_size", type=int, default=8, help="pairs per device step (default: 8)")
    train.add_argument("--gradient_accumulation_steps", type=int, default=1, help="(default: 1)")
    train.add_argument("--max_length", type=int, default=1024, help="longer pairs are dropped and counted")
    train.add_argument("--seed", type=int, default=0, help="(default: 0)")
    train.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: auto)")
    train.add_argument("--bf16", default="False", metavar="True|False", help="bfloat16 on a GPU")
    train.add_argument(
        "--overwrite_output_dir", default="False", metavar="True|False", help="replace a model there"
    )
    train.add_argument("--lora_r", type=int, default=0, help="LoRA rank; 0 trains all weights (default: 0)")
    train.add_argument("--lora_alpha", type=int, default=None, help="LoRA alpha (default: 2 × --lora_r)")
    train.add_argument("--lora_dropout", type=float, default=0.05, help="LoRA dropout (default: 0.05)")
    train.add_argument(
        "--lora_target_modules",
        default="all-linear",
        help="all-linear or a comma list; the score head always trains in full (default: all-linear)",
    )
    train.set_defaults(func=_train)
    rm.set_defaults(func=lambda _args: _usage(rm))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _train(args: argparse.Namespace) -> int:
    from dataclasses import fields

    from ark_trainer.config import parse_bool
    from ark_trainer.stages.reward_model import METRICS_FILE, RMTrainArgs, train_reward_model

    values = {f.name: getattr(args, f.name) for f in fields(RMTrainArgs)}  # the flags are the fields
    for flag in ("bf16", "overwrite_output_dir"):
        values[flag] = parse_bool(values[flag], f"--{flag}")
    rm_args = RMTrainArgs(**values)
    m = train_reward_model(rm_args)
    acc = m["pair_accuracy"]
    acc_text = (
        f"{acc:.1%} of {m['n_eval_pairs']} held-out pairs" if acc is not None else "n/a (no held-out pairs)"
    )
    print(
        f"reward model: pair accuracy {acc_text} (train {m['train_pair_accuracy']:.1%}), "
        f"{m['n_train_pairs']} training pairs, {m['steps']} steps, loss {m['first_loss']} -> {m['last_loss']}"
    )
    print(
        f"saved to {args.output_dir} ({METRICS_FILE}); use it with: ark-trainer train ... --rm_model_path {args.output_dir}"
    )
    return 0
