"""MCP servers as an episode environment: where their definitions come from and what a definition may say.

``--env`` (or ``env:`` in the ``--config`` YAML) names MCP servers in three ways, all in the shape of
OpenClaw's ``mcp.servers`` (``{NAME: {command, args, env, cwd}}``):

- ``env: {mcp_servers: {time: {command: mcp-server-time, args: [--local-timezone, UTC]}}}`` in the YAML;
- ``--env mcp:servers.json`` (a JSON, JSON5 or YAML file holding ``mcp_servers``, OpenClaw's
  ``mcp: {servers: ...}`` or Claude Desktop's ``mcpServers``);
- ``--env openclaw``: the current agent's own servers, ``mcp.servers`` of OpenClaw's config
  (``$OPENCLAW_CONFIG_PATH``, else ``$OPENCLAW_STATE_DIR/openclaw.json``, else ``~/.openclaw/openclaw.json``).

Only stdio servers (a ``command``) are started. OpenClaw's own keys that do not change what a tool does
(``enabled``, ``connectionTimeoutMs``, ``requestTimeoutMs``, ``toolFilter``, ``transport: stdio``) are
honoured; in OpenClaw's config, remote (``url``) and disabled servers are left out with a warning.
"""

from __future__ import annotations

import fnmatch
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import read_text_bounded

log = logging.getLogger("ark_trainer")

OPENCLAW = "openclaw"
FILE_PREFIX = "mcp:"
CONNECT_TIMEOUT = 30.0  # seconds a server may take to start and list its tools (connectionTimeoutMs)
KNOWN_KEYS = {
    "command", "args", "env", "cwd", "enabled", "transport", "connectionTimeoutMs", "requestTimeoutMs",
    "toolFilter",
}  # fmt: skip
# OpenClaw keys that only matter to remote servers, its UI or other runtimes: accepted, not used.
IGNORED_KEYS = {
    "url", "type", "headers", "auth", "oauth", "sslVerify", "clientCert", "clientKey", "codex",
    "supportsParallelToolCalls", "approval", "description",
}  # fmt: skip


