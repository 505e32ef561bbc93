"""Defaults chosen from the model and the data for the flags a run leaves unset (``plan.json: auto_defaults``).

The toy models ark-trainer builds (the demo's, the tests') and a real pretrained checkpoint want different
settings: a QC answer of 14 tokens in the toy's vocabulary is 66 in SmolLM2's, and a learning rate that
moves a 0.2M-parameter model trained from scratch wrecks a pretrained one. So these flags have no fixed
default; :func:`resolve_auto_defaults` picks each from what it measures, and says why:

- ``--max_completion_length``: the data's answers (``candidates``/``answers``, ``chosen``, ``rejected``, a
  text ``reference``, a trailing assistant turn) tokenized by this model's tokenizer: their 95th percentile
  plus ``LENGTH_MARGIN`` (25%), rounded up to a multiple of 8, within ``LENGTH_BOUNDS``; ``LENGTH_FALLBACK``
  (64) when the data holds no answer to measure.
- ``--lora_r``: full fine-tuning (0) unless the weights, gradients and two Adam moments of full fine-tuning
  (``FULL_FT_BYTES_PER_PARAM`` = 16 bytes per parameter in fp32) would take more than ``FULL_FT_MEMORY_SHARE``
  of the device's memory (the machine's RAM on CPU); then LoRA rank ``AUTO_LORA_R`` (4 bytes per parameter
  plus the adapter). Measured on SmolLM2-135M-Instruct on CPU (``bench/lora_cpu.py``, batch 8, on a busy
  machine; ``bench/results/real_demo.md``): full fine-tuning 12.7 s/step and 5.9 GB peak, LoRA rank 16 far
  slower per step (221 s) for 4.4 GB; LoRA saved memory, not time, so it is chosen for memory only. On this
  24 GiB machine the line falls near 700M parameters.
- the precision on CPU (``--mixed_precision auto``, no ``--fp16/--bf16``; :func:`cpu_precision`): bf16
  autocast over fp32 weights for a real model where the CPU computes bf16 natively
  (``scale.native_cpu_bf16``: AVX512-BF16, AMX, Arm BF16), else fp32 (a toy's matrices are too small to
  gain, and emulated bf16 is slower than fp32). It is recorded in ``plan.json`` but not written into the
  config: like ``--device`` it is a resource a resumed run may choose again. On a GPU ``auto`` is decided
  by the GPU (``scale.auto_precision``).
- learning rates: TRL's defaults (SFT 2e-5; GRPO, DPO, KTO, RLOO 1e-6), which ms-swift's and TRL's own
  recipes use for pretrained checkpoints with full fine-tuning, and 10× those with LoRA
  (``config.lora_learning_rates``); an automatic LoRA scales the learning rates the user did not set.
  The demo's toy (its model card, ``ARK_DEMO_MODEL.md``: a model trained from scratch) gets the rates of
  ``presets/demo.yaml`` instead (:func:`toy_settings`, 5e-4, with what each stage's options name in their
  ``toy_reasons``: the DPO loss ``sigmoid,sft``, the RFT threshold), but a stage's ``toy_short_run`` where the
  preset's value suits only the demo's own 300 steps at batch 32 (GRPO at 5e-5 with unscaled advantages): at TRL's rates the demo's reference template (60 steps at batch 8)
  left its task accuracy where it was, 27.0% → 27.0%.

A model counts as a *toy* when it carries the demo's model card (``ARK_DEMO_MODEL.md``) or has fewer than
``REAL_MODEL_PARAMS`` (10M) parameters; the presets tuned for the toy (``presets/demo.yaml``,
``presets/demo_agent.yaml``: learning rates of 5e-4) then apply as written. The same preset given to a real
model is not applied silently: the run warns, and ``plan.json`` records it (``toy_preset``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ark_trainer.base.fileio import read_json

if TYPE_CHECKING:
    from ark_trainer.base.run_options import RunOptions, RunOptionsAfterStages

LENGTH_MARGIN = 0.25
LENGTH_BOUNDS = (32, 1024)
LENGTH_FALLBACK = 64
LENGTH_SAMPLE = 2000  # answers tokenized at most (a spread sample of a larger file)
REAL_MODEL_PARAMS = 10_000_000
FULL_FT_BYTES_PER_PARAM = 16  # fp32 weights + gradients + Adam's two moments
FULL_FT_MEMORY_SHARE = 0.4  # of the device's memory; the rest is activations, logits and everyone else
AUTO_LORA_R = 16
TOY_MODEL_CARD = "ARK_DEMO_MODEL.md"
TOY_PRESETS = ("demo.yaml", "demo_agent.yaml")
TOY_SETTINGS_PRESET = "demo.yaml"  # its learning rates: the demo toy's defaults
AUTO_FLAGS = ("max_completion_length", "lora_r")  # the shared flags chosen here (a stage's: its auto_flags)


def new_tokens(max_completion_length: int | None) -> int:
    """The run's completion length: ``max_completion_length`` (``--max_completion_length`` as resolved,
    ``planning.with_auto_defaults``), or the fixed default where nothing resolved it (a config built without
    the planning)."""
    return int(max_completion_length or LENGTH_FALLBACK)


@dataclass(frozen=True)
class AutoDefault:
    value: Any
    reason: str
    basis: str | None = None  # what a value was sized to, for the checks that read plan.json ("decision")


@dataclass(frozen=True)
class ModelFacts:
    """What the defaults are chosen from: the model's size and whether it is one of our toys."""

    params: int | None
    toy: bool
    why: str  # e.g. "134.5M parameters (model.safetensors)"
    demo: bool = False  # the demo's own toy (its model card): trained from scratch on synthetic data


