"""``ark-trainer rm train``: rules → pairs (rft_pairs.jsonl format) → reward model → ``--rm_model_path``."""

from __future__ import annotations

import json
import random

import pytest
import torch

from ark_trainer.base.fileio import write_jsonl
from ark_trainer.cli import main
from ark_trainer.data.loader import load_jsonl
from ark_trainer.data.split import split_rows
from ark_trainer.stages.registry import config_class
from tests.conftest import refused, save_tiny_qwen

EVAL_RATIO = 0.2


def demo_pairs(n: int) -> list[dict]:
    """Pairs shaped exactly as the RFT stage writes rft_pairs.jsonl, ranked by the QC graders.

    For each demo dialogue the candidates are its gold answer and the same verdict with a flawed reply
    (no apology, a leaked phone number, deflection or a promise); the QC preset decides which is chosen.
    """
    from ark_trainer.app.demo.data import flawed_reply, generate_rows, gold_answer
    from ark_trainer.rewards.composite import CompositeReward
    from ark_trainer.rewards.qc import format_answer

    reward = CompositeReward.from_spec(None)
    pairs = []
    for row in generate_rows(n, 0, "train", with_candidates=False):
        rng = random.Random(row["id"])
        answers = [
            gold_answer(row),
            format_answer(row["label"], flawed_reply(rng, row["scenario"], row["question"])),
        ]
        prompt = [{"role": "user", "content": row["question"]}]
        totals = reward([prompt] * 2, answers, label=[row["label"]] * 2)
        best, worst = (0, 1) if totals[0] >= totals[1] else (1, 0)
        if totals[best] > totals[worst]:
            pairs.append(
                {
                    "prompt": prompt,
                    "chosen": answers[best],
                    "rejected": answers[worst],
                    "chosen_reward": totals[best],
                    "rejected_reward": totals[worst],
                    "id": row["id"],
                    "label": row["label"],
                    "scenario": row["scenario"],
                }
            )
    return pairs


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("rm")
    pairs = demo_pairs(200)
    write_jsonl(root / "rft_pairs.jsonl", pairs)
    texts = [p["chosen"] for p in pairs[:50]] + [p["rejected"] for p in pairs[:50]]
    texts += [p["prompt"][0]["content"] for p in pairs[:50]]
    # 1024 positions: the longest demo prompt is ~260 tokens with this tokenizer, and `train` (prepare) refuses
    # prompts longer than the window (positions - --max_completion_length). Rotary: no weight depends on it.
    # Seeded: the random init would otherwise depend on which tests ran before (the fast tier deselects some).
    torch.manual_seed(0)
    base = save_tiny_qwen(
        root / "base", texts=texts, hidden_size=32, intermediate_size=64, max_position_embeddings=1024
    )
    out = root / "rm"
    argv = ["rm", "train", "--data_path", str(root / "rft_pairs.jsonl"), "--model_path", str(base)]
    argv += ["--output_dir", str(out), "--eval_ratio", str(EVAL_RATIO), "--num_train_epochs", "2"]
    argv += ["--learning_rate", "3e-3", "--batch_size", "16", "--device", "cpu"]
    return {"root": root, "pairs": root / "rft_pairs.jsonl", "base": base, "out": out, "argv": argv}


@pytest.fixture(scope="module")
def trained_run(trained):
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(trained["argv"]) == 0
    return {**trained, "stdout": buf.getvalue()}


@pytest.mark.slow
def test_rm_ranks_held_out_chosen_above_rejected(trained_run):
    out = trained_run["out"]
    metrics = json.loads((out / "rm_metrics.json").read_text(encoding="utf-8"))
    assert metrics["n_eval_pairs"] >= 25 and metrics["n_train_pairs"] >= 100
    assert metrics["pair_accuracy"] >= 0.9, metrics
    assert metrics["last_loss"] < metrics["first_loss"]
    assert (
        "pair accuracy" in trained_run["stdout"]
        and f"{metrics['pair_accuracy']:.1%}" in trained_run["stdout"]
    )
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()
    assert not list(out.glob("*.bin")) and not (out / "trainer").exists()
    assert not list(out.parent.glob(".rm.partial*"))  # the staging folder is gone
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert config["architectures"] == ["Qwen2ForSequenceClassification"] and len(config["id2label"]) == 1


@pytest.mark.slow
def test_rm_is_accepted_by_rm_model_path(trained_run):
    """The trained model passes --rm_model_path's checks and, as a reward, prefers the held-out chosen."""
    from ark_trainer.core.config import resolve_config
    from ark_trainer.services.planning import prepare

    root = trained_run["root"]
    cfg = resolve_config(
        config_class(),
        {
            "model_path": str(trained_run["base"]),
            "data_path": str(trained_run["pairs"]),
            "output_dir": str(root / "run"),
            "rm_model_path": str(trained_run["out"]),
            "device": "cpu",
        },
    )
    reward = prepare(cfg).reward
    assert reward.names[-1] == "reward_model"
    _, held = split_rows(load_jsonl(trained_run["pairs"]), EVAL_RATIO)
    prompts = [r["prompt"] for r in held]
    table = reward.score(prompts * 2, [r["chosen"] for r in held] + [r["rejected"] for r in held])
    rm = table["reward_model"]
    wins = sum(c > r for c, r in zip(rm[: len(held)], rm[len(held) :], strict=True))
    assert wins / len(held) >= 0.9
    assert not (root / "run").exists()  # prepare writes nothing


