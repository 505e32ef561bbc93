"""A task row of the agent demo, of a kind asked for, for the agent demo's tests."""

from __future__ import annotations

from ark_trainer.app.demo import agent_env
from ark_trainer.app.demo.agent_data import generate_tasks


def _row(task: str, decoy: bool = False, refundable: bool | None = None) -> dict:
    """A task row of ``task`` (with a decoy order, or not; whose order is refundable, or not, if given)."""
    for row in generate_tasks(400, seed=5):
        if row["task"] != task or bool(row["decoy_id"]) != decoy:
            continue
        status = agent_env.order_status(row["order_id"], row["case_seed"])
        if refundable is None or agent_env.REFUNDABLE[status] == refundable:
            return row
    raise AssertionError("no such row")
