"""Stage ``echo``: supervised fine-tuning on each training row's first candidate answer, with TRL's
SFTTrainer, through the helper every built-in stage trains with (resume, guards, the final save)."""

from __future__ import annotations

from pathlib import Path

from ark_trainer.stages.registry import Plot


class EchoStage:
    name, label = "echo", "Echo"
    steps_flag, lr_flag = None, "rft_learning_rate"  # the last stage; it reuses RFT's learning rate
    plots = (Plot("echo_loss.png", "loss", "Echo loss"),)

    def run(self, ctx, plan, model_in: str, final_dir: Path) -> str:
        from datasets import Dataset
        from trl import SFTConfig, SFTTrainer

        from ark_trainer.models.loading import load_tokenizer
        from ark_trainer.models.prompts import is_conversational, model_prompt
        from ark_trainer.stages.common import train_and_save, trainer_kwargs

        tok = load_tokenizer(model_in, ctx.rt.trust_remote_code)
        chat = is_conversational(tok)  # TRL takes chat lists for a chat model, text otherwise
        rows = [
            {
                "prompt": model_prompt(r["prompt"], chat),
                "completion": [{"role": "assistant", "content": r["candidates"][0]}]
                if chat
                else r["candidates"][0],
            }
            for r in ctx.train
            if r["candidates"]
        ]
        args = SFTConfig(
            **trainer_kwargs(ctx.cfg, ctx.rt, ctx.out / self.name, plan.steps, plan.learning_rate),
            max_length=None,
        )
        train_and_save(
            ctx, plan, self.name, SFTTrainer, tok, final_dir, model=model_in, args=args,
            train_dataset=Dataset.from_list(rows),
        )  # fmt: skip
        return str(final_dir)  # the next stage (and the evaluation) starts from here
