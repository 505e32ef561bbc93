"""OpenClaw pieces that need no CLI: the JSON5 config edit, restore, the deploy patch, session rows."""

from __future__ import annotations

import json
import os

import pytest

from ark_trainer.data.collect import Session, parse_since, session_rows
from ark_trainer.data.scrub import Scrubber
from ark_trainer.external import openclaw_cli as oc
from ark_trainer.openclaw.config_edit import apply_patch, merge
from ark_trainer.openclaw.deploy import provider_patch, restore_config
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


def test_the_default_agent_or_a_named_one():
    assert provider_patch("m", 1, 32768, 512, None, "k")["agents"] == {
        "defaults": {"model": {"primary": "ark/m"}}
    }
    assert (
        provider_patch("m", 1, 32768, 512, None, "k")["models"]["providers"]["ark"]["models"][0][
            "contextWindow"
        ]
        == 32768
    )


def _entries():
    def msg(i, parent, role, content, ts, **extra):
        return {
            "type": "message",
            "id": f"e{i}",
            "parentId": parent,
            "message": {"role": role, "content": content, "timestamp": ts, **extra},
        }

    return [
        {"type": "model_change", "id": "e0", "parentId": None, "provider": "p", "modelId": "m"},
        msg(1, "e0", "user", "hi, I am bob@corp.com", 1767225600000),  # 2026-01-01
        msg(
            2,
            "e1",
            "assistant",
            [{"type": "text", "text": "old answer"}],
            1767225601000,
            provider="p",
            model="m",
        ),
        msg(3, "e2", "user", [{"type": "text", "text": "list files"}], 1780000000000),  # 2026-05
        msg(
            4,
            "e3",
            "assistant",
            [{"type": "toolCall", "id": "c", "name": "ls", "arguments": {"path": "."}}],
            1780000001000,
        ),
        msg(5, "e4", "toolResult", [{"type": "text", "text": "a.txt"}], 1780000002000, toolCallId="c"),
        msg(
            6,
            "e5",
            "assistant",
            [{"type": "thinking", "thinking": "hidden"}, {"type": "text", "text": "a.txt is there"}],
            1780000003000,
        ),
        msg(7, "e1", "assistant", [{"type": "text", "text": "an abandoned branch"}], 1767225602000),
    ]


def test_session_rows_follow_the_branch_keep_tool_calls_and_honour_since():
    session = Session("k", "s1", "main", _entries()[:-1])  # the current branch ends at e6
    rows = session_rows(session, None, Scrubber())
    assert (
        [r["messages"][-1]["content"] for r in rows]
        == [
            "old answer",
            '<tool_call>\n{"name": "ls", "arguments": {"path": "."}}\n</tool_call>',  # as the chat template writes it
            "a.txt is there",
        ]
    )
    assert rows[0]["messages"][0]["content"] == "hi, I am [EMAIL]" and rows[0]["model"] == "p/m"
    assert rows[1]["tool_calls"] == [{"name": "ls", "arguments": '{"path": "."}'}]
    assert [m["role"] for m in rows[2]["messages"]] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    later = session_rows(session, parse_since("2026-03-01"), Scrubber())
    assert [r["turn"] for r in later] == [3, 5]
    branch = session_rows(Session("k", "s1", "main", _entries()), None, Scrubber())
    assert [r["messages"][-1]["content"] for r in branch] == ["an abandoned branch"]  # leaf e7's branch
    json.dumps(rows)  # plain JSON


def test_tools_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("ARK_TOOLS_DIR", str(tmp_path))
    monkeypatch.delenv("ARK_OPENCLAW_BIN", raising=False)
    assert oc.tools_dir() == tmp_path
    assert os.environ["OPENCLAW_STATE_DIR"].endswith(".openclaw") and oc.state_dir().name == ".openclaw"


def test_doctor_names_the_cli_a_user_can_run_when_it_is_not_on_path(tmp_path, monkeypatch):
    from ark_trainer.openclaw import doctor

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
