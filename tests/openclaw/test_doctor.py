"""Environment checks for training and for OpenClaw (``services/openclaw/doctor.py``): ``doctor --json`` sees the real
OpenClaw CLI and its config, sizes the disk a run needs from its model, and names a CLI a user can run.

OpenClaw comes from ``scripts/setup_openclaw.sh`` (``.tools/``); with ``ARK_REQUIRE_OPENCLAW=1`` (set by
``scripts/test.sh``) a missing CLI fails the tests that need it instead of skipping them.
"""

from __future__ import annotations

import json

import pytest

from ark_trainer.base.external import openclaw_cli as oc
from ark_trainer.cli import main


def _doctor(capsys) -> tuple[int, dict]:
    code = main(["doctor", "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_doctor_json_sees_openclaw_and_its_config(openclaw, capsys, isolated_home):
    config = isolated_home / ".openclaw" / "openclaw.json"
    config.parent.mkdir(parents=True)
    config.write_text("// written by the test\n{ gateway: { port: 19001, }, }\n")
    code, doc = _doctor(capsys)
    checks = {c["name"]: c for c in doc["checks"]}
    assert doc["schema"] == "ark-trainer.doctor/1" and code == 0 and doc["ok"] is True
    assert set(checks) == {
        "python", "torch", "cpu", "cuda", "disk", "libraries", "serving", "openclaw_cli", "openclaw_config",
        "openclaw_config_valid", "openclaw_auth", "openclaw_gateway",
    }  # fmt: skip
    assert all(set(c) == {"name", "status", "detail", "fix"} for c in doc["checks"])
    assert checks["cpu"]["detail"].split(" (")[0] in (
        "bf16",
        "AVX-512 fp32",
        "AVX2 fp32",
        "fp32 without AVX2",
    )
    assert "torch's kernels: " in checks["cpu"]["detail"] and "docs/real-models.md" in checks["cpu"]["detail"]
    assert checks["openclaw_cli"]["status"] == "ok" and "OpenClaw 2026" in checks["openclaw_cli"]["detail"]
    assert (
        str(config) in checks["openclaw_config"]["detail"]
        and "OPENCLAW_STATE_DIR" in checks["openclaw_config"]["detail"]
    )
    assert checks["openclaw_config_valid"]["status"] == "ok"
    # a default model without credentials is a warning with a fix, not a failure
    assert checks["openclaw_auth"]["status"] == "warn" and checks["openclaw_auth"]["fix"]
    assert checks["openclaw_gateway"]["status"] == "warn"

    config.write_text('{ "gateway": { "port": "not a port" }, "noSuchKey": 1 }\n')  # schema violation
    code, doc = _doctor(capsys)
    bad = {c["name"]: c for c in doc["checks"]}["openclaw_config_valid"]
    assert code == 1 and doc["ok"] is False and bad["status"] == "fail" and bad["fix"]


def test_doctor_sizes_the_disk_need_from_the_model(tmp_path, monkeypatch):
    from collections import namedtuple

    from ark_trainer.services.openclaw import doctor

    model = tmp_path / "m"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"\0" * 1000)
    need = doctor.disk_needed(str(model), checkpoints=2)
    assert need == int(1000 * (2 + 12) * 1.1)
    usage = namedtuple("usage", "total used free")
    for free, status in ((need - 1, "fail"), (need + 1, "warn"), (3 * need, "ok")):
        monkeypatch.setattr(doctor.shutil, "disk_usage", lambda _p, f=free: usage(0, 0, f))
        check = doctor.check_disk(str(tmp_path / "out"), str(model))
        assert check.status == status and "needs about" in check.detail
        assert bool(check.fix) == (status != "ok")


def test_doctor_names_the_cli_a_user_can_run_when_it_is_not_on_path(tmp_path, monkeypatch):
    from ark_trainer.services.openclaw import doctor

    installed = tmp_path / "tools" / "bin" / "openclaw"
    installed.parent.mkdir(parents=True)
    installed.write_text("#!/bin/sh\n")
    installed.chmod(0o755)
    monkeypatch.setenv("ARK_OPENCLAW_BIN", str(installed))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setattr(oc, "config_path", lambda: (tmp_path / "none.json", "test"))
    assert oc.typed_command() == str(installed)  # .tools/bin is not on PATH: its path, not `openclaw`
    assert doctor._config_valid().fix == f"`{installed} onboard` or `ark-trainer deploy OUT`"
    assert doctor._not_on_path(
        str(installed)
    ) == f" (not on PATH: `export PATH={installed.parent}:$PATH` " + ("to run it as `openclaw`)")
    monkeypatch.setenv("PATH", f"{installed.parent}:/usr/bin:/bin")
    assert oc.typed_command() == "openclaw" and doctor._not_on_path(str(installed)) == ""
