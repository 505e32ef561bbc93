"""The precision a run picks for the hardware it finds, emulated without a GPU (torch.cuda monkeypatched).

Default (``--mixed_precision auto``): bf16 autocast over fp32 master weights on a bf16-capable GPU, fp16
autocast over fp32 master weights on an older GPU; on CPU fp32, or bf16 autocast for a real model on a CPU
that computes bf16 natively (chosen with the model, ``auto_defaults.cpu_precision``); pure bf16 weights
only when asked for with ``--mixed_precision bf16_weights``. The CPU's bf16 support is emulated too
(``scale.native_cpu_bf16`` monkeypatched), so the expectations hold on any machine.
"""

from __future__ import annotations

import pytest
import torch

from ark_trainer.core.config import validate
from ark_trainer.core.models.device import resolve_runtime
from ark_trainer.stages.common import trainer_kwargs
from ark_trainer.stages.registry import config_class
from tests.tiny_runs import assets, flags  # noqa: F401 - the module fixture is reused


def fake_gpu(monkeypatch, capability: tuple[int, int] | None) -> None:
    """A machine with one GPU of ``capability`` (bf16 from 8.0, Ampere), or none."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: capability is not None)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1 if capability else 0)
    monkeypatch.setattr(
        torch.cuda, "is_bf16_supported", lambda *a, **k: bool(capability and capability >= (8, 0))
    )
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a, **k: capability)


@pytest.fixture(autouse=True)
def cpu_without_bf16(monkeypatch):
    """By default a CPU without native bf16; a test that wants one patches it to True."""
    from ark_trainer.base import scale

    monkeypatch.setattr(scale, "native_cpu_bf16", lambda: False)


def choice(tmp_path, **flags) -> tuple:
    cfg = config_class()(**flags)
    rt = resolve_runtime(cfg)
    kw = trainer_kwargs(cfg, rt, tmp_path, 1, 1e-5)
    return rt.device, rt.precision, kw["bf16"], kw["fp16"], kw["model_init_kwargs"]["dtype"]


@pytest.mark.parametrize(
    ("capability", "flags", "expected"),
    [
        ((9, 0), {}, ("cuda:0", "bf16 autocast, fp32 weights", True, False, torch.float32)),  # H100/H200
        ((7, 0), {}, ("cuda:0", "fp16 autocast, fp32 weights", False, True, torch.float32)),  # V100
        (None, {}, ("cpu", "fp32", False, False, torch.float32)),
        (
            (9, 0),
            {"mixed_precision": "bf16"},
            ("cuda:0", "bf16 autocast, fp32 weights", True, False, torch.float32),
        ),
        ((9, 0), {"bf16": True}, ("cuda:0", "bf16 autocast, fp32 weights", True, False, torch.float32)),
        (
            (9, 0),
            {"mixed_precision": "bf16_weights"},
            ("cuda:0", "bf16 weights", True, False, torch.bfloat16),
        ),
        ((9, 0), {"mixed_precision": "no"}, ("cuda:0", "fp32", False, False, torch.float32)),
        (
            (9, 0),
            {"mixed_precision": "fp16"},
            ("cuda:0", "fp16 autocast, fp32 weights", False, True, torch.float32),
        ),
        (None, {"mixed_precision": "bf16_weights"}, ("cpu", "fp32", False, False, torch.float32)),
    ],
)
def test_the_default_precision_for_each_kind_of_machine(monkeypatch, tmp_path, capability, flags, expected):
    fake_gpu(monkeypatch, capability)
    assert choice(tmp_path, **flags) == expected


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({}, ("cpu", "fp32", False, False, torch.float32)),  # auto: decided with the model (below)
        ({"mixed_precision": "bf16"}, ("cpu", "bf16 autocast, fp32 weights", True, False, torch.float32)),
        ({"mixed_precision": "bf16_weights"}, ("cpu", "bf16 weights", True, False, torch.bfloat16)),
        ({"bf16": True}, ("cpu", "fp32", False, False, torch.float32)),  # the GPU flags fall back, as ever
        ({"fp16": True}, ("cpu", "fp32", False, False, torch.float32)),
    ],
)
def test_a_cpu_with_native_bf16_honours_mixed_precision_bf16(monkeypatch, tmp_path, flags, expected):
    from ark_trainer.base import scale

    fake_gpu(monkeypatch, None)
    monkeypatch.setattr(scale, "native_cpu_bf16", lambda: True)
    assert choice(tmp_path, **flags) == expected


def test_mixed_precision_bf16_on_a_cpu_without_it_warns_and_trains_in_fp32(monkeypatch):
    fake_gpu(monkeypatch, None)
    rt = resolve_runtime(config_class()(mixed_precision="bf16"))
    assert rt.precision == "fp32"
    assert any("this CPU has no native bf16" in w and "fp32" in w for w in rt.warnings)


@pytest.mark.parametrize(
    ("toy", "native", "flags", "expected"),
    [
        (False, True, {}, ("bf16", "bf16 autocast, fp32 weights")),  # a real model on a bf16 CPU
        (True, True, {}, ("no", "fp32")),  # the toy keeps fp32: its figures are tuned to it
        (False, False, {}, ("no", "fp32")),  # emulated bf16 is slower than fp32
        (False, True, {"mixed_precision": "no"}, (None, "fp32")),  # the user's choice: not decided here
        (False, True, {"bf16": True}, (None, "fp32")),
    ],
)
def test_auto_on_cpu_is_chosen_with_the_model(monkeypatch, toy, native, flags, expected):
    from ark_trainer.base import scale
    from ark_trainer.core.auto_defaults import ModelFacts
    from ark_trainer.services.planning import with_cpu_precision

    fake_gpu(monkeypatch, None)
    monkeypatch.setattr(scale, "native_cpu_bf16", lambda: native)
    facts = ModelFacts(1 if toy else 10**9, toy, "a toy model" if toy else "a real model")
    monkeypatch.setattr("ark_trainer.core.auto_defaults.model_facts", lambda path: facts)
    cfg = config_class()(**flags)
    auto: dict = {}
    rt = with_cpu_precision(cfg, resolve_runtime(cfg), auto, "unused")
    value, precision = expected
    assert auto.get("mixed_precision", {}).get("value") == value and rt.precision == precision
    assert cfg.mixed_precision == flags.get("mixed_precision", "auto")  # a resource: run.yaml keeps "auto"


def test_the_cpu_flags_say_whether_bf16_is_native():
    from ark_trainer.base.scale import cpuinfo_has_bf16

    assert cpuinfo_has_bf16("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512_bf16 avx512_vnni\n")
    assert cpuinfo_has_bf16("processor\t: 0\nflags\t\t: fpu avx512f amx_bf16 amx_tile\n")  # AMX
    assert cpuinfo_has_bf16("processor\t: 0\nFeatures\t: fp asimd bf16 i8mm\n")  # Arm
    assert not cpuinfo_has_bf16("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512bw\n")
    assert not cpuinfo_has_bf16("model name\t: bf16 in a name is no flag\n")


def test_bf16_weights_is_a_known_value_and_fp8_is_not():
    cfg = config_class()(model_path="m", data_path="d", output_dir="o", mixed_precision="BF16_Weights")
    validate(cfg)
    assert cfg.mixed_precision == "bf16_weights"
    from ark_trainer.base.errors import UserError

    with pytest.raises(UserError, match="bf16_weights"):
        validate(config_class()(model_path="m", data_path="d", output_dir="o", mixed_precision="fp8"))


def test_the_run_records_its_precision(monkeypatch, tmp_path):
    """plan.json and the ``scale`` event say which precision the run trained in (here: CPU, fp32)."""
    from ark_trainer.base.scale import SUMMARY_FLAGS, scale_summary

    fake_gpu(monkeypatch, (9, 0))
    cfg = config_class()()
    rt = resolve_runtime(cfg)
    flags = {name: getattr(cfg, name) for name in SUMMARY_FLAGS}
    assert scale_summary(rt, 1, **flags)["precision"] == "bf16 autocast, fp32 weights"


# --- generation on a GPU: the automatic choice (measured by bench/gpu_generation.py) ---
@pytest.mark.parametrize(
    ("device", "batch", "accum", "flags", "expected"),
    [
        ("cpu", 16, 1, {}, {}),  # CPU: TRL's defaults, unchanged
        ("cuda:0", 16, 1, {}, {"steps_per_generation": 4}),  # 64 sequences per generate call
        ("cuda:0", 8, 2, {}, {"steps_per_generation": 8}),  # whole accumulation cycles only
        ("cuda:0", 128, 1, {}, {}),  # already large enough
        ("cuda:0", 16, 1, {"use_vllm": True}, {}),  # vLLM generates
        ("cuda:0", 16, 1, {"rollout_steps": 1}, {}),  # --rollout_steps 1: TRL's default on a GPU too
        ("cpu", 8, 2, {"rollout_steps": 3}, {"steps_per_generation": 6}),  # --rollout_steps 3, anywhere
    ],
)
def test_rollouts_generate_several_steps_at_once_on_a_gpu_only(
    tmp_path, device, batch, accum, flags, expected
):
    from trl import GRPOConfig

    from ark_trainer.base.scale import rollout_kwargs

    cfg = config_class()(batch_size=batch, gradient_accumulation_steps=accum, num_generations=8, **flags)
    kwargs = rollout_kwargs(
        device, cfg.rollout_steps, cfg.batch_size, cfg.gradient_accumulation_steps, cfg.use_vllm
    )
    assert kwargs == expected
    args = GRPOConfig(  # TRL accepts it: whole prompt groups per generation batch
        output_dir=str(tmp_path), per_device_train_batch_size=batch, gradient_accumulation_steps=accum,
        num_generations=8, use_cpu=True, report_to="none", **kwargs,
    )  # fmt: skip
    assert args.generation_batch_size == batch * kwargs.get("steps_per_generation", accum)


def test_rollout_steps_must_be_positive():
    from ark_trainer.base.errors import UserError

    with pytest.raises(UserError, match=r"--rollout_steps: must be in \[1, 64\], got 0"):
        validate(config_class()(model_path="m", data_path="d", output_dir="o", rollout_steps=0))


def test_evaluation_decodes_more_prompts_per_call_on_a_gpu():
    from ark_trainer.base.scale import generation_batch

    assert generation_batch("cpu", 32) == 32 and generation_batch("cuda:0", 32) == 128


@pytest.mark.slow
def test_a_grpo_run_with_rollout_steps_trains_and_records_it(assets, tmp_path):  # noqa: F811
    import json

    from ark_trainer.cli import main

    out = tmp_path / "run"
    assert main(["train", *flags(assets, out, "GRPO"), "--rollout_steps", "2"]) == 0
    events = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines()]
    scale = next(e for e in events if e["event"] == "scale")
    assert scale["steps_per_generation"] == 2 and scale["precision"] == "fp32"
    state = json.loads((out / "grpo" / "checkpoint-4" / "trainer_state.json").read_text())
    assert state["global_step"] == 4


def test_the_cpu_class_names_the_docs_time_column():
    """bf16 where the CPU computes it natively, else the widest kernel path torch runs (what doctor prints)."""
    from ark_trainer.base.scale import CPU_CLASSES, cpu_class, cpu_class_of

    avx512_bf16 = "flags\t\t: fpu avx2 avx512f avx512_bf16\n"
    avx512 = "flags\t\t: fpu avx2 avx512f avx512bw\n"
    avx2 = "flags\t\t: fpu sse avx2 fma\n"
    assert cpu_class_of("AVX512", avx512_bf16) == "bf16"
    assert cpu_class_of("AVX2", "flags\t\t: fpu avx2 amx_bf16\n") == "bf16"  # bf16 decides, whatever the path
    assert cpu_class_of("AVX512", avx512) == "AVX-512 fp32"
    assert cpu_class_of("AVX2", avx512) == "AVX2 fp32"  # ATEN_CPU_CAPABILITY=avx2 on an AVX-512 CPU
    assert cpu_class_of("AVX2", avx2) == "AVX2 fp32"
    assert cpu_class_of("DEFAULT", avx2) == "fp32 without AVX2"
    assert cpu_class_of("ZVECTOR", "") == "fp32 without AVX2"
    name, found = cpu_class()  # this machine
    assert name in CPU_CLASSES and found.startswith("torch's kernels: ")
