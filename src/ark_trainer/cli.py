"""The ``ark-trainer`` / ``ark-trainer-inner`` command line (one program, two names).

Commands stay thin: they parse, then call the pipeline; heavy imports happen inside the command.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

from ark_trainer.app.commands.args import given_flags, opt
from ark_trainer.base.errors import UserError
from ark_trainer.stages.registry import config_class

PROG = (
    os.path.basename(sys.argv[0])
    if os.path.basename(sys.argv[0]).startswith("ark-trainer")
    else "ark-trainer"
)

INTRO = """\
RFT+GRPO post-training for OpenClaw agents, end to end.

First use, on the embedded default (synthetic customer-service QC data, a tiny model shipped with the package):

  ark-trainer demo --output_dir ark-demo        # data, base model, RFT -> GRPO, eval, report
  open ark-demo/report.html

Then the reference templates run as they are, on the demo's data and model or on your own:

  ark-trainer-inner train --strategy RFT+GRPO --task_name 客服质检_agent_training \\
    --model_path ark-demo/base_model --data_path ark-demo/data/train.jsonl \\
    --output_dir runs/qc --openclaw_env True --eval_auto True \\
    --max_train_steps 60 --batch_size 8 --log_dir runs/qc-logs

  ark-trainer status runs/qc                    # heartbeat: running, stalled, dead or finished
  ark-trainer report runs/qc                    # rebuild report.md / report.html from the run folder
"""


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag in one line and exits 2."""

    def error(self, message: str):  # noqa: D401 - argparse API
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


@dataclass
class DemoOptions:
    """``ark-trainer demo``: the whole pipeline on the embedded default."""

    output_dir: str = opt("ark-demo", "run folder (default: ./ark-demo)")
    task: str = opt(
        "qc",
        "qc: customer-service quality inspection (one answer per prompt); agent: customer-service tasks "
        "solved with tool calls, trained over whole episodes; loop: the live loop measured, simulated users "
        "teaching a served QC model a kind of case it never saw (docs/loop.md) (default: qc)",
        choices=("qc", "agent", "loop"),
    )
    seed: int = opt(0, "seed for data, model and training (default: 0)")
    n_train: int | None = opt(None, "training dialogues or tasks (default: the demo's size)")
    n_eval: int | None = opt(
        None,
        "held-out eval dialogues or tasks (default: 300 for --task qc, 240 for --task agent; with "
        "--base_model 100 and 60)",
    )
    max_train_steps: int | None = opt(None, "RFT + GRPO steps (default: tuned)")
    overwrite_output_dir: bool = opt(False, "reuse an output_dir that already holds a run")
    base_model: str | None = opt(
        None,
        "the demo on a real model instead of the toy: a Hugging Face folder, a .gguf file or ollama:NAME, "
        "with settings for a real model (--task qc: presets/demo_real.yaml, 100 held-out dialogues; --task "
        "agent: presets/demo_agent_real.yaml, 60 held-out tasks, the project's tool-call template if the "
        "model's own renders no tools); see docs/real-models.md and docs/agents.md",
    )
    lang: str = opt(
        "zh",
        "--task qc: the language of the QC data, zh (Chinese, the default task) or en (English, for a small "
        "English model such as SmolLM2; the labels stay the same types) (default: zh)",
        choices=("zh", "en"),
    )
    rounds: int = opt(3, "--task loop: rounds the loop decides before the demo ends (default: 3)")
    poison_share: float = opt(
        0.5,
        "--task loop: share of the last round's sessions whose users teach wrong answers (a wrong type, a "
        "credential request, an API key); 0: no poison round (default: 0.5)",
    )
    openclaw_share: float = opt(
        0.1,
        "--task loop: share of sessions one user aims to send through the real `openclaw agent --local` (the "
        "rest go straight to the server in OpenClaw's request shape; slow OpenClaw turns reach less, the "
        "report says how much); 0 needs no OpenClaw (default: 0.1)",
    )
    mde_points: float = opt(
        20.0,
        "--task loop: the smallest difference in task accuracy (points) the gate must detect; sizes the "
        "held-out set (default: 20)",
    )
    tools: str = opt(
        "python",
        "--task agent: the backend's tools as Python methods (python) or from the demo's MCP server over "
        "stdio (mcp) (default: python)",
        choices=("python", "mcp"),
    )


@dataclass
class RunDirOptions:
    """``report`` and ``status``: one run folder."""

    run_dir: str = opt(None, "the --output_dir of a run", positional=True)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description=INTRO, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    from ark_trainer.app.commands import register_all

    register_all(
        sub
    )  # every command, through the plug-in hook: this module's, then ark_trainer/app/commands'
    return parser


