"""Stage ``echo``: supervised fine-tuning on each training row's first candidate answer, with TRL's
SFTTrainer, through the helper every built-in stage trains with (resume, guards, the final save)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ark_trainer.base.flags import flag
from ark_trainer.base.ranges import Range
from ark_trainer.stages.registry import Plot


@dataclass(frozen=True)
class EchoOptions:
    """The stage's own flags: in ``train --help`` (under "Echo"), ``--config`` and ``run.yaml``; at run time
    the stage is handed an instance (``ctx.options``)."""

    echo_candidate: int = flag(
        0,
        "which candidate answer of each row Echo trains on (0: the first)",
        group="Echo",
        range=Range(0, 16),
    )


class EchoStage:
    name, label = "echo", "Echo"
    options = EchoOptions
    steps_flag, lr_flag = None, "rft_learning_rate"  # the last stage; it reuses RFT's learning rate
    plots = (Plot("echo_loss.png", "loss", "Echo loss"),)

    def run(self, ctx, plan, model_in: str, final_dir: Path) -> str:
        from datasets import Dataset
        from trl import SFTConfig, SFTTrainer

        from ark_trainer.core.models.loading import load_tokenizer
        from ark_trainer.core.models.prompts import is_conversational, model_prompt
        from ark_trainer.stages.common import train_and_save, trainer_kwargs

        tok = load_tokenizer(model_in, ctx.rt.trust_remote_code)
        chat = is_conversational(tok)  # TRL takes chat lists for a chat model, text otherwise
        pick = ctx.options.echo_candidate  # its own options; the shared run flags are ctx.run
        rows = [
            {
                "prompt": model_prompt(r["prompt"], chat),
                "completion": [{"role": "assistant", "content": _pick(r["candidates"], pick)}]
                if chat
                else _pick(r["candidates"], pick),
            }
            for r in ctx.train
            if r["candidates"]
        ]
        args = SFTConfig(
            **trainer_kwargs(ctx.run, ctx.rt, ctx.out / self.name, plan.steps, plan.learning_rate),
            max_length=None,
        )
        train_and_save(
            ctx, plan, self.name, SFTTrainer, tok, final_dir, model=model_in, args=args,
            train_dataset=Dataset.from_list(rows),
        )  # fmt: skip
        return str(final_dir)  # the next stage (and the evaluation) starts from here


def _pick(candidates: list[str], index: int) -> str:
    return candidates[min(index, len(candidates) - 1)]