@dataclass(frozen=True)
class McpServer:
    """One stdio MCP server as ark-trainer starts it."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    connect_timeout: float = CONNECT_TIMEOUT
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def shows(self, tool: str) -> bool:
        """``toolFilter``: the tool is kept (exact names or ``*`` globs)."""
        if self.include and not any(fnmatch.fnmatchcase(tool, p) for p in self.include):
            return False
        return not any(fnmatch.fnmatchcase(tool, p) for p in self.exclude)

    def describe(self) -> str:
        return " ".join([self.command, *self.args])


def is_mcp_source(source: Any) -> bool:
    """``--env`` names MCP servers (a mapping, ``openclaw`` or ``mcp:FILE``), not a Python factory."""
    return isinstance(source, dict) or (
        isinstance(source, str) and (source == OPENCLAW or source.startswith(FILE_PREFIX))
    )


def servers_from_source(source: Any, flag: str = "--env") -> list[McpServer]:
    """The servers ``source`` names, each checked; one line per problem (all at once)."""
    if isinstance(source, dict):
        return parse_servers(_servers_mapping(source, f"{flag}: mcp_servers"), f"{flag}: mcp_servers")
    if source == OPENCLAW:
        return openclaw_servers(flag)
    path = Path(source[len(FILE_PREFIX) :]).expanduser()
    data = _read_file(path, flag)
    return parse_servers(_servers_mapping(data, f"{flag}: {path}"), f"{flag}: {path}")


MAX_FILE_BYTES = 1_000_000  # a few servers' commands


def _read_file(path: Path, flag: str) -> dict:
    """The file's object: YAML within the bounds of every YAML config (``yamlsafe``), JSON5 within
    :data:`MAX_FILE_BYTES` and not nested thousands deep."""
    if not path.exists():  # one that is not a regular file is refused as it is read
        raise UserError(f"{flag}: no such file {str(path)!r}; give mcp:path/to/servers.json")
    if path.suffix in (".yaml", ".yml"):
        from ark_trainer.base.yamlsafe import read_yaml_file

        try:
            data = read_yaml_file(path)
        except UserError as exc:
            raise UserError(*(f"{flag}: {m}" for m in exc.messages)) from None
    else:
        data = _read_json5(path, flag)
    if not isinstance(data, dict):
        raise UserError(f"{flag}: {path}: expected an object with mcp_servers, got {type(data).__name__}")
    return data


def _read_json5(path: Path, flag: str) -> Any:
    import json5

    try:
        text = read_text_bounded(path, MAX_FILE_BYTES, "an MCP server file")
    except UserError as exc:
        raise UserError(f"{flag}: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{flag}: {path}: cannot read it ({exc}); give a readable UTF-8 file") from None
    try:
        return json5.loads(text)
    except RecursionError:
        raise UserError(
            f"{flag}: {path}: not valid JSON (nested too deeply); write the servers out flat"
        ) from None
    except Exception as exc:  # noqa: BLE001 - json5 raises several kinds
        raise UserError(f"{flag}: {path}: not valid {path.suffix.lstrip('.') or 'JSON'}: {exc}") from None


def _servers_mapping(data: dict, where: str) -> dict:
    """``mcp_servers`` / ``mcp.servers`` / ``mcpServers`` of ``data``."""
    for found in (data.get("mcp_servers"), (data.get("mcp") or {}).get("servers"), data.get("mcpServers")):
        if found is not None:
            if not isinstance(found, dict) or not found:
                raise UserError(f"{where}: expected a mapping of server names to {{command, args, env}}")
            return found
    raise UserError(f"{where}: no MCP servers; give mcp_servers: {{NAME: {{command: CMD, args: [...]}}}}")


def parse_servers(mapping: dict, where: str, lenient: bool = False) -> list[McpServer]:
    """Check each definition; ``lenient`` (OpenClaw's config) leaves out remote and disabled servers."""
    servers, problems = [], []
    for name, spec in mapping.items():
        at = f"{where}: {name}"
        if not isinstance(spec, dict):
            problems.append(f"{at}: expected {{command, args, env}}, got {type(spec).__name__}")
            continue
        if spec.get("enabled") is False:
            log.info("%s: disabled (enabled: false), left out", at)
            continue
        unknown = sorted(set(spec) - KNOWN_KEYS - IGNORED_KEYS)
        if unknown and not lenient:
            problems.append(f"{at}: {unknown[0]}: unknown key; use command, args, env, cwd, toolFilter")
            continue
        if not spec.get("command"):
            message = f"{at}: no command; only stdio servers ({{command, args, env}}) run in episodes"
            if lenient:
                log.warning("%s (left out)", message)
                continue
            problems.append(message)
            continue
        try:
            servers.append(_server(str(name), spec, at))
        except UserError as exc:
            problems += exc.messages
    if problems:
        raise UserError(*problems)
    if not servers:
        raise UserError(f"{where}: no stdio MCP server to start (each needs a command)")
    return servers


def _server(name: str, spec: dict, at: str) -> McpServer:
    args, env = spec.get("args") or [], spec.get("env") or {}
    if not isinstance(args, list) or not all(isinstance(a, str | int | float) for a in args):
        raise UserError(f"{at}: args: expected a list of strings")
    if not isinstance(env, dict):
        raise UserError(f"{at}: env: expected a mapping of variable names to values")
    tool_filter = spec.get("toolFilter") or {}
    timeout_ms = spec.get("connectionTimeoutMs")
    if timeout_ms is not None and (
        isinstance(timeout_ms, bool)
        or not isinstance(timeout_ms, int | float)
        or not 0 < timeout_ms <= 3_600_000
    ):  # nan fails this too
        raise UserError(
            f"{at}: connectionTimeoutMs: expected a positive number of milliseconds, at most 3600000"
        )
    return McpServer(
        name,
        str(spec["command"]),
        tuple(str(a) for a in args),
        tuple((str(k), str(v)) for k, v in env.items()),
        str(spec["cwd"]) if spec.get("cwd") else None,
        timeout_ms / 1000 if timeout_ms else CONNECT_TIMEOUT,
        tuple(tool_filter.get("include") or ()),
        tuple(tool_filter.get("exclude") or ()),
    )


def openclaw_servers(flag: str = "--env") -> list[McpServer]:
    """``mcp.servers`` of the active OpenClaw config."""
    from ark_trainer.base.external.openclaw_cli import config_path

    path, why = config_path()
    if not path.is_file():
        raise UserError(
            f"{flag}: openclaw: no OpenClaw config at {path} ({why}); add servers with `openclaw mcp add` "
            "or give them in the YAML (env: {mcp_servers: ...})"
        )
    data = _read_file(path, flag)
    servers = (data.get("mcp") or {}).get("servers")
    if not isinstance(servers, dict) or not servers:
        raise UserError(
            f"{flag}: openclaw: {path} has no mcp.servers; add one with `openclaw mcp add NAME ...`"
        )
    return parse_servers(servers, f"{flag}: openclaw: {path}: mcp.servers", lenient=True)
