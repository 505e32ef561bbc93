"""GRPO's log-probabilities with each prompt run once per group (``stages/grpo/shared_prefix.py``): the same
log-probabilities, entropies and gradient as TRL's one pass over every row, micro-batches that hold whole
groups, and TRL's own path wherever sharing does not apply."""

from __future__ import annotations

import pytest
import torch

from ark_trainer.stages.grpo.shared_prefix import regrouped, shared_prefix_logps

PROMPT, COMPLETION, GROUP = 10, 5, 3


def _model(kind: str):
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    config_cls, model_cls = {
        "llama": (LlamaConfig, LlamaForCausalLM),
        "qwen2": (Qwen2Config, Qwen2ForCausalLM),
    }[kind]
    torch.manual_seed(0)
    config = config_cls(
        vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, pad_token_id=0,
    )  # fmt: skip
    model = model_cls(config)
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))  # as GRPOTrainer does
    return model


def _batch(prompts: int = 2, group: int = GROUP):
    """``prompts`` prompts (the second left-padded) × ``group`` completions each (one ended early)."""
    torch.manual_seed(1)
    ids = torch.randint(1, 100, (prompts, PROMPT))
    mask = torch.ones(prompts, PROMPT, dtype=torch.long)
    ids[1, :3], mask[1, :3] = 0, 0
    input_ids = torch.cat(
        [ids.repeat_interleave(group, 0), torch.randint(1, 100, (prompts * group, COMPLETION))], 1
    )
    attention = torch.cat(
        [mask.repeat_interleave(group, 0), torch.ones(prompts * group, COMPLETION, dtype=torch.long)], 1
    )
    attention[1, -2:] = 0  # this completion ended two tokens early
    return input_ids, attention


def _trl_pass(model, input_ids, attention):
    """TRL's own: every row, prompt and completion, in one forward pass."""
    labels = input_ids.masked_fill(attention == 0, -100)
    labels[:, :-COMPLETION] = -100
    out = model(input_ids=input_ids, attention_mask=attention, labels=labels, fused_lm_head=True)
    return out.log_probs[:, -COMPLETION:], out.entropy[:, -COMPLETION:]


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_shared_prompts_give_trl_s_log_probs_entropies_and_gradient(kind):
    model = _model(kind)
    input_ids, attention = _batch()
    want_logps, want_entropy = _trl_pass(model, input_ids, attention)
    (want_logps * attention[:, -COMPLETION:]).sum().backward()
    want_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    logps, entropy = shared_prefix_logps(model, input_ids, attention, COMPLETION, compute_entropy=True)
    (logps * attention[:, -COMPLETION:]).sum().backward()
    assert torch.allclose(logps, want_logps, atol=1e-5) and torch.allclose(entropy, want_entropy, atol=1e-5)
    for got, want in zip((p.grad for p in model.parameters()), want_grads, strict=True):
        assert torch.allclose(got, want, atol=1e-5)
    assert logps.shape == (2 * GROUP, COMPLETION)


def test_trl_s_path_where_nothing_is_shared_or_the_cache_is_dropped():
    model = _model("llama")
    distinct = _batch(prompts=4, group=1)  # no prompt repeats
    assert shared_prefix_logps(model, *distinct, COMPLETION, compute_entropy=False) is None
    model.gradient_checkpointing_enable()  # which drops the key/value cache
    assert shared_prefix_logps(model, *_batch(), COMPLETION, compute_entropy=False) is None


def test_micro_batches_are_regrouped_to_hold_whole_groups():
    input_ids, attention = _batch(prompts=2, group=4)
    rows = torch.arange(8)
    shuffled = torch.tensor([3, 6, 0, 5, 7, 1, 2, 4])  # as TRL shuffles a generation batch
    batch = {
        "prompt_ids": input_ids[shuffled, :PROMPT],
        "prompt_mask": attention[shuffled, :PROMPT],
        "advantages": rows[shuffled].float(),
        "row": [int(i) for i in rows[shuffled]],
        "num_items_in_batch": torch.tensor(40),  # a scalar: not split
    }
    from trl.trainer.utils import split_tensor_dict

    out = regrouped(split_tensor_dict(batch, 2))  # TRL's two micro-batches, each with both prompts' rows
    assert [sorted(b["row"]) for b in out] == [[0, 1, 2, 3], [4, 5, 6, 7]]  # one prompt per micro-batch
    assert all(torch.equal(b["advantages"], torch.tensor(b["row"]).float()) for b in out)  # rows kept whole
    assert all(int(b["num_items_in_batch"]) == 40 for b in out)


def test_a_grpo_run_takes_the_shared_path(assets, tmp_path, monkeypatch):
    """``train --strategy GRPO`` on the tiny model: every loss pass of its micro-batches shares the prompts."""
    from ark_trainer.cli import main
    from ark_trainer.stages.grpo import shared_prefix
    from tests.conftest import train_argv

    taken: list[bool] = []
    original = shared_prefix.shared_prefix_logps

    def counted(*args, **kwargs):
        result = original(*args, **kwargs)
        taken.append(result is not None)
        return result

    monkeypatch.setattr(shared_prefix, "shared_prefix_logps", counted)
    argv = train_argv(assets, tmp_path / "run", "--strategy", "GRPO", "--eval_auto", "False")
    assert (
        main([*argv, "--batch_size", "4", "--num_generations", "2", "--gradient_accumulation_steps", "2"])
        == 0
    )
    assert len(taken) >= 2 and all(taken), taken  # a loss pass a step at least, each one shared


@pytest.mark.parametrize(
    "loss_type, quantile, iterations, expected",
    [("dapo", 1.0, 1, True), ("grpo", 1.0, 1, True), ("bnpo", 1.0, 1, False), ("dapo", 0.8, 1, False),
     ("dapo", 1.0, 2, False)],
)  # fmt: skip
def test_only_a_loss_that_ignores_the_partition_is_regrouped(loss_type, quantile, iterations, expected):
    """bnpo divides each micro-batch by its own tokens, an entropy quantile masks by each micro-batch's
    entropies, a second iteration reuses the micro-batches: TRL's random partition stays for those."""
    from types import SimpleNamespace

    from ark_trainer.stages.grpo.shared_prefix import regroupable

    args = SimpleNamespace(steps_per_generation=2, gradient_accumulation_steps=2)
    trainer = SimpleNamespace(
        num_iterations=iterations, args=args, loss_type=loss_type, top_entropy_quantile=quantile
    )
    assert regroupable(trainer) is expected
