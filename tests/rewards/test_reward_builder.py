"""One reward builder for train, score and plan; scoring helpers outside the RFT stage with
no import cycles; grader kinds registered by a decorator that refuses duplicates."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ark_trainer.cli import main
from ark_trainer.errors import UserError
from ark_trainer.fileio import write_jsonl
from ark_trainer.rewards.qc import format_answer
from tests.conftest import save_tiny_qwen

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "ark_trainer"


# --- the import graph ----------------------------------------------------------------------------------------


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _top_level_imports(path: Path, name: str, modules: dict[str, Path]) -> set[str]:
    """The package modules ``name`` imports while it is imported: not in functions, not under TYPE_CHECKING."""
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            return
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_pkg else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {m for m in found if m in modules and m != name}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _top_level_imports(path, name, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := walk(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := walk(node)):
            return cycle
    return None


def test_find_cycle_sees_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_package_import_graph_is_acyclic():
    graph = import_graph()
    assert "ark_trainer.scoring" in graph and len(graph) > 50
    assert find_cycle(graph) is None, " → ".join(find_cycle(graph) or [])


def test_no_module_reaches_into_the_rft_stage_for_scoring():
    """Scoring lives in ``ark_trainer.scoring``; only the stage registry (which loads the built-in stages)
    imports the RFT stage."""
    users = sorted(
        path.relative_to(SRC).as_posix()
        for path in PACKAGE.rglob("*.py")
        if "ark_trainer.stages.rft" in path.read_text(encoding="utf-8") and path.name != "rft.py"
    )
    assert users == ["ark_trainer/stages/registry.py"], users
    rft = PACKAGE / "stages" / "rft.py"
    for banned in ("ark_trainer.evaluate", "ark_trainer.stages.grpo", "def score_completions", "def select("):
        assert banned not in rft.read_text(encoding="utf-8")


def test_every_module_imports_alone_in_a_fresh_interpreter():
    """A cycle hidden behind import order shows up when a module is the first one imported."""
    names = [n for n in _modules() if not n.endswith("__main__")]
    code = (
        "import subprocess, sys\n"
        "bad = []\n"
        "for name in sys.argv[1:]:\n"
        "    r = subprocess.run([sys.executable, '-c', f'import {name}'], capture_output=True, text=True)\n"
        "    if r.returncode:\n"
        "        bad.append(name + ': ' + (r.stderr.strip().splitlines() or ['?'])[-1])\n"
        "print('\\n'.join(bad))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}  # this checkout's package, not an installed one
    result = subprocess.run(
        [sys.executable, "-c", code, *names], capture_output=True, text=True, timeout=900, env=env
    )
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_no_import_cycle_runs_through_the_rft_stage_even_inside_functions():
    """``stages/rft ↔ resume`` and ``stages/rft ↔ generation`` were cycles hidden in function bodies."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found |= {f"{node.module}.{a.name}" for a in node.names} | {node.module}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        graph[name] = {m for m in found if m in modules and m != name}
    rft = "ark_trainer.stages.rft"
    reach, todo = set(), list(graph[rft])
    while todo:
        node = todo.pop()
        if node not in reach:
            reach.add(node)
            todo += graph[node]
    assert rft not in reach, sorted(m for m in reach if rft in graph[m])


# --- grader kinds -----------------------------------------------------------------------------------------------


def test_grader_kinds_are_registered_once_with_their_keys():
    import importlib

    from ark_trainer.rewards import spec

    for module in spec.KIND_MODULES:  # the episode graders (rewards/episode.py) register on first use
        importlib.import_module(module)
    assert list(spec.KINDS) == [
        *("rule", "string_check", "regex", "text_similarity", "reward_model", "llm_judge", "python", "multi"),
        *("tool_called", "no_invalid_calls", "max_turns", "env_reward", "answer_from_tool"),
    ]
    assert "pattern" in spec.KINDS["regex"].fields and "rubric" in spec.KINDS["llm_judge"].fields
    assert not hasattr(spec, "BUILDERS") and not hasattr(spec, "FIELDS")  # no parallel tables
    for taken in ("regex", "score_model"):  # a kind's name or an alias
        with pytest.raises(ValueError, match=f"{taken!r} is already registered"):
            spec.grader_kind(taken, {"x"})(lambda entry, name: None)
    assert spec.KINDS["regex"].build is spec._regex


def test_a_new_grader_kind_is_one_decorated_function(tmp_path):
    from ark_trainer.rewards import spec
    from ark_trainer.rewards.composite import CompositeReward

    @spec.grader_kind("test_length_is", {"chars"})
    def _length_is(entry, name):
        chars = int(entry.number("chars", 0, low=0, integer=True))
        return lambda prompts, completions, **kw: [float(len(c) == chars) for c in completions]

    try:
        path = tmp_path / "r.yaml"
        path.write_text("graders:\n  - name: two\n    type: test_length_is\n    chars: 2\n", encoding="utf-8")
        assert CompositeReward.from_spec(path)(["p", "p"], ["ab", "abc"]) == [1.0, 0.0]
        path.write_text("graders:\n  - name: two\n    type: test_length_is\n    size: 2\n", encoding="utf-8")
        with pytest.raises(
            UserError, match=r"r.yaml:4: size: unknown key for a test_length_is grader; use chars"
        ):
            CompositeReward.from_spec(path)
    finally:
        del spec.KINDS["test_length_is"]


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
    from ark_trainer.config import TrainConfig
    from ark_trainer.rewards.builder import build_reward
    from ark_trainer.rewards.guards import GuardedReward
    from ark_trainer.runtime.monitor import Monitor

    rm = save_tiny_qwen(tmp_path / "rm", "Qwen2ForSequenceClassification", num_labels=1)
    spec = tmp_path / "r.yaml"
    spec.write_text(RAISES, encoding="utf-8")
    cfg = TrainConfig(
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
