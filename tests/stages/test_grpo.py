"""GRPO (``stages/grpo/stage.py``): it samples and scores one policy (no dropout), and it learns on the real model
(slow tier): SmolLM2-135M-Instruct's Q4_1 GGUF, ``train --strategy GRPO`` with a regex grader, and the sampled
reward of the training prompts before and after.

The GGUF comes from ``scripts/setup_models.sh`` (skipped without it, failed under ARK_REQUIRE_MODELS=1).
"""

from __future__ import annotations

import json

import pytest

# "Describe a X." prompts where SmolLM2 starts its answer with "The" some of the time, not always or never
PROMPTS = [
    "Describe a tree.",
    "Describe a river.",
    "Describe a mountain.",
    "Describe a city.",
    "Describe a house.",
    "Describe a cat.",
    "Describe a car.",
    "What is the sky like?",
]
PATTERN = r"^\s*The\b"  # the reward: 1 when the answer's first word is "The", else 0
REWARDS = f"graders:\n  - name: starts_with_the\n    type: regex\n    pattern: {json.dumps(PATTERN)}\n"
SAMPLES = 16  # answers sampled per prompt for the measurement (temperature 1.0)
NEW_TOKENS = 2  # the first word decides the reward; two tokens tell "The" from "There"/"Theo..."


def sampled_reward(folder) -> float:
    """Mean reward of ``SAMPLES`` answers per prompt, sampled at temperature 1.0 with a fixed seed."""
    import regex
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ark_trainer.core.generation import generate

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    chats = [[{"role": "user", "content": p}] for p in PROMPTS]
    answers = generate(
        model, tok, chats, num_samples=SAMPLES, temperature=1.0, max_new_tokens=NEW_TOKENS, seed=0
    )
    scores = [float(regex.search(PATTERN, a) is not None) for group in answers for a in group]
    return sum(scores) / len(scores)


@pytest.mark.slow
def test_grpo_raises_the_sampled_reward_of_smollm2(tmp_path, smollm2_converted):
    """Four GRPO steps (2 prompts × 4 answers of 8 tokens a step, full fine-tuning at 2e-5, no KL) raise the
    share of answers starting with "The" on the 8 training prompts from about 0.3-0.4 to about 0.7-0.85.

    Measured on the 2-core development machine (shared with a training run, nice 10), this test's settings
    with the training seed changed: seed 0 (the test): 0.40 → 0.84 (16 answers a prompt); seed 1: before
    0.31/0.38/0.31, after 0.75/0.81/0.80, and seed 2: before 0.31/0.38/0.31, after 0.72/0.73/0.70 (8 answers a
    prompt, sampling seeds 0/1/2). Six steps at seed 0: 0.43 → 0.92. One measurement's sampling noise is
    about ±0.05 (binomial, 128 answers; ±0.03 between sampling seeds above) and the rise 0.35-0.5, so a
    rise of at least 0.2 is asserted. Wall time 3.5-5 minutes there under load (train 2-4 min), less alone.
    The GGUF's conversion is the session's (``smollm2_converted``): ``train`` reuses it in OUT/base_model.
    """
    from ark_trainer.cli import main
    from tests.conftest import converted_base
    from tests.model_files import smollm2_gguf

    gguf = smollm2_gguf()
    (tmp_path / "train.jsonl").write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS))
    (tmp_path / "eval.jsonl").write_text(json.dumps({"prompt": "Describe a bird."}) + "\n")  # not evaluated
    (tmp_path / "rewards.yaml").write_text(REWARDS)
    out = converted_base(smollm2_converted, tmp_path / "OUT")
    argv = [
        "train", "--strategy", "GRPO", "--model_path", str(gguf), "--output_dir", str(out),
        "--data_path", str(tmp_path / "train.jsonl"), "--eval_dataset", str(tmp_path / "eval.jsonl"),
        "--reward_config", str(tmp_path / "rewards.yaml"), "--eval_auto", "False", "--device", "cpu",
        "--seed", "0", "--max_train_steps", "4", "--batch_size", "8", "--num_generations", "4",
        "--grpo_prompts_per_step", "2", "--max_completion_length", "8", "--grpo_learning_rate", "2e-5",
        "--lora_r", "0", "--beta", "0", "--mixed_precision", "no", "--save_steps", "100", "--logging_steps", "1",
    ]  # fmt: skip
    assert main(argv) == 0
    plan = json.loads((out / "plan.json").read_text())
    assert plan["base_model"]["kind"] == "gguf"
    assert [(s["name"], s["steps"]) for s in plan["stages"]] == [("grpo", 4)]
    before = sampled_reward(out / "base_model")  # the GGUF as converted: the weights GRPO started from
    after = sampled_reward(out / "model")
    assert 0.1 <= before <= 0.6, before  # room to learn: the base is neither always right nor always wrong
    assert after >= before + 0.2, (before, after)


@pytest.mark.parametrize("strategy, trainer", [("GRPO", "GRPOTrainer"), ("RLOO", "RLOOTrainer")])
def test_rl_stages_sample_and_score_without_dropout(assets, tmp_path, monkeypatch, strategy, trainer):
    """LoRA's dropout (``--lora_dropout``) and the config's ``attention_dropout`` are off in GRPO and RLOO: with
    either on, each answer is sampled from one random sub-network and its log-probability scored under
    another, and TRL generates in training mode. TRL's ``disable_dropout`` zeroes ``nn.Dropout`` modules only;
    Qwen2's attention reads its rate as a number."""
    import shutil

    import torch
    import trl

    from ark_trainer.cli import main
    from tests.conftest import train_argv

    model = shutil.copytree(assets["model"], tmp_path / "model")
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "attention_dropout": 0.1}))
    cls = getattr(trl, trainer)
    original = cls.__init__
    seen: list[list[float]] = []

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        seen.append([m.p for m in self.model.modules() if isinstance(m, torch.nn.Dropout)])
        seen.append([m.attention_dropout for m in self.model.modules() if hasattr(m, "attention_dropout")])

    monkeypatch.setattr(cls, "__init__", init)
    argv = train_argv(
        {**assets, "model": model}, tmp_path / "run", "--strategy", strategy, "--eval_auto", "False"
    )
    assert main([*argv, "--max_train_steps", "1", "--lora_r", "4", "--lora_dropout", "0.1"]) == 0
    assert seen and seen[0] and seen[1] and all(p == 0 for p in seen[0] + seen[1]), seen


def test_unlabelled_rows_are_spread_over_the_order_like_a_label():
    """A stage shorter than the data sees its unlabelled rows in their share, not never (they were last)."""
    from ark_trainer.stages.grpo.stage import label_balanced

    rows = [{"prompt": f"a{i}", "label": "A"} for i in range(20)] + [
        {"prompt": f"b{i}", "label": "B"} for i in range(20)
    ]
    rows += [{"prompt": f"u{i}"} for i in range(20)]  # a third of the data has no label
    ordered, balanced = label_balanced(rows, seed=0)
    assert balanced and sorted(r["prompt"] for r in ordered) == sorted(r["prompt"] for r in rows)
    for start in range(0, 60, 6):  # every six consecutive prompts: two of each kind
        window = ordered[start : start + 6]
        assert sum("label" not in r for r in window) == 2, [r["prompt"] for r in window]