def parameter_count(model_path: str | Path) -> tuple[int | None, str]:
    """Parameters stored in the folder's safetensors files (headers only), or estimated from config.json."""
    folder = Path(model_path)
    total, files = 0, sorted(folder.glob("*.safetensors"))
    for f in files:
        with f.open("rb") as fh:
            size = int.from_bytes(fh.read(8), "little")
            header = json.loads(fh.read(size))
        for name, meta in header.items():
            if name != "__metadata__":
                total += math.prod(meta.get("shape", []))
    if files:
        return total, ", ".join(f.name for f in files[:2]) + (" ..." if len(files) > 2 else "")
    try:
        cfg = read_json(folder / "config.json")
    except (OSError, ValueError):
        return None, "no safetensors, no readable config.json"
    cfg = cfg.get("text_config", cfg)
    hidden, layers, vocab = (cfg.get(k) for k in ("hidden_size", "num_hidden_layers", "vocab_size"))
    if not all(isinstance(v, int) for v in (hidden, layers, vocab)):
        return None, "config.json names no size"
    inter = cfg.get("intermediate_size") or 4 * hidden
    return layers * (4 * hidden * hidden + 3 * hidden * inter) + vocab * hidden, "estimated from config.json"


def model_facts(model_path: str | Path) -> ModelFacts:
    params, source = parameter_count(model_path)
    size = f"{params / 1e6:.1f}M parameters ({source})" if params is not None else f"size unknown ({source})"
    if (Path(model_path) / TOY_MODEL_CARD).is_file():
        return ModelFacts(params, True, f"ark-trainer's demo toy model ({TOY_MODEL_CARD}), {size}", demo=True)
    if params is not None and params < REAL_MODEL_PARAMS:
        return ModelFacts(params, True, f"a toy model: {size}, under {REAL_MODEL_PARAMS / 1e6:.0f}M")
    return ModelFacts(params, False, f"a real model: {size}")


def answer_texts(rows: list[dict]) -> list[str]:
    """The answers the data carries: what a completion of this task looks like."""
    out: list[str] = []
    for row in rows:
        out += [c for c in row.get("candidates", []) if isinstance(c, str)]
        out += [row[k] for k in ("chosen", "rejected", "completion") if isinstance(row.get(k), str)]
        if isinstance(row.get("reference"), str) and len(row["reference"]) > 1:
            out.append(row["reference"])
    return [t for t in out if t.strip()]


def completion_length(tokenizer, rows: list[dict]) -> AutoDefault:
    texts = answer_texts(rows)
    if not texts:
        return AutoDefault(
            LENGTH_FALLBACK,
            f"{LENGTH_FALLBACK}: the data holds no answer (candidates, chosen, reference) to measure",
        )
    if len(texts) > LENGTH_SAMPLE:
        step = len(texts) / LENGTH_SAMPLE
        texts = [texts[int(i * step)] for i in range(LENGTH_SAMPLE)]
    # the answer as the model writes it: its tokens plus the end-of-turn token
    lengths = sorted(len(ids) + 1 for ids in tokenizer(texts, add_special_tokens=False)["input_ids"])
    p95 = lengths[min(len(lengths) - 1, math.ceil(0.95 * len(lengths)) - 1)]
    lo, hi = LENGTH_BOUNDS
    value = min(max(math.ceil(p95 * (1 + LENGTH_MARGIN) / 8) * 8, lo), hi)
    return AutoDefault(
        value,
        f"{value}: 95% of the data's {len(lengths)} answers take at most {p95} tokens in this model's "
        f"tokenizer (longest {lengths[-1]}); p95 + {LENGTH_MARGIN:.0%}, rounded up to 8, within {lo}..{hi}",
    )


