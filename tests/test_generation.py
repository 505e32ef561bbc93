"""Batched generation (``core/generation.py``): batches sized by tokens, longest first; progress within a batch;
sampling through a vLLM server asks for the RFT settings.
"""

from __future__ import annotations

import json

from ark_trainer.core.generation import plan_batches


def test_batches_hold_a_token_budget_longest_first():
    lengths = [100, 10, 50, 10, 10]
    order = sorted(range(5), key=lambda i: -lengths[i])
    batches = plan_batches(lengths, order, num_samples=2, max_new_tokens=20, batch_size=4, budget=300)
    # 2 samples × (100 + 20) = 240 tokens: one prompt; then 50 and 10 share a batch (2 × 2 × 70 = 280)
    assert batches == [[0], [2, 1], [3, 4]]
    assert sum(batches, []) == order


def test_a_prompt_longer_than_the_budget_still_gets_its_own_batch():
    assert plan_batches([500, 5], [0, 1], 4, 64, 16, budget=100) == [[0], [1]]


def test_generation_ticks_within_a_batch(tmp_path):
    """Progress moves with the decoding steps of a batch, not only when the batch ends."""
    from ark_trainer.core.generation import generate
    from ark_trainer.core.models.device import Runtime
    from ark_trainer.core.models.loading import load_policy
    from ark_trainer.core.runtime.monitor import Monitor
    from tests.conftest import save_tiny_qwen

    model, tok = load_policy(str(save_tiny_qwen(tmp_path / "m")), Runtime("cpu", False, False, []))
    ticks: list[str] = []
    done: list[int] = []
    prompts = [[{"role": "user", "content": f"你好 {i}"}] for i in range(3)]
    generate(model, tok, prompts, max_new_tokens=3, batch_size=2, on_batch=done.append, on_tick=ticks.append)
    assert done == [2, 3] and ticks and ticks[0].startswith("batch 1/2, token 1/3")
    monitor = Monitor(tmp_path, heartbeat=False)
    monitor.tick("batch 1/2, token 1/3")
    monitor.write_heartbeat()
    assert json.loads((tmp_path / "heartbeat.json").read_text())["detail"] == "batch 1/2, token 1/3"
    monitor.progress(2)
    monitor.write_heartbeat()
    assert "detail" not in json.loads((tmp_path / "heartbeat.json").read_text())


def test_sampling_through_a_vllm_server_asks_for_the_rft_settings(tmp_path, monkeypatch):
    """``--use_vllm --vllm_mode server``: one request with RFT's samples, temperature, length and the seed."""
    import trl.generation.vllm_client as vllm_client

    from ark_trainer.base.scale import VLLMSettings
    from ark_trainer.core.generation import Sampler, SamplingSettings
    from ark_trainer.core.models.device import Runtime
    from tests.conftest import save_tiny_qwen

    asked: list[dict] = []

    class FakeClient:
        def __init__(self, host, server_port, connection_timeout):
            asked.append({"host": host, "port": server_port})

        def generate(self, texts, **kwargs):
            asked.append(kwargs)
            return {"completion_ids": [[] for _ in texts for _ in range(kwargs["n"])]}

    monkeypatch.setattr(vllm_client, "VLLMClient", FakeClient)
    vllm = VLLMSettings(True, "server", "10.0.0.1", 8123, 0.3, 1)
    settings = SamplingSettings(num_samples=2, temperature=0.7, max_new_tokens=5, seed=3, vllm=vllm)
    sampler = Sampler(settings, Runtime("cpu", False, False, []), str(save_tiny_qwen(tmp_path / "m")))
    samples = sampler([[{"role": "user", "content": "你好"}]] * 3, seed=9)
    assert sampler.model is None and samples == [["", ""]] * 3
    assert asked[0] == {"host": "10.0.0.1", "port": 8123}
    assert {k: asked[1][k] for k in ("n", "temperature", "max_tokens", "generation_kwargs")} == {
        "n": 2, "temperature": 0.7, "max_tokens": 5, "generation_kwargs": {"seed": 9}
    }  # fmt: skip
