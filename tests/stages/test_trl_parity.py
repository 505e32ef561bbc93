"""GRPO's step gradient against stock TRL's: the trainer the stage trains with (``grpo_trainer_class``: the
shared-prompt pass and its regrouped micro-batches, on TRL's compact CPU LM head) and TRL 1.16's own
``GRPOTrainer`` take one optimizer step from the same tiny model, the same seed and the same rewards, for
every ``--loss_type``; each parameter's accumulated gradient must agree to a relative 1e-4.

The step has two micro-batches (gradient accumulation 2) of four rows, from two prompts x four completions,
so TRL's shuffle leaves each group across both micro-batches; completions end early often (the end token is
biased up), so the micro-batches hold different token counts, which is where bnpo's normalisation depends on
the partition. fp32 throughout (TRL's config turns bf16 autocast on by default, which rounds each
micro-batch's matrix products differently). dapo and bnpo run in the fast tier, the other six in the slow."""

from __future__ import annotations

import pytest
import torch

from ark_trainer.stages.grpo.options import LOSS_TYPES
from tests.conftest import save_tiny_qwen

TOLERANCE = 1e-4
FAST = ("dapo", "bnpo")  # the default, and the one whose normaliser depends on the micro-batches
LOSSES = [lt if lt in FAST else pytest.param(lt, marks=pytest.mark.slow) for lt in LOSS_TYPES]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return save_tiny_qwen(
        tmp_path_factory.mktemp("parity") / "model",
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    )  # fmt: skip


def _reward(completions, **kwargs) -> list[float]:
    """A reward that differs between completions: the sum of their characters' codes, modulo 7."""
    return [float(sum(map(ord, c)) % 7) for c in completions]


def _step_gradient(trainer_cls, model_path, out_dir, loss_type: str) -> tuple[dict, list]:
    """(each parameter's gradient as the first optimizer step takes it, the completion ids trained on)."""
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig

    eos = AutoTokenizer.from_pretrained(model_path).eos_token_id
    grads: dict[str, torch.Tensor] = {}

    class Grab(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            grads.update(
                {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
            )

    args = GRPOConfig(
        output_dir=str(out_dir), max_steps=1, learning_rate=1e-3, per_device_train_batch_size=4,
        gradient_accumulation_steps=2, num_generations=4, max_completion_length=8, beta=0.04,
        loss_type=loss_type, max_grad_norm=0.0, use_cpu=True, report_to="none", save_strategy="no",
        seed=5, disable_dropout=True, bf16=False, generation_kwargs={"sequence_bias": [[[eos], 5.0]]},
    )  # fmt: skip
    prompts = ["hello world", "你好 结论：违规", "抱歉 hello", "world 类型：辱骂"]
    trainer = trainer_cls(
        model=str(model_path), reward_funcs=_reward, args=args,
        train_dataset=Dataset.from_list([{"prompt": p} for p in prompts]), callbacks=[Grab()],
    )  # fmt: skip
    batches: list = []
    original = trainer._prepare_inputs

    def recorded(generation_batch):
        inputs = original(generation_batch)
        batches.append(inputs["completion_ids"].tolist())
        return inputs

    trainer._prepare_inputs = recorded
    trainer.train()
    return grads, batches


def _relative_differences(got: dict, want: dict) -> dict[str, float]:
    assert got.keys() == want.keys() and want
    return {n: float((got[n] - want[n]).norm() / want[n].norm().clamp(min=1e-12)) for n in want}


@pytest.mark.parametrize("loss_type", LOSSES)
def test_the_project_s_grpo_step_has_stock_trl_s_gradient(loss_type, tiny_model, tmp_path, monkeypatch):
    import trl.trainer.utils as trl_utils
    from trl import GRPOTrainer
    from trl.kernels.chunked_logprob import _use_triton

    from ark_trainer.stages.fused_head import score_labelled_positions_on_cpu
    from ark_trainer.stages.grpo import shared_prefix
    from ark_trainer.stages.grpo.stage import grpo_trainer_class

    monkeypatch.setattr(trl_utils, "_use_triton", _use_triton)  # stock TRL: its own CPU LM head
    want, trl_batches = _step_gradient(GRPOTrainer, tiny_model, tmp_path / "trl", loss_type)

    shared: list[bool] = []
    original = shared_prefix.shared_prefix_logps
    monkeypatch.setattr(
        shared_prefix, "shared_prefix_logps", lambda *a, **k: shared.append(True) or original(*a, **k)
    )
    score_labelled_positions_on_cpu()  # as train_and_save does (undone by monkeypatch)
    project = grpo_trainer_class(GRPOTrainer, dynamic_sampling_rounds=0, seed=5)
    got, our_batches = _step_gradient(project, tiny_model, tmp_path / "ours", loss_type)

    lengths = {sum(t != 0 for t in row) for batch in trl_batches for row in batch}
    assert len(lengths) > 1, "every completion had the same length: the test would not see bnpo's normaliser"
    assert sorted(map(tuple, sum(our_batches, []))) == sorted(map(tuple, sum(trl_batches, [])))  # same rows
    assert shared, "the shared-prompt pass was not taken"
    worst = max(_relative_differences(got, want).items(), key=lambda item: item[1])
    assert worst[1] <= TOLERANCE, f"{loss_type}: {worst[0]} differs from TRL's gradient by {worst[1]:.2e}"