def device_memory(device: str) -> tuple[int | None, str]:
    """Bytes of memory of ``device`` (the machine's RAM on CPU) and its name."""
    if device.startswith("cuda"):
        import torch

        return torch.cuda.get_device_properties(torch.device(device)).total_memory, device
    try:
        kb = next(
            line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")
        )
        return int(kb.split()[1]) * 1024, "RAM"
    except (OSError, StopIteration, ValueError):
        return None, "RAM"


def lora_rank(facts: ModelFacts, device: str) -> AutoDefault:
    memory, where = device_memory(device)
    if facts.params is None or memory is None:
        return AutoDefault(0, "0 (full fine-tuning): the model's size or the device's memory is unknown")
    need = facts.params * FULL_FT_BYTES_PER_PARAM
    gib = 1024**3
    fits = f"{need / gib:.1f} GiB of weights, gradients and Adam moments vs {memory / gib:.0f} GiB {where}"
    if need <= FULL_FT_MEMORY_SHARE * memory:
        return AutoDefault(0, f"0 (full fine-tuning): {fits} (within {FULL_FT_MEMORY_SHARE:.0%})")
    return AutoDefault(
        AUTO_LORA_R,
        f"{AUTO_LORA_R} (LoRA): full fine-tuning would need {fits} (over {FULL_FT_MEMORY_SHARE:.0%})",
    )


def cpu_precision(
    mixed_precision: str, fp16: bool, bf16: bool, facts: ModelFacts, device: str
) -> AutoDefault | None:
    """The precision of ``--mixed_precision auto`` on CPU with no ``--fp16/--bf16`` (the three flags' values):
    ``bf16`` (autocast over fp32 weights) for a real model on a CPU with native bf16, else ``no`` (fp32); None
    where this does not choose (a GPU, an explicit flag)."""
    from ark_trainer.base.scale import native_cpu_bf16

    if device != "cpu" or mixed_precision != "auto" or fp16 or bf16:
        return None
    if facts.toy:
        return AutoDefault("no", f"no (fp32): the fixed default for {facts.why}")
    if not native_cpu_bf16():
        return AutoDefault(
            "no",
            "no (fp32): this CPU has no native bf16 (AVX512-BF16, AMX, Arm BF16); emulated bf16 is slower",
        )
    return AutoDefault(
        "bf16",
        "bf16 (autocast over fp32 weights): this CPU computes bf16 natively (SmolLM2-135M on 2 such cores: "
        "training steps 1.3× and greedy decoding 1.6× as fast as fp32, bench/results/cpu_precision.md)",
    )


def _presets() -> Path:
    from importlib import resources

    return Path(str(resources.files("ark_trainer") / "presets"))


def toy_reasons(options: Sequence[type]) -> dict[str, str]:
    """What goes with the toy's rates, and why: each stage's options' ``toy_reasons`` (the flags besides
    its learning rate the toy takes from ``presets/demo.yaml``, e.g. the DPO loss), merged."""
    return {name: why for cls in options for name, why in getattr(cls, "toy_reasons", {}).items()}


def toy_short_run(options: Sequence[type]) -> dict[str, tuple[Any, str]]:
    """The toy's settings that are not the demo preset's: each stage's options' ``toy_short_run`` (a value
    and why, e.g. GRPO's gentler rate for a short run), merged."""
    return {name: choice for cls in options for name, choice in getattr(cls, "toy_short_run", {}).items()}


def toy_settings(model_path: str | Path | None, options: Sequence[type]) -> dict[str, Any]:
    """The learning rates (and the settings that go with them, :func:`toy_reasons`) of
    ``presets/demo.yaml``, then the stages' own for a short run (:func:`toy_short_run`), when
    ``model_path`` is ark-trainer's demo toy (it carries ``ARK_DEMO_MODEL.md``: trained from scratch, where
    the pretrained checkpoints' rates move nothing); empty for any other model. ``options``: the stages'
    options classes. The config applies them to the flags neither a flag nor ``--config`` set
    (``config.resolve_config``), so what the user sets stays as set."""
    if not model_path or not (Path(model_path) / TOY_MODEL_CARD).is_file():
        return {}
    from ark_trainer.base.yamlsafe import read_yaml_file

    preset = read_yaml_file(_presets() / TOY_SETTINGS_PRESET)
    reasons = toy_reasons(options)
    chosen = {k: v for k, v in preset.items() if k.endswith("_learning_rate") or k in reasons}
    return {**chosen, **{name: value for name, (value, _) in toy_short_run(options).items()}}


def toy_setting_reason(name: str, value: Any, options: Sequence[type]) -> str:
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    short = toy_short_run(options)
    if name in short:
        return f"{shown}: for the demo's toy model outside the demo's own preset; {short[name][1]}"
    why = toy_reasons(options).get(name, "the defaults for pretrained checkpoints leave it where it was")
    return f"{shown}: presets/{TOY_SETTINGS_PRESET}'s, for the demo's toy model trained from scratch; {why}"


