"""The development habits stay wired: pre-commit runs the pinned ruff, the slow tier is marked, mypy is pinned."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def pins() -> dict[str, str]:
    lines = (ROOT / "requirements-test.txt").read_text(encoding="utf-8").splitlines()
    return dict(line.split("==", 1) for line in lines if "==" in line and not line.startswith("#"))


def test_pre_commit_runs_the_pinned_ruff_and_the_clidoc_check():
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    repos = {repo["repo"]: repo for repo in config["repos"]}
    ruff = repos["https://github.com/astral-sh/ruff-pre-commit"]
    assert ruff["rev"] == "v" + pins()["ruff"], "pre-commit's ruff must equal ruff== in requirements-test.txt"
    assert {hook["id"] for hook in ruff["hooks"]} == {"ruff-check", "ruff-format"}
    local = [hook for hook in repos["local"]["hooks"]]
    assert any("ark_trainer.app.clidoc --check" in hook["entry"] for hook in local)


def test_complexity_limit_and_mypy_are_configured():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    lint = project["tool"]["ruff"]["lint"]
    assert "C90" in lint["select"] and lint["mccabe"]["max-complexity"] <= 15
    assert project["tool"]["mypy"]["python_version"] == "3.11"
    assert re.fullmatch(r"\d+\.\d+\.\d+", pins()["mypy"])


def test_the_test_script_has_a_fast_tier_and_ci_runs_everything():
    script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    assert '"--fast"' in script and "not slow" in script
    assert "bash scripts/test.sh\n" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "slow:" in " ".join(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    )
