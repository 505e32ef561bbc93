"""MCP client sessions for episode tools: started once per process, reused, restarted when a server fails.

A training process plays thousands of episodes, and TRL's tool loop calls tools as plain synchronous
methods. So one :class:`McpHub` per process runs an asyncio event loop in a daemon thread; each server's
stdio connection (the official SDK: ``mcp.client.stdio.stdio_client`` and ``ClientSession``) lives in one
task of that loop, from ``initialize`` and ``list_tools`` until the process ends; a tool call from any
thread is submitted to the loop and waited on with the call's timeout.

A server that does not answer within the timeout, or whose connection breaks (the process died), is
stopped and started again before the next call; the caller gets :class:`ServerFailure`, which the episode
turns into an error text for the model (counted as a tool error), and :attr:`McpHub.restarts` counts it.
A JSON-RPC error answer (unknown tool, bad arguments) is the tool's answer, not a failure.

A server that prints what is not JSON-RPC on its stdout makes the SDK log a traceback per line; those go to
:class:`_ProtocolNoise` instead, and the first such line is named in the one-line failure. A server that
lists more than :data:`MAX_LISTED_TOOLS` tools (or pages without end) fails to start.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import tempfile
import threading
from typing import Any

from ark_trainer.base.external.mcp_config import McpServer

log = logging.getLogger("ark_trainer")
STOP_TIMEOUT = 5.0  # seconds to close a server (stdin closed, then SIGTERM, then SIGKILL: the SDK's sequence)
MAX_LISTED_TOOLS = 10_000  # tools/list answers, every page together (a model is shown far fewer: MAX_TOOLS)


class _ProtocolNoise(logging.Handler):
    """The SDK's stdio client logs a traceback for each stdout line that is not JSON-RPC: kept here (the
    first one's text), not printed, so a chatty server is one line of ours, not hundreds of tracebacks."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.first: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.first is None:
            exc = record.exc_info[1] if record.exc_info else None
            text = str(exc).splitlines() if exc else []
            found = next((line for line in text if "input_value=" in line), record.getMessage())
            self.first = found.strip()[:200]


_NOISE = _ProtocolNoise()


def _quiet_sdk() -> None:
    sdk = logging.getLogger("mcp")
    if _NOISE not in sdk.handlers:
        sdk.addHandler(_NOISE)
        sdk.propagate = False  # Python's last-resort handler would print every traceback to stderr


class ServerFailure(Exception):
    """The server crashed, hung or could not be reached; it is restarted before the next call."""


