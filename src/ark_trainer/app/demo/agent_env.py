"""The agent demo's environment: a tiny synthetic customer-service backend (orders, refunds, tickets).

An environment in the TRL ``environment_factory`` style: ``reset(**row)`` builds the episode's backend from
the data row, every other public method is a tool the model calls (its signature and docstring become the
JSON schema the chat template shows), and ``get_reward()`` scores the finished episode from the backend's
state. Select it with ``--env ark_trainer.app.demo.agent_env:make_env``.

A row names a task (``status`` / ``refund`` / ``ticket``), the customer's ``order_id`` and a ``case_seed``;
the backend is a pure function of them, so an episode replays identically. The prompt may also mention a
second, older order (a decoy): acting on it is a wrong argument. Each task ends with the ``reply`` tool, the
message to the customer, so that ``get_reward`` sees the fact the agent told the customer:

- ``status``: ``lookup_order(order_id)``, then a reply naming the order's status (e.g. 运输中);
- ``refund``: ``lookup_order(order_id)``, then ``refund_order(order_id)`` when the lookup says 可退款 and a
  reply saying 已退款, or no refund and a reply saying 不可退款;
- ``ticket``: ``create_ticket(order_id, issue)`` with the issue the customer describes (破损 / 少件 / 错发),
  then a reply giving the ticket number.

Tool outputs are a few characters long: the demo's model has a 512-token window.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

STATUSES = ("待发货", "运输中", "已签收")
REFUNDABLE = {"待发货": True, "运输中": False, "已签收": True}
ISSUES = ("破损", "少件", "错发")
TASKS = ("status", "refund", "ticket")
# Order ids and ticket numbers are a letter and a digit (A1 .. H2, K1 .. K9): the demo's tokenizer keeps each
# one whole, so that using the right id is choosing where to copy it from, not spelling digits one by one
# (which a 2-layer model warmed up for a minute does not learn).
ORDER_IDS = tuple(f"{letter}{digit}" for letter in "ABCDEFGH" for digit in (1, 2))
TICKET_IDS = tuple(f"K{digit}" for digit in range(1, 10))
PARTIAL = 0.5  # most an unsolved episode earns: half, times the share of the required actions done right


@dataclass
class Order:
    status: str

    @property
    def refundable(self) -> bool:
        return REFUNDABLE[self.status]


@dataclass
class EpisodeLog:
    """What the agent did: its successful actions and its reply (the backend's side of the episode)."""

    looked_up: list[str] = field(default_factory=list)
    refunded: list[str] = field(default_factory=list)
    tickets: list[tuple[str, str]] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)


def order_status(order_id: str, case_seed: int) -> str:
    """The status of ``order_id`` in the backend of ``case_seed`` (deterministic)."""
    return random.Random(f"ark-agent-demo:{case_seed}:{order_id}").choice(STATUSES)


def ticket_number(case_seed: int) -> str:
    """The number the backend of ``case_seed`` gives its next ticket (one of ``TICKET_IDS``)."""
    return random.Random(f"ark-agent-demo:ticket:{case_seed}").choice(TICKET_IDS)


class CustomerServiceEnv:
    """Orders, refunds and after-sales tickets of one customer; one instance per episode at a time."""

    def __init__(self) -> None:
        self._reset_state("status", "", "", 0, "")

    def _reset_state(self, task: str, order_id: str, decoy_id: str, case_seed: int, issue: str) -> None:
        self.task, self.order_id, self.issue, self.case_seed = task, order_id, issue, case_seed
        ids = [i for i in (order_id, decoy_id) if i]
        self.orders = {i: Order(order_status(i, case_seed)) for i in ids}
        self.log = EpisodeLog()

    def reset(self, **row) -> str | None:
        """Start an episode from a data row (its columns as keyword arguments; others are ignored)."""
        task = row.get("task", "status")
        if task not in TASKS:
            raise ValueError(f"task: unknown {task!r}; use one of {', '.join(TASKS)}")
        self._reset_state(
            task,
            str(row.get("order_id", "")),
            str(row.get("decoy_id") or ""),
            int(row.get("case_seed", 0)),
            str(row.get("issue") or ""),
        )
        return None

    def lookup_order(self, order_id: str) -> str:
        """查订单状态

        Args:
            order_id: 订单号
        """
        order = self.orders.get(order_id)
        if order is None:
            return f"无订单{order_id}"
        self.log.looked_up.append(order_id)
        return f"{order_id}：{order.status}，{'可退款' if order.refundable else '不可退款'}"

    def refund_order(self, order_id: str) -> str:
        """退款

        Args:
            order_id: 订单号
        """
        order = self.orders.get(order_id)
        if order is None:
            return f"无订单{order_id}"
        if not order.refundable:
            return f"{order_id}不可退款"
        if order_id not in self.log.refunded:
            self.log.refunded.append(order_id)
        return f"{order_id}已退款"

    def create_ticket(self, order_id: str, issue: str) -> str:
        """建售后工单

        Args:
            order_id: 订单号
            issue: 破损、少件或错发
        """
        if order_id not in self.orders:
            return f"无订单{order_id}"
        if issue not in ISSUES:
            return f"问题须为{'、'.join(ISSUES)}"
        self.log.tickets.append((order_id, issue))
        return f"工单号{ticket_number(self.case_seed)}"

    def reply(self, message: str) -> str:
        """回复客户（最后一步）

        Args:
            message: 给客户的话
        """
        self.log.replies.append(str(message))
        return "已回复"

    def _expected_fact(self) -> str:
        """The fact the reply must state for this episode's task (private: every public method is a tool)."""
        order = self.orders.get(self.order_id)
        if self.task == "ticket":
            return ticket_number(self.case_seed)
        if order is None:
            return ""
        if self.task == "status":
            return order.status
        return "已退款" if order.refundable else "不可退款"

    def _checks(self) -> tuple[list[bool], bool]:
        """(the required actions, each done right?; was anything done that the task forbids?)"""
        log, oid = self.log, self.order_id
        others_refunded = [i for i in log.refunded if i != oid]
        if self.task == "ticket":
            wrong = bool(log.refunded) or any(t != (oid, self.issue) for t in log.tickets)
            return [(oid, self.issue) in log.tickets], wrong
        should_refund = self.task == "refund" and self.orders[oid].refundable
        wrong = bool(log.tickets) or bool(others_refunded) or (oid in log.refunded and not should_refund)
        checks = [oid in log.looked_up]
        if should_refund:
            checks.append(oid in log.refunded)
        return checks, wrong

    def get_reward(self) -> float:
        """1.0 when solved: every required action done with the right arguments, nothing forbidden done, and
        one reply stating the right fact. Otherwise at most ``PARTIAL`` for the right actions; 0.0 after a
        forbidden action (a refund or ticket the customer did not ask for, or on the wrong order)."""
        if not self.orders:
            return 0.0
        checks, wrong = self._checks()
        if wrong:
            return 0.0
        replied_right = len(self.log.replies) == 1 and self._expected_fact() in self.log.replies[0]
        if all(checks) and replied_right:
            return 1.0
        return PARTIAL * sum(checks) / len(checks)


def tool_names(env: object) -> list[str]:
    """The tools of an environment as TRL lists them: public functions of its class other than ``reset`` and
    ``get_reward``, in name order."""
    import inspect

    return [
        name
        for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
        if not name.startswith("_") and name not in ("reset", "get_reward")
    ]


def make_env() -> CustomerServiceEnv:
    """The factory ``--env ark_trainer.app.demo.agent_env:make_env`` names."""
    return CustomerServiceEnv()
