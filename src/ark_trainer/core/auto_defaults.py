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
  ``presets/demo.yaml`` instead (:func:`toy_settings`, 5e-4, with its DPO loss ``sigmoid,sft`` and its RFT
  threshold), but GRPO at 5e-5 with unscaled advantages (``TOY_SHORT_RUN``: the preset's rate suits its own
  300 steps at batch 32, not a short run): at TRL's rates the demo's reference template (60 steps at batch 8)
  left its task accuracy where it was, 27.0% → 27.0%.

A model counts as a *toy* when it carries the demo's model card (``ARK_DEMO_MODEL.md``) or has fewer than
``REAL_MODEL_PARAMS`` (10M) parameters; the presets tuned for the toy (``presets/demo.yaml``,
``presets/demo_agent.yaml``: learning rates of 5e-4) then apply as written. The same preset given to a real
model is not applied silently: the run warns, and ``plan.json`` records it (``toy_preset``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ark_trainer.base.fileio import read_json

if TYPE_CHECKING:
    from ark_trainer.base.options.grpo import GRPOOptions
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
# what goes with those rates, and why (the reference template's 60 steps at batch 8 on the demo's toy)
TOY_SETTINGS = {
    "dpo_loss_type": "at 5e-4 plain sigmoid frays the answer format (task accuracy 27.0% → 23.6%; with the "
    "fine-tuning term 27.0% → 46.1%)",
    "rft_min_reward": "RFT keeps only the answers whose verdict and type are right (the reference template's "
    "RFT, n = 89: 43.8% → 61.8% on an AMD EPYC; on an Intel Xeon 62.9% → 52.8%, where seeds 0-2 gave 62.9%)",
}
# The toy's settings that are not the demo preset's: the preset trains GRPO at batch 32 with 8 generations for
# 300 steps; a run of a few dozen steps at a small batch (the reference template: 40 GRPO steps at batch 8)
# collapses at its 5e-4 onto one verdict. Measured on the template after RFT (n = 89): 5e-4 61.8% → 33.7%
# (AMD EPYC), 52.8% → 41.6% (Intel Xeon); these two 61.8% → 62.9% and 52.8% → 59.6%.
TOY_SHORT_RUN = {
    "grpo_learning_rate": (
        5e-5,
        "a tenth of presets/demo.yaml's 5e-4 (that rate suits the demo's 300 steps at batch 32; on the reference "
        "template's 40 steps at batch 8 it collapses GRPO onto one verdict: task accuracy 61.8% → 33.7%, with "
        "this rate and the scaling below 61.8% → 62.9%)",
    ),
    "scale_rewards": (
        "none",
        "Dr. GRPO's unscaled advantages: a group whose verdicts all agree gets advantages as small as its "
        "graders' differences, not full-size ones",
    ),
}
GRPO_AUTO_FLAGS = (
    "grpo_reward_weights",
    "grpo_max_completion_length",
    "grpo_prompts_per_step",
    "grpo_eval_steps",
)
GRPO_EVALS = 4  # evaluations during a GRPO stage on a real model
AUTO_FLAGS = ("max_completion_length", "lora_r", *GRPO_AUTO_FLAGS)
RUN_WEIGHTS = "run"  # --grpo_reward_weights: GRPO is scored by the run's own weights
GRPO_PROMPT_BOUNDS = (4, 16)  # prompts per GRPO optimizer step chosen for a real model
GRPO_PROMPTS_FALLBACK = 8  # ... when the data has no labels to count
DECISION_MIN_LENGTH = 16
DECISION_BASIS = "decision"  # GRPO samples only the decision part of an answer, which its reward reads
INDICATOR_COVERAGE = 0.9  # share of the data a task indicator must grade to be GRPO's reward


def new_tokens(max_completion_length: int | None) -> int:
    """The run's completion length: ``max_completion_length`` (``--max_completion_length`` as resolved,
    ``pipeline.with_auto_defaults``), or the fixed default where nothing resolved it (a config built without
    the pipeline)."""
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


def toy_settings(model_path: str | Path | None) -> dict[str, Any]:
    """The learning rates (and the DPO loss that goes with them) of ``presets/demo.yaml`` when
    ``model_path`` is ark-trainer's demo toy (it carries ``ARK_DEMO_MODEL.md``: trained from scratch, where
    the pretrained checkpoints' rates move nothing); empty for any other model. The config applies them to
    the flags neither a flag nor ``--config`` set (``config.resolve_config``), so what the user sets stays
    as set."""
    if not model_path or not (Path(model_path) / TOY_MODEL_CARD).is_file():
        return {}
    from ark_trainer.base.yamlsafe import read_yaml_file

    preset = read_yaml_file(_presets() / TOY_SETTINGS_PRESET)
    chosen = {k: v for k, v in preset.items() if k.endswith("_learning_rate") or k in TOY_SETTINGS}
    return {**chosen, **{name: value for name, (value, _) in TOY_SHORT_RUN.items()}}


def toy_setting_reason(name: str, value: Any) -> str:
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    if name in TOY_SHORT_RUN:
        return f"{shown}: for the demo's toy model outside the demo's own preset; {TOY_SHORT_RUN[name][1]}"
    why = TOY_SETTINGS.get(name, "the defaults for pretrained checkpoints leave it where it was")
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


def toy_choices(model_path: str | Path, flags: Mapping[str, Any]) -> dict[str, AutoDefault]:
    """The demo toy's settings (:func:`toy_settings`) the run is trained at, each with its reason: those that
    ``flags`` (the run's flag values by name, ``TrainConfig.flag_items()``) hold, as the config took them for
    the flags neither a flag nor ``--config`` set."""
    return {
        name: AutoDefault(value, toy_setting_reason(name, value))
        for name, value in toy_settings(model_path).items()
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


# --- GRPO -----------------------------------------------------------------------------------------------
# What GRPO learns from is the spread of rewards inside each group of answers to one prompt. After RFT the
# reply graders (compliance, satisfaction, format) are near their ceiling: in the run's weighted mean they
# only add small differences that per-group scaling blows up to full-size advantages, and the completions
# spend most of their tokens on a reply the task's decision does not depend on. So for a built-in preset
# whose first grader is the task's decision (the QC verdict) and says which part of an answer it reads
# (``decision_text``), GRPO is scored by that grader alone and samples only that part; several prompts
# (one per label of the data) go into each optimizer step.


def grader_with(fn: Any, name: str) -> Any:
    """The grader (``fn`` or one it wraps: the reward guards keep the grader as ``.fn``) that has the
    attribute ``name`` (e.g. ``decision_text``); else None."""
    for _ in range(4):
        if fn is None or getattr(fn, name, None) is not None:
            break
        fn = getattr(fn, "fn", None)
    return fn if fn is not None and getattr(fn, name, None) is not None else None


def decision_reader(fn: Any) -> Any:
    """The grader's ``decision_text(answer) -> str | None`` (the part of an answer its score depends on),
    through the wrappers a run puts around it; else None."""
    reader = getattr(grader_with(fn, "decision_text"), "decision_text", None)
    return reader if callable(reader) else None


def parse_grpo_weights(spec: str, components: list) -> dict[str, float]:
    """``--grpo_reward_weights`` as weights by name over the run's graders (``run``: theirs, unchanged)."""
    weights = {c.name: c.weight for c in components}
    if spec.strip() == RUN_WEIGHTS:
        return weights
    from ark_trainer.base.ranges import parse_weights

    given = parse_weights(spec, flag="--grpo_reward_weights")
    from ark_trainer.base.errors import UserError

    unknown = [n for n in given if n not in weights]
    if unknown:
        raise UserError(
            f"--grpo_reward_weights: unknown reward {', '.join(map(repr, unknown))}; this run's rewards are "
            f"{', '.join(weights)} (or 'run' for the run's own weights)"
        )
    weights.update(given)
    if sum(weights.values()) <= 0:
        raise UserError("--grpo_reward_weights: at least one reward needs a weight > 0")
    return weights


def task_indicator(components: list, rows: list[dict]) -> Any:
    """The run's grader marked as the task's own 0/1 indicator (``task_indicator``: 1 exactly when the answer
    is what task accuracy counts, e.g. ``qc_type``), if it grades most of ``rows`` (their columns as its
    keyword arguments; a row it cannot grade scores None); else None."""
    sample = rows[:LENGTH_SAMPLE]
    for component in components:
        fn = grader_with(component.fn, "task_indicator")
        if fn is None or not fn.task_indicator or not sample:
            continue
        columns = {
            key: [row.get(key) for row in sample] for key in sample[0] if key not in ("prompt", "messages")
        }
        scores = fn([""] * len(sample), [""] * len(sample), **columns)
        if sum(score is not None for score in scores) >= INDICATOR_COVERAGE * len(sample):
            return component
    return None


def grpo_reward_choice(
    after: RunOptionsAfterStages, components: list, rows: list[dict], facts: ModelFacts
) -> AutoDefault:
    """GRPO's reward. On a real model with the QC preset's graders and labelled data: the task's exact
    indicator alone (``qc_type=1``, the others 0), which also sizes what GRPO samples to the decision lines;
    else the run's own weights (``run``)."""
    if after.env:
        return AutoDefault(RUN_WEIGHTS, "run: with --env the episode's reward is the task's decision")
    if after.reward_config:
        return AutoDefault(RUN_WEIGHTS, "run: your --reward_config's graders and weights")
    if after.reward_weights or after.rm_model_path:
        return AutoDefault(
            RUN_WEIGHTS, "run: the rewards you gave the run (--reward_weights, --rm_model_path)"
        )
    indicator = task_indicator(components, rows)
    if indicator is None:
        return AutoDefault(RUN_WEIGHTS, "run: the run's graders and weights")
    if facts.toy:
        return AutoDefault(
            RUN_WEIGHTS,
            f"run: the run's graders and weights for {facts.why} (on the toy QC demo a decision-only reward "
            "cost the reply's compliance, 100% → 83.7%; docs/real-models.md)",
        )
    weights = ",".join(f"{c.name}={1 if c is indicator else 0}" for c in components)
    return AutoDefault(
        weights,
        f"{weights}: the task's own indicator ({indicator.name}: 1 when the answer is what task accuracy "
        "counts, else 0) for a real model; the run's composite gives part credit (a right verdict with a "
        "wrong type earns half), which on SmolLM2 moved GRPO away from task accuracy (45% → 47% in 40 steps) "
        "while the indicator gave +11 and +13 points in 20 (bench/results/real_demo.md)",
    )


def grpo_completion_length(
    run_length: int,
    after: RunOptionsAfterStages,
    tokenizer,
    rows: list[dict],
    components: list,
    weights: dict,
) -> AutoDefault:
    """What GRPO samples: the whole episode under ``--env``; the decision part of an answer where every
    grader GRPO is scored by says which part it reads; else the run's ``--max_completion_length``
    (``run_length``, as :func:`new_tokens` gives it)."""
    if after.env:
        turns, tool = after.max_turns, after.max_tool_output
        value = min(turns * run_length + (turns - 1) * tool, LENGTH_BOUNDS[1] * 8)
        return AutoDefault(
            value,
            f"{value}: a whole episode, as evaluation allows it: {turns} turns × {run_length} tokens plus "
            f"{turns - 1} tool results of up to {tool} characters (TRL counts the episode, tool results "
            "included, against this budget)",
        )
    readers = [decision_reader(c.fn) for c in components if weights.get(c.name, 0) > 0]
    texts = answer_texts(rows)
    parts = [p for p in (r(t) for r in readers if r for t in texts[:LENGTH_SAMPLE]) if p]
    if not readers or None in readers or not parts:
        return AutoDefault(
            run_length, f"{run_length}: --max_completion_length (GRPO's reward reads the whole answer)"
        )
    lengths = sorted(len(ids) for ids in tokenizer(parts, add_special_tokens=False)["input_ids"])
    p95 = lengths[min(len(lengths) - 1, math.ceil(0.95 * len(lengths)) - 1)]
    value = min(max(math.ceil(p95 * (1 + LENGTH_MARGIN) / 8) * 8, DECISION_MIN_LENGTH), run_length)
    return AutoDefault(
        value,
        f"{value}: GRPO's reward reads only the decision at the start of an answer; 95% of the data's "
        f"{len(lengths)} decisions take at most {p95} tokens (p95 + {LENGTH_MARGIN:.0%}, rounded up to 8); "
        f"evaluation still writes whole answers ({run_length} tokens)",
        basis=DECISION_BASIS,
    )


CLASS_VALUES_MAX = 16  # a reference column with at most this many distinct values ...
CLASS_VALUE_CHARS = 48  # ... each at most this long ...
CLASS_VALUE_REPEATS = 2  # ... and on average this many rows each holds class labels, not answers


def _text(value: object) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def class_references(rows: list[dict]) -> bool:
    """Whether the rows' ``reference`` answers are class labels (``compliant``, ``violation: promised
    refund``): few distinct short values, each repeated across rows, rather than one free answer per row."""
    refs = [ref for row in rows if (ref := _text(row.get("reference"))) is not None]
    distinct = set(refs)
    return (
        2 <= len(distinct) <= CLASS_VALUES_MAX
        and len(refs) >= CLASS_VALUE_REPEATS * len(distinct)
        and all(len(value) <= CLASS_VALUE_CHARS for value in distinct)
    )


def label_column(rows: list[dict]) -> str | None:
    """The column that holds the data's labels: ``label`` where rows have text in it, else ``reference``
    where its values are classes (:func:`class_references`), else None."""
    if any(_text(row.get("label")) for row in rows):
        return "label"
    return "reference" if class_references(rows) else None


def row_label(row: dict, column: str | None) -> str | None:
    """The row's label in ``column`` (:func:`label_column`), stripped; None without one."""
    return _text(row.get(column)) if column else None


def data_labels(rows: list[dict]) -> list[str]:
    """The distinct text labels of the data (``label``, or a class-valued ``reference``), in first-seen
    order."""
    column = label_column(rows)
    seen: dict[str, None] = {}
    for row in rows:
        if (label := row_label(row, column)) is not None:
            seen.setdefault(label, None)
    return list(seen)


def grpo_prompts(run: RunOptions, grpo: GRPOOptions, rows: list[dict], facts: ModelFacts) -> AutoDefault:
    per_batch = max(run.batch_size * run.gradient_accumulation_steps // grpo.num_generations, 1)
    if facts.toy:
        return AutoDefault(
            per_batch, f"{per_batch} (--batch_size / --num_generations): the fixed default for {facts.why}"
        )
    labels = data_labels(rows)
    lo, hi = GRPO_PROMPT_BOUNDS
    if len(labels) < 2:
        value = max(GRPO_PROMPTS_FALLBACK, per_batch)
        return AutoDefault(value, f"{value}: the data has no labels to balance; several prompts a step")
    value = min(max(len(labels), lo, per_batch), hi)
    column = "" if label_column(rows) == "label" else " in its class-valued reference column"
    return AutoDefault(
        value,
        f"{value}: one prompt per label of the data{column} ({len(labels)}: {', '.join(labels[:8])}"
        f"{' ...' if len(labels) > 8 else ''}) in each optimizer step, within {lo}..{hi}, through gradient "
        "accumulation; each step's prompts hold the labels in the data's proportions (stratified), not two "
        "prompts of one kind by chance",
    )


def resolve_grpo_defaults(
    run: RunOptions,
    after: RunOptionsAfterStages,
    grpo: GRPOOptions,
    tokenizer,
    rows: list[dict],
    components: list,
    facts: ModelFacts,
) -> dict[str, AutoDefault]:
    """The GRPO stage's automatic flags its options (``grpo``) leave unset (``GRPO_AUTO_FLAGS``), chosen with
    the run's shared flags (``run``, ``after``)."""
    chosen: dict[str, AutoDefault] = {}
    spec = grpo.grpo_reward_weights
    if spec is None:
        chosen["grpo_reward_weights"] = grpo_reward_choice(after, components, rows, facts)
        spec = chosen["grpo_reward_weights"].value
    weights = parse_grpo_weights(spec, components)
    if grpo.grpo_max_completion_length is None:
        chosen["grpo_max_completion_length"] = grpo_completion_length(
            new_tokens(run.max_completion_length), after, tokenizer, rows, components, weights
        )
    if grpo.grpo_prompts_per_step is None:
        chosen["grpo_prompts_per_step"] = grpo_prompts(run, grpo, rows, facts)
    return chosen


def grpo_accumulation(batch_size: int, num_generations: int, prompts_per_step: int | None) -> tuple[int, int]:
    """(gradient accumulation steps, prompts per step) of the GRPO stage: the smallest accumulation of
    ``batch_size`` completions (``--batch_size``) that holds ``prompts_per_step`` (``--grpo_prompts_per_step``)
    prompts' groups of ``num_generations`` (``--num_generations``), in whole groups."""
    prompts = prompts_per_step or max(batch_size // num_generations, 1)
    steps = max(math.ceil(prompts * num_generations / batch_size), 1)
    while (batch_size * steps) % num_generations:
        steps += 1
    return steps, batch_size * steps // num_generations


def grpo_eval_every(after: RunOptionsAfterStages, steps: int, facts: ModelFacts) -> AutoDefault:
    """How often the GRPO stage evaluates itself (``stages/grpo_eval.py``) over its ``steps``; ``after``
    gives the run's ``--eval_auto`` and ``--env``."""
    if not after.eval_auto:
        return AutoDefault(0, "0 (off): --eval_auto False")
    if facts.toy or after.env:
        what = "an agent run (episodes)" if after.env else facts.why
        return AutoDefault(0, f"0 (off): the fixed default for {what}")
    if steps < 2 * GRPO_EVALS:
        return AutoDefault(
            0,
            f"0 (off): a stage of {steps} steps; its evaluation after the stage decides which model ships "
            "(--final_model)",
        )
    value = math.ceil(steps / GRPO_EVALS)
    return AutoDefault(
        value,
        f"{value}: {GRPO_EVALS} held-out evaluations over the stage's {steps} steps (decision lines only); "
        "the best step is the stage's model",
    )