def toy_preset(config_path: str | None) -> str | None:
    """The name of the toy-tuned preset ``--config`` points at, if it is one of ours."""
    if not config_path:
        return None
    presets = _presets()
    path = Path(config_path).resolve()
    return path.name if path.parent == presets.resolve() and path.name in TOY_PRESETS else None


def resolve_auto_defaults(
    run: RunOptions, after: RunOptionsAfterStages, tokenizer, rows: list[dict], device: str
) -> tuple[dict[str, AutoDefault], list[str]]:
    """The values of the automatic flags the run's shared flags (``run``, ``after``) leave unset
    (``AUTO_FLAGS``), and warnings to show.

    A toy model keeps the fixed defaults (64 tokens, full fine-tuning): its presets and tests are tuned to them.
    The demo's toy is trained at its preset's learning rates (:func:`toy_settings`), recorded apart
    (:func:`toy_choices`). The precision is chosen apart (:func:`cpu_precision`): it is a resource, not what
    is trained.
    """
    assert run.model_path
    facts = model_facts(run.model_path)
    chosen: dict[str, AutoDefault] = {}
    warnings: list[str] = []
    if run.max_completion_length is None:
        chosen["max_completion_length"] = (
            AutoDefault(LENGTH_FALLBACK, f"{LENGTH_FALLBACK}: the fixed default for {facts.why}")
            if facts.toy
            else completion_length(tokenizer, rows)
        )
    if after.lora_r is None:
        chosen["lora_r"] = (
            AutoDefault(0, f"0 (full fine-tuning): the fixed default for {facts.why}")
            if facts.toy
            else lora_rank(facts, device)
        )
    preset = toy_preset(run.config)
    if preset and not facts.toy:
        warnings.append(
            f"--config: presets/{preset} is tuned for ark-trainer's tiny demo model (learning rates of 5e-4 for "
            f"a 0.2M-parameter model trained from scratch); --model_path is {facts.why}, where those settings "
            "overshoot. Use `ark-trainer demo --base_model PATH` (settings for a real model) or your own config"
        )
    return chosen, warnings


def toy_choices(
    model_path: str | Path, flags: Mapping[str, Any], options: Sequence[type]
) -> dict[str, AutoDefault]:
    """The demo toy's settings (:func:`toy_settings`) the run is trained at, each with its reason: those that
    ``flags`` (the run's flag values by name, ``TrainConfig.flag_items()``) hold, as the config took them for
    the flags neither a flag nor ``--config`` set; ``options``: the stages' options classes."""
    return {
        name: AutoDefault(value, toy_setting_reason(name, value, options))
        for name, value in toy_settings(model_path, options).items()
        if flags.get(name) == value
    }


def describe(chosen: dict[str, AutoDefault], facts: ModelFacts) -> dict[str, Any]:
    """``plan.json``'s ``auto_defaults``: ``{model: ..., flag: {value, reason}}`` (and ``demo_toy: true``
    for the demo's toy, which the report says)."""
    record: dict[str, Any] = {"model": facts.why, **({"demo_toy": True} if facts.demo else {})}
    return {
        **record,
        **{
            k: {"value": v.value, "reason": v.reason, **({"basis": v.basis} if v.basis else {})}
            for k, v in chosen.items()
        },
    }


def choices(record: dict[str, Any]) -> list[tuple[str, Any, str]]:
    """``(flag, value, reason)`` of each choice in ``plan.json``'s ``auto_defaults`` (the model line apart)."""
    return [
        (flag, entry.get("value"), str(entry.get("reason", "")))
        for flag, entry in record.items()
        if flag != "model" and isinstance(entry, dict)
    ]


def announce(record: dict[str, Any], say) -> None:
    """Say each automatic choice and its reason (``say``: a logger's ``info``), once logging is set up."""
    if not record:
        return
    say("automatic choices for %s (plan.json: auto_defaults):", record.get("model", "the model"))
    for flag, _value, reason in choices(record):
        say("  --%s %s", flag, reason)


@dataclass(frozen=True)
class StageFacts:
    """What a stage's automatic defaults are chosen from (its ``auto_defaults`` hook), besides the shared
    flags and its own options: the model's tokenizer and size, the training rows, the run's graders and the
    steps the plan gives the stage."""

    tokenizer: Any
    rows: list[dict]
    components: list  # the run's reward components (``CompositeReward.components``)
    model: ModelFacts
    steps: int  # the stage's planned steps (0 where the plan does not run it, e.g. before auto's probe)
