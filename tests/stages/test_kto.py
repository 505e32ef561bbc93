"""--strategy KTO (``stages/kto/stage.py``): thumbs-up/down labels, or sampled answers split by a reward threshold,
each a real TRL run on a tiny model. (RLOO: ``test_rloo.py``; the labels themselves: ``test_preference.py``.)
"""

from __future__ import annotations

from ark_trainer.base.fileio import read_json, read_jsonl, write_jsonl
from ark_trainer.cli import main
from tests.stages.short_runs import changed, event, flags


def test_kto_class_weights_follow_trls_guide():
    from ark_trainer.stages.kto.stage import class_weights

    assert class_weights(2818, 4670) == (round(4670 / 2818, 4), 1.0)  # the demo: mostly bad answers
    assert class_weights(100, 100) == class_weights(120, 100) == (1.0, 1.0)  # already within [1, 4/3]
    assert class_weights(400, 100) == (1.0, 3.0)  # mostly good: 400 / (3 × 100) = 4/3


def test_kto_on_thumbs_up_and_down_rows(assets, tmp_path):
    rows = [
        {
            "question": f"顾客：包裹{i}丢了。",
            "label": i % 2 == 0,
            "completion": "结论：合规" if i % 2 == 0 else "好的",
        }
        for i in range(8)
    ]
    data = tmp_path / "thumbs.jsonl"
    write_jsonl(data, rows)
    out = tmp_path / "run"
    reward = (
        tmp_path / "reward.yaml"
    )  # thumbs rows carry no QC label: a label-free grader scores the evaluation
    reward.write_text(
        "graders:\n  - name: verdict\n    type: string_check\n    reference: 结论\n    operation: like\n",
        encoding="utf-8",
    )
    assert main([*flags(assets, out, "KTO", data=data), "--reward_config", str(reward)]) == 0
    stats = event(out, "kto_examples")
    assert (stats["source"], stats["n_desirable"], stats["n_undesirable"]) == ("data", 4, 4)
    assert read_json(out / "plan.json")["strategy"] == "KTO"
    assert changed(assets["model"], out / "model") and (out / "eval" / "kto.json").is_file()
    assert "## KTO examples" in (out / "report.md").read_text(encoding="utf-8")


def test_kto_splits_sampled_answers_by_the_threshold(assets, tmp_path):
    out = tmp_path / "run"
    assert main([*flags(assets, out, "KTO"), "--kto_threshold", "0.3"]) == 0
    stats = event(out, "kto_examples")
    assert stats["source"] == "sampled" and stats["threshold"] == 0.3
    assert stats["n_desirable"] > 0 and stats["n_undesirable"] > 0
    examples = read_jsonl(out / "data" / "kto_examples.jsonl")
    assert len(examples) == stats["n_desirable"] + stats["n_undesirable"]
    weights = event(out, "kto_weights")
    good, bad = stats["n_desirable"], stats["n_undesirable"]
    ratio = weights["desirable_weight"] * good / (weights["undesirable_weight"] * bad)
    assert 1 - 1e-3 <= ratio <= 4 / 3 + 1e-3, (weights, good, bad)
    steps = [e["step"] for e in read_jsonl(out / "events.jsonl") if e["event"] == "metrics" and "loss" in e]
    assert steps == [1, 2, 3]
    assert changed(assets["model"], out / "model")


def test_kto_with_one_kind_of_answer_is_skipped_with_a_warning(assets, tmp_path):
    out = tmp_path / "run"
    assert main([*flags(assets, out, "KTO"), "--kto_threshold", "5"]) == 0  # no answer reaches 5
    warnings = [e["message"] for e in read_jsonl(out / "events.jsonl") if e["event"] == "warning"]
    assert any("KTO needs desirable and undesirable answers" in w for w in warnings)
