"""``ark-trainer plan "<request>"`` and ``ark-trainer run "<request>" [--yes]``.

``plan`` reads a Chinese or English request and prints the run config it means (YAML, usable as
``train --config``; or JSON with ``--json``), the equivalent ``ark-trainer-inner train ...`` command, the
assumptions it made and the words it did not understand. ``run`` prints the same, asks to confirm (or
takes ``--yes``) and trains::

    ark-trainer plan "对当前客服质检Agent执行RFT+GRPO训练，优化合规性与用户满意度" --model_path M --data_path D.jsonl
    ark-trainer run "only GRPO, 300 steps, 16GB GPU, model ./m, data ./d.jsonl" --yes

A plan with a missing model or data still prints whole (exit 0), each missing item marked with the flag
or phrase that supplies it; ``run`` refuses such a plan (exit 2, one line per missing item). When the
request names an OpenClaw agent (当前Agent, agent main) ``run`` first collects its conversations.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

from ark_trainer.app.commands.args import opt
from ark_trainer.base.errors import UserError


@dataclass
class PlanOptions:
    request: str = opt(None, "what to train, in Chinese or English (quote it)", positional=True)
    model_path: str | None = opt(None, "base model folder (overrides the request)")
    data_path: str | None = opt(None, "training data JSONL (overrides the request)")
    output_dir: str | None = opt(None, "run folder (overrides the request)")
    config: str | None = opt(None, "YAML of train flags as defaults; what the request says overrides them")
    json: bool = opt(False, "print JSON instead of YAML", switch=True)
    llm_base_url: str | None = opt(
        None,
        "OpenAI-compatible server (…/v1) that fills the config instead of the built-in rules",
        aliases=("--llm-base-url",),
    )
    llm_model: str | None = opt(None, "model name for --llm_base_url", aliases=("--llm-model",))


@dataclass
class RunOptions(PlanOptions):
    yes: bool = opt(False, "start without asking", switch=True, aliases=("-y",))


def register_commands(register) -> None:
    """The plug-in hook (``ark_trainer.base.plugins``) that adds this module's commands."""
    register(
        "plan",
        PlanOptions,
        cmd_plan,
        help='turn a request ("RFT+GRPO on my QC agent, 1000 steps") into a run config',
    )
    register("run", RunOptions, cmd_run, help="plan a request, show it, confirm (or --yes), and train")


def _plan(args: PlanOptions):
    from ark_trainer.services.nl.plan import plan_request

    overrides = {
        "model_path": args.model_path,
        "data_path": args.data_path,
        "output_dir": args.output_dir,
        "config": args.config,
    }
    return plan_request(args.request, overrides, args.llm_base_url, args.llm_model)


def _show(plan, as_json: bool) -> None:
    if as_json:
        print(json.dumps(plan.as_json(), ensure_ascii=False, indent=2))
    else:
        print(plan.as_yaml(), end="")


def cmd_plan(args: PlanOptions) -> int:
    _show(_plan(args), args.json)
    return 0


def cmd_run(args: RunOptions) -> int:
    plan = _plan(args)
    _show(plan, args.json)
    if plan.missing:
        raise UserError(*(f"run: not started: {m}" for m in plan.missing))
    if not args.yes:
        if not sys.stdin.isatty():
            raise UserError("run: not confirmed; pass --yes to start training without asking")
        answer = input("Start training with this plan? [y/N] ").strip().lower()
        if answer not in ("y", "yes", "是", "好"):
            print("not started")
            return 1
    if plan.collect_agent is not None:
        from ark_trainer.core.folders import check_folder, claim_folder

        check_folder(plan.cfg.output_dir, "--output_dir")  # before the collected rows are written into it
        claim_folder(plan.cfg.output_dir)
        _collect(plan.collect_agent, plan.cfg.data_path)
    from ark_trainer.services.train import run_train

    out = run_train(plan.cfg)
    print(f"done: model in {out / 'model'}, report in {out / 'report.html'}")
    return 0


def _collect(agent: str, data_path: str) -> None:
    """The agent's conversations, scrubbed, into the run's data file (``data collect --openclaw``)."""
    from pathlib import Path

    from ark_trainer.data.collect import collect, write_rows

    if Path(data_path).is_file():  # an earlier run of this folder collected it; resuming needs the same rows
        print(f"using the conversations collected earlier in {data_path} (delete it to collect again)")
        return
    result = collect(agent=agent)
    if not result.rows:
        raise UserError(
            f"run: agent {agent} has no conversations in OpenClaw to train on (sessions: {result.sessions}, "
            f"legacy transcripts: {result.legacy}); talk to it first, or pass --data_path"
        )
    write_rows(result.rows, Path(data_path))
    scrubbed = ", ".join(f"{k} {v}" for k, v in sorted(result.scrubbed.items())) or "nothing"
    print(
        f"collected {len(result.rows)} rows from agent {agent}'s conversations ({result.sessions} sessions, "
        f"{result.legacy} legacy transcripts) into {data_path}; scrubbed: {scrubbed}"
    )
