"""A one-file agent environment for ``ark-trainer train --env examples/agent_env/shop_env.py:make_env``.

The environment contract (docs/agents.md): ``make_env()`` returns a fresh environment; ``reset(**row)``
starts an episode from a data row's columns; every other public method is a tool (its type hints and
docstring become the schema the model sees); ``get_reward()`` scores the finished episode in [0, 1]
(1.0 = solved). Data rows look like::

    {"prompt": [{"role": "user", "content": "Where is my order A1?"}], "order_id": "A1", "expected_status": "shipped"}
"""

from __future__ import annotations

ORDERS = {
    "A1": {"status": "shipped", "total": 25},
    "B2": {"status": "pending", "total": 40},
    "C3": {"status": "delivered", "total": 12},
    "D4": {"status": "cancelled", "total": 60},
}


class ShopEnv:
    """A tiny order desk: look orders up, refund them; solved when the customer hears the right status."""

    def reset(self, order_id: str | None = None, expected_status: str | None = None, **row) -> str | None:
        self.order_id, self.expected = order_id, expected_status
        self.looked_up: set[str] = set()
        self.refunded: set[str] = set()
        return None  # or text appended to the user's message

    def lookup_order(self, order_id: str) -> str:
        """Look up an order's status.

        Args:
            order_id: The order's id, e.g. A1.
        """
        if order_id not in ORDERS:
            raise KeyError(f"no order {order_id}")
        self.looked_up.add(order_id)
        return f"order {order_id}: {ORDERS[order_id]['status']}"

    def refund_order(self, order_id: str) -> str:
        """Refund an order that has not shipped.

        Args:
            order_id: The order's id.
        """
        if ORDERS.get(order_id, {}).get("status") != "pending":
            return f"order {order_id} cannot be refunded"
        self.refunded.add(order_id)
        return f"order {order_id} refunded"

    def get_reward(self) -> float:
        """1.0 when the episode looked up the customer's own order, 0 otherwise."""
        return 1.0 if self.order_id in self.looked_up else 0.0


def make_env() -> ShopEnv:
    return ShopEnv()
