"""The warm-up of every stage (``stages/common.py``): its first optimizer step already moves the weights."""

from __future__ import annotations

import pytest

from ark_trainer.stages.common import first_step_warm, warm_from_step_one, warmup_steps


def test_a_5_percent_warm_up_of_40_steps_starts_above_zero_and_decays_as_before():
    factor = warm_from_step_one(warmup_steps(0.05, 40), 40)
    lrs = [factor(step) for step in range(40)]
    assert lrs[:3] == pytest.approx([1 / 3, 2 / 3, 1.0])  # transformers': 0, 0.5, 1.0
    assert lrs[2:] == pytest.approx([(40 - s) / 38 for s in range(2, 40)])  # the same linear decay after it
    assert min(lrs) > 0


def test_the_first_optimizer_step_of_a_warmed_up_stage_changes_the_weights(tmp_path):
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, Trainer, TrainerCallback, TrainingArguments

    from tests.conftest import save_tiny_qwen

    model = AutoModelForCausalLM.from_pretrained(save_tiny_qwen(tmp_path / "model"))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    after_first: dict[str, torch.Tensor] = {}
    rates: list[float] = []

    class FirstStep(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, lr_scheduler=None, **kwargs):
            if state.global_step == 1:
                after_first.update({n: p.detach().clone() for n, p in model.named_parameters()})
            rates.append(lr_scheduler.get_last_lr()[0])

    ids = [[5, 6, 7, 8, 9, 10]] * 4
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=4, warmup_steps=2, learning_rate=1e-2,
        lr_scheduler_type="linear", per_device_train_batch_size=2, use_cpu=True, report_to="none",
        save_strategy="no", bf16=False,
    )  # fmt: skip
    data = Dataset.from_list([{"input_ids": i, "labels": i} for i in ids])
    first_step_warm(Trainer)(model=model, args=args, train_dataset=data, callbacks=[FirstStep()]).train()
    assert any(not torch.equal(after_first[n], before[n]) for n in before), (
        "step 1 left the weights as they were"
    )
    assert rates == pytest.approx([2e-2 / 3, 1e-2, 5e-3, 0.0])  # the factor of the next step, as logged


def test_a_resumed_schedule_goes_on_where_it_stopped():
    """A checkpoint holds the scheduler's state, not its factor (a closure): the resumed trainer makes the
    same factor again and the loaded state puts it at the step it stopped on."""
    import torch
    from torch.optim.lr_scheduler import LambdaLR

    def schedule():
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
        return optimizer, LambdaLR(optimizer, warm_from_step_one(2, 6))

    optimizer, straight = schedule()
    rates = []
    for _ in range(6):
        rates.append(straight.get_last_lr()[0])
        optimizer.step()
        straight.step()
    optimizer, first = schedule()
    for _ in range(3):
        optimizer.step()
        first.step()
    optimizer, resumed = schedule()
    resumed.load_state_dict(first.state_dict())
    optimizer.param_groups[0]["lr"] = resumed.get_last_lr()[0]  # as the optimizer's own state restores it
    after = []
    for _ in range(3):
        after.append(resumed.get_last_lr()[0])
        optimizer.step()
        resumed.step()
    assert rates == pytest.approx([0.1 / 3, 0.2 / 3, 0.1, 0.075, 0.05, 0.025]) and after == pytest.approx(
        rates[3:]
    )