def register_commands(register) -> None:
    """The plug-in hook (``ark_trainer.base.plugins``) that adds ``train``, ``demo``, ``report`` and ``status``."""
    # train: only the flags given reach the config, which merges --config YAML and checks them all, grouped
    # by field metadata; every registered stage's options, a plug-in stage's too
    register(
        "train",
        config_class(),
        _cmd_train,
        help="run RFT -> GRPO -> eval -> report (the reference tool's flags)",
        given_only=True,
        show_defaults=True,
    )
    register(
        "demo", DemoOptions, _cmd_demo, help="run the whole pipeline on the embedded default (offline, CPU)"
    )
    register(
        "report", RunDirOptions, _cmd_report, help="rebuild OUT/report.md and report.html from a run folder"
    )
    register(
        "status",
        RunDirOptions,
        _cmd_status,
        help="show a run's heartbeat (running, stalled, dead, finished) or a live loop's state",
    )


def train_flags(args: argparse.Namespace) -> dict:
    """The config flags a user gave on a ``train`` command line (argparse's own keys dropped)."""
    return given_flags(args)


def _cmd_train(flags: dict) -> int:
    """``train``: ``flags`` are the flags given, as raw text; the config layer checks them all at once."""
    from ark_trainer.core.config import resolve_config

    try:
        cfg = resolve_config(config_class(), flags)
    except UserError as exc:  # the folders and files are checked too: every problem at once
        from ark_trainer.data.inputs import raw_input_problems

        raise UserError(*exc.messages, *raw_input_problems(flags)) from None
    from ark_trainer.core.runtime.launch import is_child
    from ark_trainer.services.train import run_train

    out = run_train(cfg)
    if not is_child():  # under --num_processes the launching process says it once, when all have ended
        print(f"done: model in {out / 'model'}, report in {out / 'report.html'}")
    return 0


def _cmd_demo(args: DemoOptions) -> int:
    from ark_trainer.app.demo.run import run_agent_demo, run_demo

    if args.tools != "python" and args.task != "agent":
        raise UserError("--tools: only with --task agent (the QC demo has no tools)")
    if args.lang != "zh" and args.task != "qc":
        raise UserError("--lang: only with --task qc (the agent demo's tasks are in Chinese)")
    out_dir, seed, overwrite = Path(args.output_dir), args.seed, args.overwrite_output_dir
    n_train, n_eval, steps = args.n_train, args.n_eval, args.max_train_steps
    loop_only = {"rounds": 3, "poison_share": 0.5, "openclaw_share": 0.1, "mde_points": 20.0}
    if args.task != "loop" and (given := [k for k, v in loop_only.items() if getattr(args, k) != v]):
        raise UserError(f"--{given[0]}: only with --task loop")
    if args.task == "loop":
        return _loop_demo(args)
    if args.task == "agent":
        out = run_agent_demo(
            out_dir, seed=seed, overwrite=overwrite, n_train=n_train, n_eval=n_eval, max_train_steps=steps,
            tools=args.tools, base_model=args.base_model,
        )  # fmt: skip
    else:
        out = run_demo(
            out_dir, seed=seed, overwrite=overwrite, n_train=n_train, n_eval=n_eval, max_train_steps=steps,
            base_model=args.base_model, lang=args.lang,
        )  # fmt: skip
    print(f"demo done: report in {out / 'report.md'} and {out / 'report.html'}")
    return 0


def _loop_demo(args: DemoOptions) -> int:
    from ark_trainer.app.demo.loop_run import run_loop_demo

    for name in ("n_train", "n_eval", "max_train_steps"):
        if getattr(args, name) is not None:
            raise UserError(f"--{name}: not with --task loop (its sizes follow --mde_points and --rounds)")
    out = Path(args.output_dir)
    figures = run_loop_demo(
        out, seed=args.seed, rounds=args.rounds, poison_share=args.poison_share,
        openclaw_share=args.openclaw_share, mde_points=args.mde_points, base_model=args.base_model,
        overwrite=args.overwrite_output_dir,
    )  # fmt: skip
    print(f"demo done: report in {out / 'loop_report.md'} and {out / 'loop_report.json'}")
    secrets = figures["poison"]["secrets_in_round_data"]
    if secrets:
        print(f"demo FAILED: {secrets} secrets reached a round's training data", file=sys.stderr)
        return 1
    return 0


def _cmd_report(args: RunDirOptions) -> int:
    from ark_trainer.stages.report import build_report

    md, html = build_report(Path(args.run_dir))
    print(f"wrote {md} and {html}")
    return 0


