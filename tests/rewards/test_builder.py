"""One reward builder for train, score and plan (``rewards/builder.py``): weights, the reward model, guards and
the monitor at once, the preset for the data, and ``score`` builds (and guards) the reward ``train`` builds.
(The import cycles: ``tests/test_import_cycles.py``; grader kinds: ``test_spec.py``.)
"""

from __future__ import annotations

import json

import pytest

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import write_jsonl
from ark_trainer.cli import main
from ark_trainer.rewards.qc import format_answer
from ark_trainer.stages.registry import config_class
from tests.conftest import save_tiny_qwen

# --- one builder --------------------------------------------------------------------------------------------------

GOOD = format_answer("辱骂", "非常抱歉给您带来不便，我们会尽快为您处理。")
RAISES = """\
graders:
  - name: qc_verdict
  - name: fragile
    type: python
    source: |
      def grade(sample, item):
          if "boom" in sample["output_text"]:
              raise RuntimeError("boom")
          return 1.0
"""


@pytest.fixture
def qc_rows(tmp_path):
    data = tmp_path / "data.jsonl"
    write_jsonl(data, [{"prompt": "对话一", "label": "辱骂", "completion": GOOD}])
    return data


def test_build_reward_takes_weights_rm_guards_and_monitor_at_once(tmp_path):
    from ark_trainer.core.runtime.monitor import Monitor
    from ark_trainer.rewards.builder import build_reward
    from ark_trainer.rewards.guards import GuardedReward

    rm = save_tiny_qwen(tmp_path / "rm", "Qwen2ForSequenceClassification", num_labels=1)
    spec = tmp_path / "r.yaml"
    spec.write_text(RAISES, encoding="utf-8")
    cfg = config_class()(
        reward_config=str(spec), rm_model_path=str(rm), rm_weight=0.3, reward_weights="fragile=2"
    )
    monitor = Monitor(tmp_path, heartbeat=False)
    reward = build_reward(cfg, [], "cpu", monitor=monitor)
    assert reward.describe()["graders"] == {"qc_verdict": 1.0, "fragile": 2.0, "reward_model": 0.3}
    assert all(isinstance(c.fn, GuardedReward) for c in reward.components)
    assert reward.score(["p", "p"], ["boom", "fine"])["fragile"] == [None, 1.0]
    events = [json.loads(line) for line in monitor.events_path.read_text().splitlines()]
    assert [e["reward"] for e in events if e.get("event") == "reward_skipped"] == ["fragile"]
    # an explicit weights argument wins over --reward_weights; the plan builds unguarded
    plain = build_reward(cfg, [], "cpu", weights={"qc_verdict": 0.5}, guarded=False)
    assert plain.describe()["graders"] == {"qc_verdict": 0.5, "fragile": 1.0, "reward_model": 0.3}
    assert not any(isinstance(c.fn, GuardedReward) for c in plain.components)
    with pytest.raises(UserError, match="--reward_weights: unknown reward 'nope'"):
        build_reward(cfg, [], "cpu", weights={"nope": 1})


def test_build_reward_picks_the_preset_for_the_data():
    from ark_trainer.rewards.builder import build_reward

    assert build_reward({}, [{"prompt": "q", "label": "辱骂"}], "cpu").source.endswith("qc.yaml")
    assert build_reward({}, [{"prompt": "q", "reference": "a"}], "cpu").source.endswith("reference.yaml")


def test_score_builds_the_reward_train_builds(qc_rows, tmp_path, capsys):
    """Before: score ignored --rm_model_path and --reward_weights (no such flags) and had no guards."""
    rm = save_tiny_qwen(tmp_path / "rm", "Qwen2ForSequenceClassification", num_labels=1)
    flags = ["score", "--data_path", str(qc_rows), "--json", "--device", "cpu"]
    extra = ["--rm_model_path", str(rm), "--rm_weight", "0.5", "--reward_weights", "qc_verdict=2"]
    assert main([*flags, *extra]) == 0
    graders = json.loads(capsys.readouterr().out)["graders"]
    assert graders["reward_model"]["weight"] == 0.5 and graders["reward_model"]["applicable"] == 1
    assert graders["qc_verdict"]["weight"] == 2.0 and graders["qc_format"]["weight"] == 0.25
    assert main([*flags, "--reward_weights", "politeness=1"]) == 2
    assert "--reward_weights: unknown reward 'politeness'" in capsys.readouterr().err


def test_score_skips_a_grader_that_raises_as_train_does(tmp_path, capsys):
    spec = tmp_path / "r.yaml"
    spec.write_text(RAISES, encoding="utf-8")
    data = tmp_path / "d.jsonl"
    write_jsonl(data, [{"prompt": "对话一", "label": "辱骂", "candidates": [GOOD, "boom"]}])
    assert main(["score", "--reward_config", str(spec), "--data_path", str(data)]) == 0
    out = capsys.readouterr().out
    assert "warning: grader 'fragile': 1 answers skipped, as train would skip them (it raised" in out, out
    assert next(line for line in out.splitlines() if line.startswith("fragile")).split()[2] == "1/2"
