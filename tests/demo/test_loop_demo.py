"""``ark-trainer demo --task loop`` end to end on the toy: a real server, real HTTP in OpenClaw's request
shape, real rounds (tiny sizes), the poison round, the report (slow tier). A share of the sessions through
the real ``openclaw agent --local`` is ``test_loop_demo_openclaw.py``'s: apart, the two slow runs can go
to the two pytest-xdist workers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ark_trainer.app.demo.loop_run import Sizes, run_loop_demo
from ark_trainer.app.demo.loop_scenario import NEW_KIND, SECRET_PREFIX
from ark_trainer.base.fileio import read_json, read_jsonl
from ark_trainer.services.deploy.policy import DATE_PREFIX, OPENCLAW_IDENTITY
from tests.conftest import run_cli

# the base model itself serves (no starting-model training), rounds of a few steps on a few turns
TINY = Sizes(n_start=100, start_steps=0, min_new_turns=6, round_steps=3, round_batch=8, eval_newest=2,
             n_heldout=20, timeout=900)  # fmt: skip


def _recorded(out: Path) -> list[dict]:
    return read_jsonl(out / "loop" / "turns" / "turns.jsonl")


@pytest.mark.slow  # about 6 minutes on 2 cores: a real server, users and two real rounds
def test_the_loop_demo_learns_from_its_users_refuses_or_survives_poison_and_reports_it(tmp_path, capsys):
    out = tmp_path / "demo"
    fig = run_loop_demo(out, rounds=2, poison_share=0.5, openclaw_share=0.0, sizes=TINY)
    said = capsys.readouterr().out  # what the gate can detect, then each round's size and cost before it runs
    assert "it detects a difference of 44.3 points" in said and "round 2: expected to take about" in said
    assert said.index("round 2: expected to take") < said.index("round 2 training on")
    assert [r["round"] for r in fig["rounds"]] == [1, 2]
    # the users' requests reached the server in OpenClaw's shape and were recorded with their feedback
    turns = _recorded(out)
    first = turns[0]["messages"]
    assert first[0]["role"] == "system" and OPENCLAW_IDENTITY in first[0]["content"]
    assert DATE_PREFIX.match(first[1]["content"]) and "\n\nRuntime: agent=" in first[1]["content"]
    said = {s["said"] for s in read_json(out / "loop_users.json")["sessions"]}
    assert {"correction"} <= said and {"wrong_label", "credential_request", "secret"} <= said
    # every round is measured on its test split (frozen held-out rows), overall and on the new kind
    for r in fig["rounds"]:
        test = r["test"]
        for part in ("overall", "new_kind"):
            for model in ("served", "candidate"):
                rate = test[part][model]
                assert rate["n"] > 0 and rate["low"] <= rate["value"] <= rate["high"]
        assert test["new_kind"]["served"]["n"] < test["overall"]["served"]["n"] <= 20
        assert r["data"]["rows"] >= 1 and r["cost_line"]
    assert fig["rounds"][0]["cost_line"].startswith("its cost is not measured yet")
    assert fig["rounds"][1]["cost_line"].startswith("expected to take about")
    if fig["rounds"][0]["decision"] == "promoted":  # round 2's served model is round 1's: answered before
        assert fig["rounds"][1]["test"]["served_answers_cached"] > 0
    # the poison: the filter dropped the credential requests and the keys; none reached training data
    poison = fig["rounds"][1]
    assert poison["corrections_dropped"].get("credential_request", 0) >= 1
    assert poison["corrections_dropped"].get("secret", 0) >= 1
    assert poison["data"]["credential_request_targets"] == 0 and fig["poison"]["secrets_in_round_data"] == 0
    data = "".join((out / "loop" / "rounds" / str(n) / "data.jsonl").read_text() for n in (1, 2))
    assert SECRET_PREFIX not in data and NEW_KIND in data
    assert fig["poison"]["verdict"] in ("refused by the gate", "promoted, not worse on test")
    serving = fig["serving"]
    assert serving["requests"] > 0 and serving["failed"] == 0 and serving["http_training"]["n"] > 0
    report = (out / "loop_report.md").read_text()
    assert "| 2 |" in report and "secrets in any round's training data: 0" in report
    assert json.loads((out / "loop_report.json").read_text())["poison"] == fig["poison"]
    # the loop's OpenClaw config went into the demo's own state, not the user's
    assert (out / "openclaw" / "openclaw.json").is_file()
    assert not (Path(os.environ["HOME"]) / ".openclaw" / "openclaw.json").exists()


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--poison_share", "2"], "--poison_share: expected a share in [0, 1], got 2.0"),
        (["--rounds", "0"], "--rounds: expected an integer in [1, 20], got 0"),
        (["--mde_points", "1"], "--mde_points: expected percentage points in [2, 50], got 1.0"),
        (["--n_eval", "5"], "--n_eval: not with --task loop"),
    ],
)
def test_the_loop_demos_flags_are_checked_before_anything_is_written(tmp_path, flags, says):
    done = run_cli("demo", "--task", "loop", "--output_dir", str(tmp_path / "d"), *flags, cwd=tmp_path)
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "d").exists()


def test_loop_flags_are_refused_with_another_task(tmp_path):
    done = run_cli("demo", "--task", "qc", "--rounds", "2", "--output_dir", str(tmp_path / "d"), cwd=tmp_path)
    assert done.returncode == 2 and "--rounds: only with --task loop" in done.stderr


def test_a_missing_openclaw_or_base_model_is_one_line(tmp_path):
    env_missing = {"ARK_OPENCLAW_BIN": str(tmp_path / "no-openclaw")}
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "ark_trainer", "demo", "--task", "loop", "--output_dir", str(tmp_path / "d")],
        cwd=tmp_path, env={**os.environ, **env_missing}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "--openclaw_share: the OpenClaw CLI is not installed" in done.stderr
    missing = run_cli("demo", "--task", "loop", "--openclaw_share", "0", "--base_model", str(tmp_path / "none"),
                      "--output_dir", str(tmp_path / "d"), cwd=tmp_path)  # fmt: skip
    assert (
        missing.returncode == 2 and "--base_model:" in missing.stderr and "does not exist" in missing.stderr
    )
    assert not (tmp_path / "d").exists()