def _cmd_status(args: RunDirOptions) -> int:
    from ark_trainer.core.runtime.estimate import duration, expected_left
    from ark_trainer.core.runtime.monitor import read_status

    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: no such run folder")
    from ark_trainer.services.loop.state import is_loop, load_state

    if is_loop(run_dir):  # a live loop's folder: serving round, turns, training, promotions
        from ark_trainer.services.loop.report import status_lines

        print("\n".join(status_lines(run_dir, load_state(run_dir) or {})))
        return 0
    try:
        state, beat = read_status(run_dir)
    except UserError:  # heartbeat.json holds what no run writes there: the line names the field
        raise
    except (ValueError, TypeError, AttributeError, OverflowError, RecursionError):
        raise UserError(
            f"{run_dir}: heartbeat.json is not a heartbeat of ours; delete it, or resume the run"
        ) from None
    if state == "unknown":
        raise UserError(f"{run_dir}: no heartbeat.json (not a run folder, or --auto_heartbeat False)")
    from ark_trainer.data.text import terminal_safe as safe  # heartbeat.json is a file anyone may have edited

    step, total, eta = beat.get("step", 0), beat.get("total", 0), beat.get("eta_seconds")
    eta_text = f", ETA {eta:.0f}s" if isinstance(eta, int | float) and state == "running" else ""
    stage = beat.get("stage")
    unit = (
        "step" if isinstance(stage, str) and stage in training_stages() else "prompt"
    )  # eval/probe/sampling
    detail = f" ({safe(beat['detail'])})" if beat.get("detail") else ""  # inside a generation batch
    print(
        f"{safe(state)}: stage {safe(stage)}, {unit} {safe(step)}/{safe(total)}{detail}{eta_text}, "
        f"pid {safe(beat.get('pid'))}, last beat {safe(beat.get('updated_at'))}"
    )
    if line := _sizes_line(run_dir):
        print(line)  # which prompts the run's figures are on, and what they can tell apart
    if state == "running" and (left := expected_left(run_dir, beat)) is not None:
        print(f"expected time left for the whole run: about {duration(left)} (plan.json: estimate)")
    if state == "stalled":
        print("warning: the run made no progress (watchdog) or its heartbeat stopped; see the log's stacks")
    elif state == "stopped":
        print("stopped by the user; continue it with train --resume True (from its newest checkpoint)")
    elif state == "dead":
        print("warning: the process is gone without finishing; continue it with train --resume True")
    metrics = beat.get("metrics") if isinstance(beat.get("metrics"), dict) else {}
    if metrics:
        shown = [f"{safe(k, 60)}={v:.4g}" if isinstance(v, int | float) else f"{safe(k, 60)}={safe(v, 60)}"
                 for k, v in list(metrics.items())[:8]]  # fmt: skip
        print("last metrics: " + ", ".join(shown))
    return 0 if state in ("running", "finished") else 1


def _sizes_line(run_dir: Path) -> str | None:
    """The splits' sizes line (``data/split.sizes_line``) from ``data/stats.json``; None without one (a broken
    file is the report's to name: ``status`` is about the heartbeat)."""
    from ark_trainer.core.runfolder import RunFolder
    from ark_trainer.data.split import sizes_line

    try:
        return sizes_line(RunFolder(run_dir).data_stats().get("splits"))
    except ValueError:
        return None


def training_stages() -> set[str]:
    """Stages whose heartbeat counts optimizer steps (every stage of the strategy table, and ``rm train``);
    the others (eval_*, probe, *_sampling) count prompts."""
    from ark_trainer.base.strategies import strategy_table

    return {"rm", *(name for strategy in strategy_table().values() for name in strategy.stages)}


def _reap_orphan_servers() -> None:
    """Model servers a killed command left running (``deploy/process.reap_orphans``): stopped, one line."""
    from ark_trainer.services.deploy.process import reap_orphans

    reaped = reap_orphans()
    if reaped:
        pids = ", ".join(map(str, reaped))
        print(
            f"note: stopped {len(reaped)} model server(s) a command that ended left running (pid {pids})",
            file=sys.stderr,
        )


def main(argv: list[str] | None = None) -> int:
    # Offline by design: nothing may be fetched from a model hub at run time.
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ.setdefault(var, "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # Weight-loading, shard-writing and dataset-mapping bars say nothing a user acts on; the training,
    # sampling and evaluation bars stay (set these to 0 to see them all again).
    for var in ("HF_HUB_DISABLE_PROGRESS_BARS", "HF_DATASETS_DISABLE_PROGRESS_BARS"):
        os.environ.setdefault(var, "1")
    # Library deprecation chatter is not the user's business; real problems still surface as errors.
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 0
    _reap_orphan_servers()
    try:
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the try, not at interpreter exit
        return code
    except UserError as exc:
        for message in exc.messages:
            print(f"error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (Terminated) during a run
        from ark_trainer.core.runtime.signals import Terminated

        terminated = isinstance(exc, Terminated)
        resume = "; continue it with the same command and --resume True" if args.command == "train" else ""
        print("terminated" if terminated else f"stopped by the user{resume}", file=sys.stderr)
        return 143 if terminated else 130
    except BrokenPipeError:  # `ark-trainer plan ... --json | head`: the reader left; end quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's flush at exit must not fail again
        return 141
    finally:
        _stop_grader_code()


def _stop_grader_code() -> None:
    """Kill the python graders' processes (and what they started) when the command ends, also when it is
    called in-process; ``atexit`` and each host's watch of its parent cover the rest."""
    hosts = sys.modules.get("ark_trainer.rewards.codehost")
    if hosts is not None:
        hosts.stop_all()


if __name__ == "__main__":
    sys.exit(main())
