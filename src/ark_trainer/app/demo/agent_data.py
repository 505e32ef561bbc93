"""The agent demo's tasks and trajectories: customer requests about orders, and episodes that serve them.

A task row is what ``ark-trainer train --env ark_trainer.app.demo.agent_env:make_env`` reads::

    {"prompt": [{"role": "user", "content": "上次的 C3 没事，订单 A1 到哪了？"}],
     "task": "status", "order_id": "A1", "decoy_id": "C3", "issue": "", "case_seed": 52133}

Every column but ``prompt`` reaches ``CustomerServiceEnv.reset``. About half the requests mention an older
order first (the decoy), so the agent has to take the order id from the right place.

``play`` runs a scripted agent through the real environment and returns the episode as chat messages
(assistant ``tool_calls``, ``tool`` results exactly as the environment returned them, a last assistant turn):
with ``NO_FLAWS`` the gold trajectory, with ``Flaws`` the deliberately careless agent whose episodes warm the
demo's base model up (see ``agent_model``).

Run it::

    PYTHONPATH=src python -m ark_trainer.app.demo.agent_data OUT_DIR   # writes OUT_DIR/train.jsonl, eval.jsonl
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ark_trainer.app.demo.agent_env import (
    ISSUES,
    ORDER_IDS,
    STATUSES,
    TASKS,
    CustomerServiceEnv,
    tool_names,
)
from ark_trainer.base.fileio import write_jsonl

DECOY_SHARE = 0.5  # share of requests that mention an older order before the one they are about
STATUS_PROMPTS = ("订单 {id} 到哪了？", "查下订单 {id} 的状态", "订单 {id} 发货了吗？")
REFUND_PROMPTS = ("订单 {id} 要退款", "我想退掉订单 {id}", "订单 {id} 不要了，请退款")
TICKET_PROMPTS = {
    "破损": ("订单 {id} 收到的东西坏了", "订单 {id} 的商品破了"),
    "少件": ("订单 {id} 少了一件", "订单 {id} 缺了东西"),
    "错发": ("订单 {id} 发错货了", "订单 {id} 给我发错了"),
}
DECOY_PREFIX = "上次的 {decoy} 没事，"
FINAL_TEXT = "完成"  # the assistant's last turn, after the reply tool has answered the customer
EVAL_SEED_OFFSET = 1  # held-out tasks use seed + 1 (and never repeat a training prompt)


@dataclass(frozen=True)
class Flaws:
    """How careless the scripted agent is: each share is the chance of that mistake where it can happen."""

    decoy_id: float = 0.0  # act on the older order the request mentions first
    wrong_status: float = 0.0  # status task: tell the customer a status other than the looked-up one
    skip_refund: float = 0.0  # refundable order: open a ticket instead of refunding (a forbidden action)
    false_refund: float = 0.0  # order not refundable: tell the customer it was refunded
    wrong_issue: float = 0.0  # ticket task: file the ticket under another issue


NO_FLAWS = Flaws()
# The careless agent: the toy base model's warm-up episodes (``agent_model``) and the candidate episodes of
# the training tasks for a real model (``write_agent_data(n_candidates=...)``).
CARELESS = Flaws(decoy_id=0.6, wrong_status=0.4, skip_refund=0.5, false_refund=0.4, wrong_issue=0.4)


def _other(rng: random.Random, choices: Iterable[str], right: str) -> str:
    return rng.choice([c for c in choices if c != right])


def task_row(rng: random.Random, task: str | None = None) -> dict[str, Any]:
    """One task row, drawn from ``rng`` (its task too unless given)."""
    task = task or rng.choice(TASKS)
    order_id = rng.choice(ORDER_IDS)
    decoy = _other(rng, ORDER_IDS, order_id) if rng.random() < DECOY_SHARE else ""
    issue = rng.choice(ISSUES) if task == "ticket" else ""
    templates = {"status": STATUS_PROMPTS, "refund": REFUND_PROMPTS}.get(task) or TICKET_PROMPTS[issue]
    text = rng.choice(templates).format(id=order_id)
    if decoy:
        text = DECOY_PREFIX.format(decoy=decoy) + text
    return {
        "prompt": [{"role": "user", "content": text}],
        "task": task,
        "order_id": order_id,
        "decoy_id": decoy,
        "issue": issue,
        "case_seed": rng.randrange(1_000_000),
    }


def task_key(row: dict) -> str:
    """What makes a task: its request and its backend (the same request on another ``case_seed`` is another
    task: the order's status differs)."""
    return f"{row['prompt'][0]['content']}#{row['case_seed']}"


def generate_tasks(n: int, seed: int, exclude: Iterable[str] = ()) -> list[dict[str, Any]]:
    """``n`` task rows from ``seed``, tasks in turn (status, refund, ticket); none whose ``task_key`` is in
    ``exclude`` or repeated."""
    rng = random.Random(f"ark-agent-demo:tasks:{seed}")
    seen = set(exclude)
    rows: list[dict[str, Any]] = []
    while len(rows) < n:
        row = task_row(rng, TASKS[len(rows) % len(TASKS)])
        if task_key(row) not in seen:
            seen.add(task_key(row))
            rows.append(row)
    return rows


def env_tools(env: CustomerServiceEnv) -> list:
    """The environment's tools as bound methods, in TRL's order (what the chat template is given)."""
    return [getattr(env, name) for name in tool_names(env)]


def _call(env: CustomerServiceEnv, messages: list[dict], name: str, **arguments: str) -> str:
    """Call a tool as the model would: one assistant turn with the call, then the tool's message."""
    result = getattr(env, name)(**arguments)
    call = {"type": "function", "function": {"name": name, "arguments": arguments}}
    messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
    messages.append({"role": "tool", "name": name, "content": result})
    return result


def _serve(env: CustomerServiceEnv, row: dict, msgs: list[dict], rng: random.Random, flaws: Flaws) -> str:
    """Act on the request; return the message for the customer (it repeats what the backend answered)."""
    order_id = row["order_id"]
    if row["decoy_id"] and rng.random() < flaws.decoy_id:
        order_id = row["decoy_id"]
    if row["task"] == "ticket":
        issue = _other(rng, ISSUES, row["issue"]) if rng.random() < flaws.wrong_issue else row["issue"]
        return _call(env, msgs, "create_ticket", order_id=order_id, issue=issue)
    looked = _call(env, msgs, "lookup_order", order_id=order_id)
    status = next((s for s in STATUSES if s in looked), "")
    if not status:
        return looked
    if row["task"] == "status":
        return f"{order_id}：{_other(rng, STATUSES, status) if rng.random() < flaws.wrong_status else status}"
    if "不可退款" in looked:
        return f"{order_id}已退款" if rng.random() < flaws.false_refund else f"{order_id}不可退款"
    if rng.random() < flaws.skip_refund:
        return _call(env, msgs, "create_ticket", order_id=order_id, issue=rng.choice(ISSUES))
    return _call(env, msgs, "refund_order", order_id=order_id)


def play(
    row: dict, flaws: Flaws = NO_FLAWS, rng: random.Random | None = None
) -> tuple[list[dict], CustomerServiceEnv]:
    """Run the scripted agent on ``row`` through a fresh environment: (the episode's messages, the env)."""
    env = CustomerServiceEnv()
    env.reset(**row)
    messages = [dict(m) for m in row["prompt"]]
    message = _serve(env, row, messages, rng or random.Random(0), flaws)
    _call(env, messages, "reply", message=message)
    messages.append({"role": "assistant", "content": FINAL_TEXT})
    return messages, env


def gold_trajectories(rows: Iterable[dict]) -> list[list[dict]]:
    """The right episode of each row (every one solves its task: ``get_reward() == 1.0``)."""
    return [play(row)[0] for row in rows]


def with_candidates(rows: list[dict], n: int, seed: int, flaws: Flaws = CARELESS) -> list[dict]:
    """``rows``, each with ``candidates``: ``n`` episodes of the careless agent (the messages after the prompt),
    some solving the task and some not, for RFT to replay, score and choose from (as the QC data's noisy
    candidate answers)."""
    rng = random.Random(f"ark-agent-demo:candidates:{seed}")
    out = []
    for row in rows:
        episodes = [play(row, flaws, rng)[0][len(row["prompt"]) :] for _ in range(n)]
        out.append({**row, "candidates": episodes})
    return out


def write_agent_data(
    data_dir: Path, n_train: int = 600, n_eval: int = 240, seed: int = 0, n_candidates: int = 0
) -> tuple[Path, Path]:
    """Write ``train.jsonl`` and the held-out ``eval.jsonl`` (another seed, no task shared) under ``data_dir``;
    with ``n_candidates``, each training task carries that many candidate episodes (:func:`with_candidates`).

    With 16 order ids the requests themselves repeat (a held-out request may read like a training one), but
    not the tasks: the orders' states come from each row's ``case_seed``."""
    train = generate_tasks(n_train, seed)
    held_out = generate_tasks(n_eval, seed + EVAL_SEED_OFFSET, exclude=map(task_key, train))
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    train_path, eval_path = data_dir / "train.jsonl", data_dir / "eval.jsonl"
    write_jsonl(train_path, with_candidates(train, n_candidates, seed) if n_candidates else train)
    write_jsonl(eval_path, held_out)
    return train_path, eval_path


if __name__ == "__main__":
    for written in write_agent_data(Path(sys.argv[1] if len(sys.argv) > 1 else "agent_data")):
        print(written)
