"""MCP server files (``base/external/mcp_config.py``): read within a size and a nesting bound."""

from __future__ import annotations

import pytest

from tests.conftest import refused, train_argv


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        (
            "big.yaml",
            "mcp_servers:\n" + "# pad\n" * 200_000,
            "bytes; a YAML config is at most 1000000 bytes here",
        ),
        ("deep.yaml", "mcp_servers: " + "[" * 20_000 + "]" * 20_000 + "\n", "nested deeper than 64 levels"),
        ("deep.json", '{"mcp_servers": ' + "[" * 20_000 + "]" * 20_000 + "}", "nested too deeply"),
        (
            "big.json",
            '{"mcp_servers": {}, "pad": "' + "x" * 2_000_000 + '"}',
            "bytes; an MCP server file is at most",
        ),
    ],
)
def test_an_mcp_server_file_is_bounded(assets, tmp_path, capsys, name, text, says):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    lines = refused(capsys, train_argv(assets, tmp_path / "out", "--env", f"mcp:{path}"))
    assert len(lines) == 1 and says in lines[0], lines
    assert not (tmp_path / "out").exists()
