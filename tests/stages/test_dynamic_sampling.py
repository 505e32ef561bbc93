"""--dynamic_sampling_rounds: DAPO's dynamic sampling on TRL's GRPOTrainer (stages/grpo/dynamic_sampling.py)."""

from __future__ import annotations

import pytest
import torch

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import read_jsonl
from ark_trainer.cli import main
from ark_trainer.core.config import resolve_config
from ark_trainer.stages.grpo.dynamic_sampling import dynamic_sampling_trainer, informative, refill
from ark_trainer.stages.registry import config_class
from tests.conftest import save_tiny_qwen, tiny_qc_assets

PAD = 9


def _batch(prompt_len: int, completion_len: int, advantages: list[float], tag: int) -> dict:
    """A TRL-shaped batch (groups of 2): prompts left-padded, completions right-padded, ids all ``tag``."""
    n = len(advantages)
    return {
        "prompt_ids": torch.full((n, prompt_len), tag),
        "prompt_mask": torch.ones(n, prompt_len, dtype=torch.long),
        "completion_ids": torch.full((n, completion_len), tag),
        "completion_mask": torch.ones(n, completion_len, dtype=torch.long),
        "advantages": torch.tensor(advantages),
        "old_per_token_logps": None,
        "num_items_in_batch": torch.tensor(n * completion_len),
    }


def test_flat_groups_are_replaced_by_fresh_informative_ones_and_the_batch_keeps_its_size():
    batch = _batch(3, 2, [1.0, -1.0, 0.0, 0.0, 0.5, -0.5], tag=1)  # group 1 is flat
    fresh = _batch(5, 4, [0.0, 0.0, 0.7, -0.7, 0.2, -0.2], tag=2)  # its groups 1 and 2 are informative
    merged, filled = refill(batch, [fresh], 2, PAD)
    assert filled == 3 and informative(merged["advantages"], 2).all()
    assert merged["advantages"].tolist() == pytest.approx([1.0, -1.0, 0.5, -0.5, 0.7, -0.7])
    assert merged["prompt_ids"].shape == (6, 5) and merged["completion_ids"].shape == (6, 4)
    assert merged["prompt_ids"][0].tolist() == [PAD, PAD, 1, 1, 1]  # prompts padded on the left
    assert merged["prompt_mask"][0].tolist() == [0, 0, 1, 1, 1]
    assert merged["completion_ids"][0].tolist() == [1, 1, 0, 0]  # completions on the right
    assert merged["completion_mask"][0].tolist() == [1, 1, 0, 0]
    assert merged["completion_ids"][4].tolist() == [2, 2, 2, 2]
    assert int(merged["num_items_in_batch"]) == 4 * 2 + 2 * 4  # the dapo normaliser counts real tokens
    assert merged["old_per_token_logps"] is None


def test_without_informative_fresh_groups_the_flat_ones_stay():
    batch = _batch(3, 2, [1.0, -1.0, 0.0, 0.0], tag=1)
    merged, filled = refill(batch, [_batch(3, 2, [0.0, 0.0, 0.0, 0.0], tag=2)], 2, PAD)
    assert filled == 1 and merged["advantages"].tolist() == [1.0, -1.0, 0.0, 0.0]
    assert merged["completion_ids"].tolist() == batch["completion_ids"].tolist()


def test_a_flat_group_s_place_goes_to_a_fresh_group_of_its_own_label():
    """Group 1 (label B) is flat; the fresh batch's informative groups are an A and a B: the B takes it."""
    batch = _batch(3, 2, [1.0, -1.0, 0.0, 0.0, 0.5, -0.5], tag=1)
    fresh = _batch(3, 2, [0.3, -0.3, 0.0, 0.0, 0.7, -0.7], tag=2)  # groups 0 (A) and 2 (B) informative
    merged, filled = refill(batch, [fresh], 2, PAD, labels=(["A", "B", "A"], [["A", "A", "B"]]))
    assert filled == 3 and merged["advantages"].tolist() == pytest.approx([1.0, -1.0, 0.5, -0.5, 0.7, -0.7])
    only_a = _batch(3, 2, [0.3, -0.3, 0.0, 0.0, 0.2, -0.2], tag=2)  # informative, but both of label A
    merged, filled = refill(batch, [only_a], 2, PAD, labels=(["A", "B", "A"], [["A", "A", "A"]]))
    assert filled == 2 and merged["advantages"].tolist() == pytest.approx([1.0, -1.0, 0.5, -0.5, 0.0, 0.0])


def test_replacement_prompts_are_drawn_from_the_open_places_labels():
    import random

    from ark_trainer.stages.grpo.dynamic_sampling import draws, label_key, open_kinds

    rows = [{"label": "A"}, {"label": " B "}, {"label": ""}, {}, {"label": "A"}]
    pools: dict = {}
    for i, row in enumerate(rows):
        pools.setdefault(label_key(row), []).append(i)
    assert pools == {"A": [0, 4], "B": [1], None: [2, 3]}
    adv = torch.tensor([1.0, -1.0, 0.0, 0.0, 0.0, 0.0])  # groups 1 (B) and 2 (unlabelled) are flat
    places = open_kinds(["A", "B", None], adv, [], 2)
    assert places == ["B", None]
    picks = draws(random.Random(0), pools, places, 6)
    assert [label_key(rows[i]) for i in picks] == ["B", None] * 3
    fresh = [(["B", "A", "A"], torch.tensor([0.5, -0.5, 0.2, -0.2, 0.0, 0.0]))]
    assert open_kinds(["A", "B", None], adv, fresh, 2) == [
        None
    ]  # the B place is filled, the A group is not wanted