@pytest.mark.slow
def test_rm_with_lora_trains_adapters_and_saves_a_merged_model(trained, tmp_path, capsys):
    """--lora_r: adapters on the linear layers plus a fully trained score head, merged into plain weights."""
    from safetensors.torch import load_file

    out = tmp_path / "rm-lora"
    argv = [a if a != str(trained["out"]) else str(out) for a in trained["argv"]]
    assert main([*argv, "--lora_r", "8", "--learning_rate", "1e-2"]) == 0
    metrics = json.loads((out / "rm_metrics.json").read_text(encoding="utf-8"))
    assert metrics["args"]["lora_r"] == 8 and metrics["pair_accuracy"] >= 0.8, metrics
    weights = load_file(str(out / "model.safetensors"))
    assert not [k for k in weights if "lora_" in k or "modules_to_save" in k]  # merged, loadable as is
    base = load_file(str(trained["base"] / "model.safetensors"))
    q_proj = "model.layers.0.self_attn.q_proj.weight"
    assert not (weights[q_proj] == base[q_proj]).all()  # the adapter was merged into the target layer
    assert (weights["model.embed_tokens.weight"] == base["model.embed_tokens.weight"]).all()  # frozen
    assert main([*argv[:-4], "--lora_r", "-1", "--output_dir", str(tmp_path / "x")]) == 2
    assert "--lora_r" in capsys.readouterr().err


def test_rm_refuses_a_non_empty_output_dir(trained_run, capsys):
    assert main(trained_run["argv"]) == 2
    assert "--output_dir" in capsys.readouterr().err
    assert (trained_run["out"] / "model.safetensors").is_file()  # the earlier model is untouched


def _rm_error(argv: list[str], capsys) -> list[str]:
    assert main(argv) == 2
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]


def test_rm_train_user_errors(trained, tmp_path, capsys):
    base = str(trained["base"])
    common = ["--output_dir", str(tmp_path / "out"), "--device", "cpu"]
    no_pairs = tmp_path / "no_pairs.jsonl"
    write_jsonl(no_pairs, [{"prompt": "q1", "chosen": "a"}, {"prompt": "q2", "rejected": "b", "chosen": "c"}])
    lines = _rm_error(["rm", "train", "--data_path", str(no_pairs), "--model_path", base, *common], capsys)
    assert lines == [lines[0]] and lines[0].startswith(f"error: {no_pairs}:1: rejected: missing")

    same = tmp_path / "same.jsonl"
    write_jsonl(same, [{"prompt": "q", "chosen": "a", "rejected": "a"}])
    lines = _rm_error(["rm", "train", "--data_path", str(same), "--model_path", base, *common], capsys)
    assert "no usable pairs" in lines[0]

    lines = _rm_error(
        [
            "rm",
            "train",
            "--data_path",
            str(trained["pairs"]),
            "--model_path",
            str(tmp_path / "nope"),
            *common,
        ],
        capsys,
    )
    assert lines[0].startswith("error: --model_path: no such folder")

    lines = _rm_error(
        ["rm", "train", "--data_path", str(tmp_path / "nope.jsonl"), "--model_path", base, *common], capsys
    )
    assert lines[0].startswith("error: --data_path: no such file")
    assert not (tmp_path / "out").exists()


def test_rft_pairs_written_by_the_rft_stage_are_valid_input(tmp_path):
    """The rows select() writes for rft_pairs.jsonl load as pairs, unchanged."""
    from ark_trainer.rewards.rm_train import load_pairs
    from ark_trainer.rewards.scoring import select

    rows = [{"prompt": [{"role": "user", "content": "q"}], "label": "辱骂", "_line": 1}]
    answers = [[("good", "candidate"), ("", "sample")]]  # a policy sample can be empty
    scores = [[{"total": 1.0, "scores": {}}, {"total": 0.0, "scores": {}}]]
    sel = select(rows, answers, scores, 0.5, conversational=True)
    path = tmp_path / "rft_pairs.jsonl"
    write_jsonl(path, sel.pairs)
    pairs, dropped = load_pairs(path)
    assert dropped == 0 and pairs[0]["chosen"] == "good" and pairs[0]["rejected"] == ""


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--lora_r", "1000000000"], "--lora_r: must be in [0, 4096], got 1000000000"),
        (["--learning_rate", "nan"], "--learning_rate: expected a number > 0, got nan"),
        (["--learning_rate", "inf"], "--learning_rate: expected a number > 0, got inf"),
        (["--num_train_epochs", "nan"], "--num_train_epochs: expected a number > 0 (or give --max_steps)"),
        (["--lora_alpha", "1000000000000"], "--lora_alpha: must be in [1, 2147483647], got 1000000000000"),
    ],
)
def test_rm_train_sizes_and_rates_are_bounded(assets, tmp_path, capsys, flags, says):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"prompt": "q", "chosen": "a", "rejected": "b"}) + "\n", encoding="utf-8")
    argv = ["rm", "train", "--model_path", str(assets["model"]), "--data_path", str(pairs)]
    lines = refused(capsys, [*argv, "--output_dir", str(tmp_path / "rm"), "--device", "cpu", *flags])
    assert lines == [f"error: {says}"], lines
    assert not (tmp_path / "rm").exists()
