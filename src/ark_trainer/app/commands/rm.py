"""``ark-trainer rm train``: train a reward model on preference pairs (see ``stages/reward_model.py``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ark_trainer.app.commands.args import add_command, add_command_group, opt


@dataclass
class RMTrainOptions:
    """The flags of ``rm train``: the fields of ``stages.reward_model.RMTrainArgs``, with their help."""

    data_path: str = opt(None, "JSONL with prompt, chosen, rejected (rft_pairs.jsonl works)", required=True)
    model_path: str = opt(
        None, "base model: a Hugging Face folder, a .gguf file or ollama:NAME[:TAG]", required=True
    )
    output_dir: str = opt(None, "where the reward model and rm_metrics.json go", required=True)
    eval_ratio: float = opt(0.1, "share of prompts held out (default: 0.1)")
    num_train_epochs: float = opt(1.0, "epochs (default: 1)")
    max_steps: int = opt(-1, "optimizer steps; overrides epochs when > 0", low=-1)
    learning_rate: float = opt(1e-5, "(default: 1e-5)")
    batch_size: int = opt(8, "pairs per device step (default: 8)")
    gradient_accumulation_steps: int = opt(1, "(default: 1)")
    max_length: int = opt(1024, "longer pairs are dropped and counted")
    seed: int = opt(0, "(default: 0)")
    device: str = opt("auto", "auto, cpu, cuda or cuda:N (default: auto)")
    bf16: bool = opt(False, "bfloat16 on a GPU")
    overwrite_output_dir: bool = opt(False, "replace a model there")
    lora_r: int = opt(0, "LoRA rank; 0 trains all weights (default: 0)")
    lora_alpha: int | None = opt(None, "LoRA alpha (default: 2 × --lora_r)")
    lora_dropout: float = opt(0.05, "LoRA dropout (default: 0.05)")
    lora_target_modules: str = opt(
        "all-linear", "all-linear or a comma list; the score head always trains in full (default: all-linear)"
    )


def register(sub) -> None:
    actions = add_command_group(
        sub,
        "rm",
        help="reward models: 'rm train' on chosen/rejected pairs (e.g. rft_pairs.jsonl)",
        metavar="SUBCOMMAND",
    )
    add_command(
        actions,
        "train",
        RMTrainOptions,
        _train,
        help="train a Bradley-Terry reward model with TRL's RewardTrainer; report held-out pair accuracy",
        description="Train a reward model on chosen/rejected pairs. The result goes to train --rm_model_path "
        "or to a reward_model grader.",
    )


def _train(args: RMTrainOptions) -> int:
    from ark_trainer.rewards.rm_train import METRICS_FILE, RMTrainArgs, train_reward_model

    rm_args = RMTrainArgs(**asdict(args))
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