class _Connection:
    """One running server: its client session, its tools, and the task that owns both."""

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.session: Any = None
        self.tools: list[Any] = []
        self.ready: concurrent.futures.Future = concurrent.futures.Future()
        # the server's stderr, read back when it fails to start; closed with the connection
        self.stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        self._stop: asyncio.Event | None = None
        self._runner: asyncio.Task | None = None
        self.task: concurrent.futures.Future | None = None

    async def run(self) -> None:
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client

        self._stop = asyncio.Event()
        self._runner = asyncio.current_task()
        params = StdioServerParameters(
            command=self.server.command,
            args=list(self.server.args),
            env=dict(self.server.env) or None,
            cwd=self.server.cwd,
        )
        try:
            async with (
                stdio_client(params, errlog=self.stderr) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                self.tools = await _all_tools(session)
                self.session = session
                self.ready.set_result(True)
                await self._stop.wait()
        except BaseException as exc:  # noqa: BLE001 - reported to whoever waits on ready
            if not self.ready.done():
                self.ready.set_exception(exc)
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
                raise
        finally:
            self.session = None

    def stop(self) -> None:
        """Run in the loop: a started server leaves its session; one still starting (a hung or silent
        ``initialize``) is cancelled there, so the SDK's shutdown runs now, not after STOP_TIMEOUT."""
        if self._stop is not None:
            self._stop.set()
        if not self.ready.done() and self._runner is not None:
            self._runner.cancel()

    def stderr_tail(self, chars: int = 300) -> str:
        try:
            self.stderr.flush()
            self.stderr.seek(0)
            text = self.stderr.read()
        except (OSError, ValueError):
            return ""
        lines = [ln for ln in text.strip().splitlines() if ln.strip()]
        return " | ".join(lines[-3:])[-chars:]


async def _all_tools(session: Any) -> list[Any]:
    from mcp_types import PaginatedRequestParams

    tools, cursor = [], None
    for _page in range(MAX_LISTED_TOOLS):  # a page holds one tool at least, or the listing pages without end
        page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools += page.tools
        cursor = page.next_cursor
        if len(tools) > MAX_LISTED_TOOLS:
            break
        if not cursor:
            return tools
    raise ServerFailure(f"it lists more than {MAX_LISTED_TOOLS} tools (or pages without end)")


class McpHub:
    """The process's MCP servers: an event loop in a daemon thread owning one session per server."""

    def __init__(self) -> None:
        _quiet_sdk()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="ark-mcp")
        self._thread.start()
        self._conns: dict[McpServer, _Connection] = {}
        self._lock = threading.Lock()
        self.restarts: dict[str, int] = {}
        self.failures: dict[str, int] = {}

    def tools(self, server: McpServer) -> list[Any]:
        """The server's tools (``mcp_types.Tool``), starting it first if needed; raises ServerFailure."""
        return self._live(server).tools

    def _live(self, server: McpServer) -> _Connection:
        with self._lock:
            conn = self._conns.get(server)
            if conn is not None and conn.session is not None and not (conn.task and conn.task.done()):
                return conn
            if conn is not None:  # it died since the last call
                self._close(conn)
                self.restarts[server.name] = self.restarts.get(server.name, 0) + 1
                log.warning("MCP server %r stopped; starting it again", server.name)
            conn = _Connection(server)
            conn.task = asyncio.run_coroutine_threadsafe(conn.run(), self._loop)
            try:
                conn.ready.result(server.connect_timeout)
            except concurrent.futures.TimeoutError:
                problem = f"did not start within {server.connect_timeout:g}s{_tail(conn)}"
                self._close(conn)
                raise ServerFailure(problem) from None
            except BaseException as exc:  # noqa: BLE001 - the SDK's and the OS's errors alike
                problem = f"{_reason(exc)}{_tail(conn)}"
                self._close(conn)
                raise ServerFailure(problem) from None
            self._conns[server] = conn
            return conn

    def call(self, server: McpServer, tool: str, arguments: dict, timeout: float, meta: dict | None) -> Any:
        """``tools/call`` on ``server``; its ``CallToolResult``, or ServerFailure (then it is restarted)."""
        from mcp.shared.exceptions import MCPError
        from mcp_types.jsonrpc import CONNECTION_CLOSED

        conn = self._live(server)
        session = conn.session
        if session is None:
            raise ServerFailure("the connection closed")
        future = asyncio.run_coroutine_threadsafe(session.call_tool(tool, arguments, meta=meta), self._loop)
        try:
            return future.result(timeout if timeout > 0 else None)
        except concurrent.futures.TimeoutError:
            future.cancel()
            self._fail(conn)
            raise ServerFailure(f"no answer within {timeout:g}s; the server was restarted") from None
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise
            self._fail(conn)
            raise ServerFailure(f"the connection closed ({exc.message}); the server was restarted") from None
        except Exception as exc:  # noqa: BLE001 - a broken pipe or stream: the process is gone
            self._fail(conn)
            raise ServerFailure(f"{_reason(exc)}; the server was restarted") from None

    def _fail(self, conn: _Connection) -> None:
        name = conn.server.name
        self.failures[name] = self.failures.get(name, 0) + 1
        with self._lock:
            if self._conns.get(conn.server) is conn:
                del self._conns[conn.server]
                self._close(conn)
                self.restarts[name] = self.restarts.get(name, 0) + 1
                log.warning("MCP server %r failed (%s in this run); restarting it", name, self.failures[name])

    def _close(self, conn: _Connection) -> None:
        self._loop.call_soon_threadsafe(conn.stop)
        if conn.task is not None:
            try:
                conn.task.result(STOP_TIMEOUT + 5)
            except BaseException:  # noqa: BLE001 - closing a broken server: whatever it raised is moot
                conn.task.cancel()
        conn.stderr.close()

    def close(self) -> None:
        """Stop every server (at exit)."""
        with self._lock:
            conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            self._close(conn)


def _reason(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, ServerFailure):
        return str(exc)
    return f"{type(exc).__name__}: {exc}".rstrip(": ")


def _tail(conn: _Connection) -> str:
    noise, _NOISE.first = _NOISE.first, None
    tail = conn.stderr_tail()
    said = f" (its stderr: {tail})" if tail else ""
    if noise:
        said += f"; it printed what is not JSON-RPC on stdout ({noise}): an MCP server logs to stderr only"
    return said


_HUB: McpHub | None = None
_HUB_LOCK = threading.Lock()


def hub() -> McpHub:
    """The process's one hub (made on first use; its servers stop when the process exits)."""
    global _HUB
    with _HUB_LOCK:
        if _HUB is None:
            _HUB = McpHub()
            atexit.register(_HUB.close)
        return _HUB
