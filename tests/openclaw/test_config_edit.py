"""A patch written into OpenClaw's config (``services/openclaw/config_edit.py``): without the CLI a JSON5-aware atomic
edit, merged by OpenClaw's patch rules; a linked config stays a link after the edit and the restore.
"""

from __future__ import annotations

import os

import pytest

from ark_trainer.base.external import openclaw_cli as oc
from ark_trainer.services.openclaw.config_edit import apply_patch, merge
from ark_trainer.services.openclaw.deploy import provider_patch, restore_config
from tests.optional import need

json5 = need("json5", "ARK_REQUIRE_OPENCLAW")  # OpenClaw's config is JSON5; CI requires it


def test_without_the_cli_the_patch_is_a_json5_aware_atomic_edit(tmp_path, monkeypatch):
    monkeypatch.setenv("ARK_OPENCLAW_BIN", str(tmp_path / "no-such-openclaw"))
    assert oc.find_openclaw() is None
    config = tmp_path / "openclaw.json"
    config.write_text("// mine\n{ gateway: { port: 19001, }, models: { providers: { x: { api: 'a' } } }, }\n")
    config.chmod(0o600)
    before = config.read_bytes()
    patch = provider_patch("ark-run", 8765, 512, 128, agent="work", api_key="k")
    assert apply_patch(config, patch, tmp_path / "patch.json5") == "json5 edit"
    data = json5.loads(config.read_text())
    assert data["gateway"] == {"port": 19001} and data["models"]["providers"]["x"] == {"api": "a"}
    assert data["agents"]["entries"]["work"]["model"]["primary"] == "ark/ark-run"
    ark = data["models"]["providers"]["ark"]
    assert ark["baseUrl"] == "http://127.0.0.1:8765/v1" and ark["models"][0]["contextWindow"] == 4000
    assert (tmp_path / "openclaw.json.ark-bak").read_bytes() == before
    assert config.stat().st_mode & 0o777 == 0o600
    restore_config(config, before, 0o600)
    assert config.read_bytes() == before
    restore_config(config, None, None)
    assert not config.exists()


def test_merge_follows_openclaws_patch_rules():
    base = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    assert merge(base, {"a": {"c": [3]}, "d": None, "e": "x"}) == {"a": {"b": 1, "c": [3]}, "e": "x"}


@pytest.mark.parametrize("relative", [True, False])
def test_a_linked_config_stays_a_link_after_the_edit_and_the_restore(tmp_path, monkeypatch, relative):
    monkeypatch.setenv("ARK_OPENCLAW_BIN", str(tmp_path / "no-such-openclaw"))
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "openclaw.json"
    real.write_text("{ gateway: { port: 19001 } }\n")
    real.chmod(0o600)
    before = real.read_bytes()
    home = tmp_path / ".openclaw"
    home.mkdir()
    config = home / "openclaw.json"
    config.symlink_to(os.path.relpath(real, home) if relative else real)
    apply_patch(
        config, provider_patch("ark-run", 8765, 512, 128, agent="main", api_key="k"), tmp_path / "p.json5"
    )
    assert config.is_symlink() and "ark-run" in real.read_text() and real.stat().st_mode & 0o777 == 0o600
    restore_config(config, before, 0o600)
    assert config.is_symlink() and real.read_bytes() == before
