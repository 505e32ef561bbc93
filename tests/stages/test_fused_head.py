"""TRL's fused LM head on CPU scores only the labelled positions (``stages/fused_head.py``): the same loss,
log-probabilities, entropies and gradient as its every-position path, fewer rows through the head, and every
training stage switches it on."""

from __future__ import annotations

import inspect

import torch
import trl.trainer.utils as trl_utils

from ark_trainer.stages.fused_head import score_labelled_positions_on_cpu

PROMPT, ANSWER = 12, 6


def _model():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0,
    )  # fmt: skip
    model = LlamaForCausalLM(config)
    trl_utils.add_fused_lm_head(model, outputs=("log_probs", "entropy", "is_top1"))  # as SFTTrainer does
    return model


def _batch():
    """Three rows of prompt + answer, the loss on the answers only; the last row right-padded by 3."""
    torch.manual_seed(1)
    input_ids = torch.randint(1, 100, (3, PROMPT + ANSWER))
    attention = torch.ones_like(input_ids)
    attention[2, -3:] = 0
    labels = input_ids.masked_fill(attention == 0, -100)
    labels[:, :PROMPT] = -100
    return input_ids, attention, labels


def _pass(model, batch):
    model.zero_grad()
    input_ids, attention, labels = batch
    out = model(input_ids=input_ids, attention_mask=attention, labels=labels, fused_lm_head=True)
    out.loss.backward()
    return out, [p.grad.clone() for p in model.parameters()]


def _rows_through_the_head(monkeypatch) -> list[int]:
    rows: list[int] = []
    original = trl_utils._ChunkedLogProbFunction.apply

    def counted(hidden, *args):
        rows.append(hidden.shape[0])
        return original(hidden, *args)

    monkeypatch.setattr(trl_utils._ChunkedLogProbFunction, "apply", counted)
    return rows


def test_labelled_positions_only_give_the_same_loss_log_probs_and_gradient(monkeypatch):
    model, batch = _model(), _batch()
    rows = _rows_through_the_head(monkeypatch)
    monkeypatch.setattr(trl_utils, "_use_triton", lambda device: False)  # TRL on a CPU: every position
    want, want_grads = _pass(model, batch)
    assert score_labelled_positions_on_cpu()
    got, grads = _pass(model, batch)
    labelled = int((batch[2][:, 1:] != -100).sum())
    assert rows == [3 * (PROMPT + ANSWER - 1), labelled]  # 51 rows, then the 15 labelled ones
    assert torch.allclose(got.loss, want.loss, atol=1e-6)
    for name in ("log_probs", "entropy", "is_top1", "label_mask"):
        assert torch.allclose(getattr(got, name).float(), getattr(want, name).float(), atol=1e-5), name
    for g, w in zip(grads, want_grads, strict=True):
        assert torch.allclose(g, w, atol=1e-6)


def test_the_patch_is_once_and_keeps_other_devices_as_trl_decides(monkeypatch):
    decided: list[str] = []
    monkeypatch.setattr(trl_utils, "_use_triton", lambda device: decided.append(device.type) or False)
    assert score_labelled_positions_on_cpu() and score_labelled_positions_on_cpu()
    switch = trl_utils._use_triton
    assert switch(torch.device("cpu")) is True and decided == []
    assert switch(torch.device("meta")) is False and decided == ["meta"]  # not CPU: TRL's own answer
    score_labelled_positions_on_cpu()
    assert trl_utils._use_triton is switch  # not wrapped twice


def test_trl_reads_the_switch_only_to_choose_the_rows_it_scores():
    """The patch changes one decision in TRL's ``trainer/utils.py``; a TRL that reads the same switch for
    anything else (a Triton kernel) must be looked at again before this patch is kept."""
    source = inspect.getsource(trl_utils)
    uses = [line.strip() for line in source.splitlines() if "_use_triton(" in line]
    assert uses == ["compact = _use_triton(hidden_states.device)"], uses


def test_a_training_stage_scores_only_labelled_positions(assets, tmp_path, monkeypatch):
    """``train --strategy RFT+DPO`` on the tiny model: every pass through TRL's head took the compact path."""
    from ark_trainer.cli import main
    from tests.conftest import train_argv

    monkeypatch.setattr(trl_utils, "_use_triton", lambda device: False)  # TRL as a fresh process finds it
    compact: list[bool] = []
    original = trl_utils._ChunkedLogProbFunction.apply

    def counted(hidden, *args):
        compact.append(bool(trl_utils._use_triton(hidden.device)))
        return original(hidden, *args)

    monkeypatch.setattr(trl_utils._ChunkedLogProbFunction, "apply", counted)
    argv = train_argv(assets, tmp_path / "run", "--strategy", "RFT+DPO", "--eval_auto", "False")
    assert main([*argv, "--max_train_steps", "4"]) == 0
    assert len(compact) >= 2 and all(compact), compact
