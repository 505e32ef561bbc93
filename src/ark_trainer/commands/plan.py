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

import argparse
import json
import sys

from ark_trainer.errors import UserError


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("request", help="what to train, in Chinese or English (quote it)")
    parser.add_argument("--model_path", default=None, help="base model folder (overrides the request)")
    parser.add_argument("--data_path", default=None, help="training data JSONL (overrides the request)")
    parser.add_argument("--output_dir", default=None, help="run folder (overrides the request)")
    parser.add_argument(
        "--config", default=None, help="YAML of train flags as defaults; what the request says overrides them"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of YAML")
    parser.add_argument(
        "--llm-base-url",
        dest="llm_base_url",
        default=None,
        help="OpenAI-compatible server (…/v1) that fills the config instead of the built-in rules",
    )
    parser.add_argument("--llm-model", dest="llm_model", default=None, help="model name for --llm-base-url")


def register(sub) -> None:
    plan = sub.add_parser(
        "plan", help='turn a request ("RFT+GRPO on my QC agent, 1000 steps") into a run config'
    )
    _add_common(plan)
    plan.set_defaults(func=cmd_plan)
    run = sub.add_parser("run", help="plan a request, show it, confirm (or --yes), and train")
    _add_common(run)
    run.add_argument("--yes", "-y", action="store_true", help="start without asking")
    run.set_defaults(func=cmd_run)


def _plan(args: argparse.Namespace):
    from ark_trainer.nl.plan import make_plan

    overrides = {
        "model_path": args.model_path,
        "data_path": args.data_path,
        "output_dir": args.output_dir,
        "config": args.config,
    }
    return make_plan(args.request, overrides, args.llm_base_url, args.llm_model)


def _show(plan, as_json: bool) -> None:
    if as_json:
        print(json.dumps(plan.as_json(), ensure_ascii=False, indent=2))
    else:
        print(plan.as_yaml(), end="")


def cmd_plan(args: argparse.Namespace) -> int:
    _show(_plan(args), args.json)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
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
        _collect(plan.collect_agent, plan.cfg.data_path)
    from ark_trainer.pipeline import run_train

    out = run_train(plan.cfg)
    print(f"done: model in {out / 'model'}, report in {out / 'report.html'}")
    return 0


def _collect(agent: str, data_path: str) -> None:
    """The agent's conversations, scrubbed, into the run's data file (``data collect --openclaw``)."""
    from pathlib import Path

    from ark_trainer.openclaw.collect import collect, write_rows

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
