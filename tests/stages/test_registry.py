"""Stages (``stages/registry.py``) and strategies (``base/strategies.py``) are registries: a new one is "one module
+ one line", and the pipeline, the report, resume and the config name no stage. (The plan they make:
``tests/test_plan.py``.)
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ark_trainer.base import strategies
from ark_trainer.base.fileio import read_jsonl, write_jsonl
from ark_trainer.base.strategies import Strategy, add_strategy
from ark_trainer.cli import main
from ark_trainer.core.config import normalize_strategy
from ark_trainer.stages import registry
from ark_trainer.stages.plan import PlanStage
from ark_trainer.stages.registry import Plot, StageContext, register_stage
from tests.conftest import save_tiny_qwen

# --- the registries ---


def test_duplicate_stage_and_strategy_names_are_refused():
    registry.stages()

    class Again:
        name = "grpo"

    with pytest.raises(ValueError, match="'grpo' is already registered"):
        register_stage(Again)
    with pytest.raises(ValueError, match="'GRPO' is already registered"):
        add_strategy("GRPO", Strategy(("grpo",), "again"))
    assert registry.get_stage("grpo").label == "GRPO"


def test_strategy_spellings_come_from_the_table():
    assert normalize_strategy("only grpo") == "GRPO" and normalize_strategy("rft-grpo") == "RFT+GRPO"
    assert {k: v for k, v in registry.lr_flags().items() if k in ("rft", "grpo")} == {
        "rft": "--rft_learning_rate",
        "grpo": "--grpo_learning_rate",
    }


# --- one module + one line: a new stage runs through the whole pipeline ---


class CopyStage:
    """A toy stage: "trains" by copying its input model (what a new stage module would look like)."""

    name, label = "copy", "Copy"
    steps_flag, lr_flag = None, "grpo_learning_rate"
    plots = (Plot("copy_loss.png", "loss", "Copy loss"),)
    calls: list[int] = []

    def run(self, ctx: StageContext, plan: PlanStage, model_in: str, final_dir: Path) -> str:
        CopyStage.calls.append(plan.steps)
        with ctx.monitor.stage(self.name, total=plan.steps):
            ctx.monitor.event("metrics", stage=self.name, step=1, loss=0.5)
            shutil.copytree(model_in, final_dir, dirs_exist_ok=True)
        return str(final_dir)


@pytest.fixture
def copy_strategy():
    """Register the toy stage and its strategy in-process; remove them again afterwards."""
    registry.stages()
    register_stage(CopyStage)
    add_strategy("COPY", Strategy(("copy",), "copies the model", ("only copy",)))
    CopyStage.calls.clear()
    yield
    registry._STAGES.pop("copy")
    strategies.strategy_table().pop("COPY")


def test_a_registered_stage_and_strategy_run_end_to_end(copy_strategy, tmp_path):
    model = save_tiny_qwen(tmp_path / "model")
    rows = [
        {"question": f"客服：您好 {i}。顾客：订单{i}不对。", "label": ["无", "辱骂"][i % 2]}
        for i in range(10)
    ]
    write_jsonl(tmp_path / "train.jsonl", rows)
    out = tmp_path / "out"
    args = [
        "train", "--strategy", "only copy", "--model_path", str(model), "--data_path", str(tmp_path / "train.jsonl"),
        "--output_dir", str(out), "--max_train_steps", "3", "--max_completion_length", "4", "--eval_ratio", "0.2",
        "--device", "cpu", "--heartbeat_interval", "1",
    ]  # fmt: skip
    assert main(args) == 0
    assert CopyStage.calls == [3]
    plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    assert plan["strategy"] == "COPY" and plan["schema"] == 1
    assert plan["stages"] == [{"name": "copy", "steps": 3, "learning_rate": 1e-6, "last": True}]
    assert (out / "model" / "model.safetensors").is_file() and (out / "eval" / "copy.json").is_file()
    events = read_jsonl(out / "events.jsonl")
    assert [e["model"] for e in events if e["event"] == "eval"] == ["base", "copy"]
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "Copy steps: 3" in report and "| Copy" in report and (out / "plots" / "copy_loss.png").is_file()

    # resume reads the saved plan and skips the finished stage
    assert main(["train", "--output_dir", str(out), "--resume", "True"]) == 0
    assert CopyStage.calls == [3]


def test_pipeline_loop_report_and_resume_name_no_stage():
    """Stage names live in the stage modules and the strategy table only: the pipeline, the report and resume
    name none."""
    import inspect
    import re

    from ark_trainer.core.runtime import resume
    from ark_trainer.services import pipeline
    from ark_trainer.stages import report

    sources = {
        "pipeline._run_stages": inspect.getsource(pipeline._run_stages),
        "pipeline._choose_strategy": inspect.getsource(pipeline._choose_strategy),
        "report.py": inspect.getsource(report),
        "resume.py": inspect.getsource(resume),
    }
    named = {k: re.findall(r"(?i)rft|grpo", text) for k, text in sources.items()}
    assert named == {k: [] for k in sources}


def test_the_config_and_the_runtime_ask_no_stage_registry():
    """The strategy table sits below the config; resume, guards and bad steps are told the stage by their
    caller. Counted as the import-graph test counts: module level, in functions and type-only imports."""
    from tests.test_import_graph import import_graph

    graph = import_graph()
    low = [
        "ark_trainer.core.config",
        "ark_trainer.base.strategies",
        "ark_trainer.base.ranges",
        "ark_trainer.base.plugins",
    ]
    low += [m for m in graph if m.startswith("ark_trainer.core.runtime.")]
    upward = {m: sorted(t for t in graph[m] if t.startswith("ark_trainer.stages")) for m in low}
    assert upward == {m: [] for m in low}
