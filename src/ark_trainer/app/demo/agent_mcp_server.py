"""The agent demo's backend served as an MCP server (the official SDK's ``MCPServer``, stdio).

The same customer-service backend as ``app/demo/agent_env.py`` (orders, refunds, tickets; one
``CustomerServiceEnv`` per episode), offered over the Model Context Protocol, so that
``ark-trainer demo --task agent --tools mcp`` trains on tools an agent would get from an MCP server:

    env: {mcp_servers: {shop: {command: python, args: [-m, ark_trainer.app.demo.agent_mcp_server]}}}

Tools, in the order and with the descriptions of the Python environment (the model sees the same schemas):
``create_ticket``, ``lookup_order``, ``refund_order``, ``reply``; and the two episode hooks of
``stages/agent/mcp_env.py``, hidden from the model: ``reset`` (the task row's columns) and ``get_reward``. One
process serves every episode of a run: each request's ``_meta`` carries its episode id
(``ark-trainer/episode``), which selects that episode's backend.

Run it alone: ``python -m ark_trainer.app.demo.agent_mcp_server`` (it speaks MCP on stdin/stdout).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from ark_trainer.app.demo.agent_env import CustomerServiceEnv

EPISODE_META = "ark-trainer/episode"  # agent/mcp_env.py's key (not imported: the server stays light)
MAX_EPISODES = 20_000  # backends kept; the oldest is dropped (a run keeps far fewer episodes open at once)

server = MCPServer("ark-agent-demo", instructions="The agent demo's customer-service backend.")
_episodes: OrderedDict[str, CustomerServiceEnv] = OrderedDict()

OrderId = Annotated[str, Field(description="订单号")]


def _env(ctx: Context) -> CustomerServiceEnv:
    meta: Any = ctx.request_context.meta or {}
    key = str(meta.get(EPISODE_META, ""))
    env = _episodes.get(key)
    if env is None:
        env = _episodes[key] = CustomerServiceEnv()
        while len(_episodes) > MAX_EPISODES:
            _episodes.popitem(last=False)
    return env


@server.tool(description="建售后工单")
def create_ticket(
    order_id: OrderId, issue: Annotated[str, Field(description="破损、少件或错发")], ctx: Context
) -> str:
    return _env(ctx).create_ticket(order_id, issue)


@server.tool(description="查订单状态")
def lookup_order(order_id: OrderId, ctx: Context) -> str:
    return _env(ctx).lookup_order(order_id)


@server.tool(description="退款")
def refund_order(order_id: OrderId, ctx: Context) -> str:
    return _env(ctx).refund_order(order_id)


@server.tool(description="回复客户（最后一步）")
def reply(message: Annotated[str, Field(description="给客户的话")], ctx: Context) -> str:
    return _env(ctx).reply(message)


@server.tool(
    description="Start an episode from its task row (called by ark-trainer, not shown to the model)."
)
def reset(
    ctx: Context,
    task: str = "status",
    order_id: str = "",
    decoy_id: str | None = None,
    case_seed: int = 0,
    issue: str | None = None,
) -> str:
    env = _env(ctx)
    env.reset(task=task, order_id=order_id, decoy_id=decoy_id, case_seed=case_seed, issue=issue)
    return ""


@server.tool(
    description="The finished episode's score in [0, 1] (called by ark-trainer, not shown to the model)."
)
def get_reward(ctx: Context) -> float:
    return _env(ctx).get_reward()


def main() -> None:
    server.run()  # stdio


if __name__ == "__main__":
    main()
