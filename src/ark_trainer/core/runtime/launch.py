"""Relaunch ``train`` through ``accelerate launch`` for several processes, machines, ZeRO or FSDP.

``--num_processes N`` (N > 1) or ``--launcher accelerate`` / ``--accelerate_config FILE`` make the command
the user typed check everything first (flags, model, data, rewards: nothing is written when a check fails),
then run::

    python -m accelerate.commands.launch [--config_file FILE] [--num_processes N]
        [--multi_gpu | (CPU) --multi_gpu with ACCELERATE_USE_CPU] -m ark_trainer train <the resolved flags>

accelerate starts the processes (torchrun underneath; DeepSpeed/FSDP per the config file); each child
sees ``ARK_TRAINER_LAUNCHED=1`` and runs the pipeline instead of relaunching again. On CPU the children
join a gloo process group (``PartialState(cpu=True)``, see ``ark_trainer.core.runtime.distributed``). The parent
waits and returns the children's exit code.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.core.runtime.system import free_port

log = logging.getLogger("ark_trainer")

CHILD_ENV = "ARK_TRAINER_LAUNCHED"


def is_child() -> bool:
    return os.environ.get(CHILD_ENV) == "1"


def wants_relaunch(num_processes: int, launcher: str) -> bool:
    return not is_child() and (num_processes > 1 or launcher == "accelerate")


def _flag_value(value: Any) -> str:
    return str(bool(value)) if isinstance(value, bool) else str(value)


def child_flags(flags: dict[str, Any]) -> list[str]:
    """The resolved config's flags (``flag_items()``) as ``train`` flags: the children run exactly what the
    parent checked."""
    out: list[str] = []
    for name, value in flags.items():
        if value is not None:
            out += [f"--{name}", _flag_value(value)]
    return out


@dataclass(frozen=True)
class LaunchSettings:
    """What the relaunch reads: ``--num_processes``, ``--accelerate_config``, ``--main_process_port``,
    ``--resume``, and the children's ``train`` flags (:func:`child_flags` of the resolved config)."""

    num_processes: int
    accelerate_config: str | None
    main_process_port: int | None
    resume: bool
    child_flags: tuple[str, ...]


def launch_command(launch: LaunchSettings, use_cpu: bool) -> list[str]:
    cmd = [sys.executable, "-m", "accelerate.commands.launch"]
    if launch.accelerate_config:
        cmd += ["--config_file", launch.accelerate_config]
        if launch.num_processes > 1:
            cmd += ["--num_processes", str(launch.num_processes)]
    else:
        # --multi_gpu selects torchrun; on CPU the children pick gloo themselves (ACCELERATE_USE_CPU).
        # accelerate's own --cpu flag would start a single process (several CPU processes need mpirun).
        several = ["--multi_gpu"] if launch.num_processes > 1 else (["--cpu"] if use_cpu else [])
        cmd += [*several, "--num_processes", str(launch.num_processes), "--num_machines", "1"]
        cmd += ["--mixed_precision", "no", "--dynamo_backend", "no"]
    if launch.main_process_port or not launch.accelerate_config:
        cmd += ["--main_process_port", str(launch.main_process_port or free_port())]
    resume = ["--resume", "True"] if launch.resume else []  # CLI-only: not among the config's flag items
    return [*cmd, "-m", "ark_trainer", "train", *launch.child_flags, *resume]


def check_engine(path: str, use_cpu: bool) -> None:
    """Refuse, before any process starts, a DeepSpeed config this machine cannot run; say what FSDP does on CPU."""
    import importlib.util

    from ark_trainer.base.yamlsafe import read_yaml_file

    try:
        data = read_yaml_file(path)
    except UserError as exc:
        raise UserError(f"--accelerate_config: {exc.messages[0]}") from None
    engine = str((data or {}).get("distributed_type", "")).upper() if isinstance(data, dict) else ""
    if engine == "DEEPSPEED":
        if use_cpu:
            raise UserError(
                f"--accelerate_config: {path} uses DeepSpeed, which needs CUDA GPUs; on CPU drop the file "
                "and use --num_processes N"
            )
        if importlib.util.find_spec("deepspeed") is None:
            raise UserError(
                f"--accelerate_config: {path} uses DeepSpeed, which is not installed (pip install deepspeed)"
            )
    if engine == "FSDP" and use_cpu:
        print(
            f"warning: --accelerate_config: {path} asks for FSDP, which shards only on GPUs; on CPU accelerate "
            "runs the processes as plain data parallel",
            file=sys.stderr,
            flush=True,
        )


def relaunch(launch: LaunchSettings, use_cpu: bool) -> None:
    """Run the training through accelerate and wait; raises when the children fail."""
    processes = launch.num_processes
    if launch.accelerate_config:
        if not os.path.isfile(launch.accelerate_config):
            raise UserError(f"--accelerate_config: no such file {launch.accelerate_config!r}")
        check_engine(launch.accelerate_config, use_cpu)
    if processes > 1 and not use_cpu:
        import torch

        if torch.cuda.device_count() < processes and not launch.accelerate_config:
            raise UserError(
                f"--num_processes: {processes} processes need {processes} GPUs; this machine has "
                f"{torch.cuda.device_count()} (use --device cpu for CPU processes)"
            )
    cmd = launch_command(launch, use_cpu)
    env = {**os.environ, CHILD_ENV: "1"}
    if use_cpu:
        env["ACCELERATE_USE_CPU"] = "true"
        env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // processes)))
    log.info("relaunching through accelerate: %s", " ".join(cmd[:12]) + " ...")
    print(f"launching {processes} process(es) through accelerate", file=sys.stderr, flush=True)
    rc = subprocess.run(cmd, env=env, check=False).returncode
    if rc != 0:
        raise UserError(
            f"accelerate launch: the training processes exited with code {rc} (see the log above)"
        )