def _vary_reward(prompts, completions, **kwargs):
    """Flat (1.0) for prompts that say "flat", a checksum of the completion otherwise (rarely equal)."""
    return [
        1.0 if "flat" in p else float(sum(map(ord, c)) % 101)
        for p, c in zip(prompts, completions, strict=True)
    ]


@pytest.mark.slow
def test_the_trainer_refills_a_flat_batch_from_the_training_prompts(tmp_path):
    """Real TRL: a generation batch of flat prompts comes back with informative groups only."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    model = save_tiny_qwen(tmp_path / "model")
    prompts = [f"vary {i}" for i in range(6)] + [f"flat {i}" for i in range(2)]
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=2,
        max_completion_length=8, max_steps=1, report_to="none", use_cpu=True, seed=3, beta=0.0,
    )  # fmt: skip
    trainer_cls = dynamic_sampling_trainer(GRPOTrainer, rounds=3, seed=3)
    trainer = trainer_cls(
        model=str(model), reward_funcs=_vary_reward, args=args,
        train_dataset=Dataset.from_list([{"prompt": p} for p in prompts]),
    )  # fmt: skip
    trainer.model.train()
    flat = [{"prompt": f"flat {i}"} for i in range(2) for _ in range(2)]
    out = trainer._generate_and_score_completions(flat)
    assert out["advantages"].numel() == 4  # the batch keeps its size
    assert informative(out["advantages"], 2).all()
    assert trainer._metrics["train"]["dynamic_sampling/frac_informative"] == [1.0]
    assert 1 <= trainer._metrics["train"]["dynamic_sampling/rounds"][0] <= 3


def test_the_flag_is_range_checked_and_single_process(tmp_path):
    base = {"model_path": "m", "data_path": "d", "output_dir": str(tmp_path / "o")}
    with pytest.raises(UserError, match=r"--dynamic_sampling_rounds: must be in \[0, 64\], got 65"):
        resolve_config(config_class(), {**base, "dynamic_sampling_rounds": 65})
    with pytest.raises(UserError, match="--dynamic_sampling_rounds: works with one training process only"):
        resolve_config(config_class(), {**base, "dynamic_sampling_rounds": 2, "num_processes": 2})
    assert resolve_config(config_class(), {**base, "dynamic_sampling_rounds": 2}).dynamic_sampling_rounds == 2


def test_a_grpo_run_with_dynamic_sampling_logs_its_rounds(tmp_path):
    a = tiny_qc_assets(tmp_path)
    out = tmp_path / "run"
    args = [
        "train", "--strategy", "GRPO", "--model_path", str(a["model"]), "--data_path", str(a["train"]),
        "--output_dir", str(out), "--max_train_steps", "2", "--batch_size", "4", "--num_generations", "2",
        "--max_completion_length", "6", "--logging_steps", "1", "--eval_auto", "False", "--device", "cpu",
        "--dynamic_sampling_rounds", "1", "--save_steps", "0", "--seed", "7",
    ]  # fmt: skip
    assert main(args) == 0
    logged = [
        e for e in read_jsonl(out / "events.jsonl") if e["event"] == "metrics" and e.get("stage") == "grpo"
    ]
    assert logged and all("dynamic_sampling/frac_informative" in e for e in logged)


def test_the_flat_reward_diagnosis_suggests_dynamic_sampling_when_it_is_off(tmp_path):
    from ark_trainer.stages.diagnose.rundata import RunData
    from ark_trainer.stages.diagnose.training import check_flat_reward

    events = [
        {
            "event": "metrics",
            "stage": "grpo",
            "step": s,
            "frac_reward_zero_std": 0.7,
            "rewards/qc_verdict/std": 0.3,
        }
        for s in (5, 10)
    ]
    (off,) = check_flat_reward(RunData(tmp_path, config={"num_generations": 8}, events=events))
    assert "--dynamic_sampling_rounds 2" in off.fix and "--num_generations from 8 to 16" in off.fix
    (on,) = check_flat_reward(RunData(tmp_path, config={"dynamic_sampling_rounds": 2}, events=events))
    assert "--dynamic_sampling_rounds" not in on.fix


def test_the_flat_reward_diagnosis_judges_the_groups_dynamic_sampling_trained_on(tmp_path):
    """On the toy demo 64% of the groups first sampled were flat but 77% of those trained on were not: no finding."""
    from ark_trainer.stages.diagnose.rundata import RunData
    from ark_trainer.stages.diagnose.training import check_flat_reward

    def events(informative: float) -> list[dict]:
        return [
            {
                "event": "metrics",
                "stage": "grpo",
                "step": s,
                "frac_reward_zero_std": 0.64,
                "dynamic_sampling/frac_informative": informative,
            }
            for s in (5, 10)
        ]

    config = {"dynamic_sampling_rounds": 2}
    assert check_flat_reward(RunData(tmp_path, config=config, events=events(0.77))) == []
    (still,) = check_flat_reward(RunData(tmp_path, config=config, events=events(0.3)))
    assert "70% of GRPO groups had zero reward variance" in still.evidence
    assert "after dynamic sampling replaced flat ones (64% of the groups first sampled)" in still.evidence
