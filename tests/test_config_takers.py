"""No function outside the config/plan code takes the whole ``train`` config: every other one is handed the
shared run flags, a stage's own options or plain values (``scripts/count_config_takers.py`` counts them;
docs/development.md, "Who reads the whole config", names the config/plan code)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "count_config_takers.py"


def _counter():
    spec = importlib.util.spec_from_file_location("count_config_takers", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_function_outside_the_config_plan_code_takes_the_whole_config():
    takers = _counter().config_takers()
    assert not takers, (
        "functions outside the config/plan code that take the whole config (hand them the shared flags "
        "(RunFlags), a stage's options or the values they read):\n" + "\n".join(takers)
    )


def test_the_count_sees_the_config_plan_code_and_what_carries_the_config():
    counter = _counter()
    assert all((counter.SRC / module).is_file() for module in counter.CONFIG_PLAN)  # no stale entry
    everywhere = counter.config_takers(include_config_plan=True)
    names = {line.split()[-1] for line in everywhere}
    assert {"prepare", "run_train", "resolve_plan", "validate", "settle"} <= names
    assert any(line.startswith("services/nl/plan.py") for line in everywhere)  # a class holding the config
    assert counter.carriers(counter._trees()) == {"RequestPlan"}  # the planned run holds no config
