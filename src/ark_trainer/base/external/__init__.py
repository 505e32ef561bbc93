"""The programs outside ark-trainer that it finds and talks to, read without importing anything above them:
``openclaw_cli`` (find and run the ``openclaw`` CLI, its config and state folders) and ``mcp_config`` (MCP
server definitions, from a ``servers.json``, a run config or OpenClaw's active config). They stand on the
base floor, so the config, the data collectors and the agent environments can all use them."""
