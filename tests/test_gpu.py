"""GPU checks of the scale features: skipped without a CUDA GPU (CI has none), run by ``scripts/gpu_check.sh``.

Each one trains the tiny model for real on ``cuda:0``: the precision ``--mixed_precision auto`` picks (bf16
or fp16 autocast over fp32 master weights) and what the run records, bf16 weights only when asked for, a NaN
step skipped on the GPU, fp16 with fp32 master weights, bf16 LoRA merged on export, QLoRA where bitsandbytes
is installed and vLLM rollouts where vllm is.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from ark_trainer.cli import main
from tests.test_scale import _args, _events, assets  # noqa: F401 - the module fixture is reused

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _gpu_args(a: dict, out: Path, *extra: str) -> list[str]:
    args = _args(a, out, *extra)
    args[args.index("--device") + 1] = "cuda:0"
    return args


def _load(folder: Path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)


def _saved_dtype(folder: Path) -> str | None:
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    return config.get("dtype", config.get("torch_dtype"))


def test_auto_precision_is_autocast_over_fp32_master_weights(assets, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    assert main(_gpu_args(assets, out, "--mixed_precision", "auto")) == 0
    scale = next(e for e in _events(out) if e["event"] == "scale")
    want = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    assert scale["device"] == "cuda:0" and scale["precision"] == f"{want} autocast, fp32 weights", scale
    assert json.loads((out / "plan.json").read_text())["precision"] == scale["precision"]
    assert f"Precision: {want} autocast, fp32 weights" in (out / "report.md").read_text()
    assert _saved_dtype(out / "model") in ("float32", None)  # trained in fp32 master weights
    model = _load(out / "model")
    assert all(torch.isfinite(p).all() for p in model.parameters())


@pytest.mark.skipif(not torch.cuda.is_bf16_supported(), reason="needs a bf16 GPU")
def test_bf16_weights_only_when_asked_for(assets, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    assert main(_gpu_args(assets, out, "--mixed_precision", "bf16_weights")) == 0
    scale = next(e for e in _events(out) if e["event"] == "scale")
    assert scale["precision"] == "bf16 weights" and _saved_dtype(out / "model") == "bfloat16"


def test_a_nan_step_on_the_gpu_is_skipped_and_the_run_finishes(assets, tmp_path, monkeypatch):  # noqa: F811
    out = tmp_path / "run"
    monkeypatch.setenv("ARK_FAULT", "nan_at_step:2")
    monkeypatch.setenv("ARK_FAULT_STAGE", "grpo")
    steps = ("--max_train_steps", "4", "--rft_steps", "2")  # GRPO: 2 steps
    assert main(_gpu_args(assets, out, "--mixed_precision", "auto", *steps)) == 0
    bad = [e for e in _events(out) if e["event"] == "bad_step"]
    assert [e["step"] for e in bad] == [2] and "autocast, fp32 weights" in bad[0]["precision"]
    assert all(torch.isfinite(p).all() for p in _load(out / "model").parameters())


def test_fp16_keeps_fp32_master_weights_and_finite_training(assets, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    assert main(_gpu_args(assets, out, "--fp16", "True")) == 0
    assert not [e for e in _events(out) if e["event"] == "diverged"]
    config = json.loads((out / "model" / "config.json").read_text(encoding="utf-8"))
    assert config.get("dtype", config.get("torch_dtype")) in ("float32", None)  # master weights stayed fp32


def test_bf16_lora_is_merged_into_a_plain_model(assets, tmp_path):  # noqa: F811
    from safetensors.torch import load_file

    out = tmp_path / "run"
    assert main(_gpu_args(assets, out, "--bf16", "True", "--lora_r", "8")) == 0
    assert not [k for k in load_file(str(out / "model" / "model.safetensors")) if "lora_" in k]
    _load(out / "model")


@pytest.mark.skipif(importlib.util.find_spec("bitsandbytes") is None, reason="needs bitsandbytes")
def test_qlora_trains_adapters_on_a_4bit_base(assets, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    assert main(_gpu_args(assets, out, "--load_in_4bit", "True", "--lora_r", "8", "--bf16", "True")) == 0
    _load(out / "model")


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vllm")
def test_vllm_colocate_rollouts_for_rft_sampling_and_grpo(assets, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    extra = ("--use_vllm", "True", "--vllm_mode", "colocate", "--vllm_gpu_memory_utilization", "0.3")
    assert main(_gpu_args(assets, out, "--bf16", "True", *extra)) == 0
    scale = next(e for e in _events(out) if e["event"] == "scale")
    assert scale["rollouts"].startswith("vllm"), scale
