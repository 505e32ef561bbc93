"""``ark-trainer deploy OUT|MODEL [--agent ID] [--port P] [--prompt_shape S]`` and ``deploy [OUT] --status | --stop | --rollback``.

Serves OUT/model on 127.0.0.1 (``transformers serve``), smoke-tests it, then registers it in OpenClaw's
config as provider ``ark`` and sets the agent's primary model. See :mod:`ark_trainer.services.openclaw.deploy`, the
OpenClaw deploy target (:mod:`ark_trainer.services.deploy.targets`). ``OUT`` may also be a ``.gguf`` file or
``ollama:NAME[:TAG]``: it is converted once (``core/models/source.py``) into a serving folder of the per-user
cache, which is deployed like a run's. For Ollama or llama.cpp themselves, ``ark-trainer export`` writes
the GGUF file and Modelfile.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ark_trainer.app.commands.args import opt
from ark_trainer.base.errors import UserError
from ark_trainer.base.run_options import DEFAULT_DEPLOY_TARGET, deploy_targets


@dataclass
class DeployOptions:
    out: str | None = opt(
        None,
        "a run's --output_dir (holds model/), a model folder to serve as it is, a .gguf file or ollama:NAME[:TAG]",
        positional=True,
        nargs="?",
    )
    agent: str | None = opt(None, "OpenClaw agent id (default: every agent, agents.defaults)")
    port: int | None = opt(None, "server port on 127.0.0.1 (default: a free one)")
    status: bool = opt(False, "show the deployment (latest, or OUT's)", switch=True, exclusive="action")
    stop: bool = opt(False, "stop the model server (config unchanged)", switch=True, exclusive="action")
    rollback: bool = opt(
        False, "restore the config byte for byte, stop the server", switch=True, exclusive="action"
    )
    force: bool = opt(False, "with --rollback: restore even if the config changed since", switch=True)
    record: str | None = opt(
        None, "append every exchange the server answers, scrubbed, to this JSONL (default: off)"
    )
    prompt_shape: str = opt(
        "auto",
        "what the model is shown of OpenClaw's turns: auto (the shape it was trained on, "
        "model/ark_prompt_shape.json), bare, tools, openclaw-turns, openclaw",
        choices=("auto", "bare", "tools", "openclaw-turns", "openclaw"),
    )
    system_chars: int = opt(
        0, "characters of OpenClaw's system prompt shown to a bare-prompt model (default none)", low=0
    )
    target: str = opt(
        DEFAULT_DEPLOY_TARGET,
        lambda: (
            f"the client to hand the model to: a registered deploy target, {' or '.join(deploy_targets())} "
            f"(default: {DEFAULT_DEPLOY_TARGET})"
        ),
    )


def register_commands(register) -> None:
    """The plug-in hook (``ark_trainer.base.plugins``) that adds this module's command."""
    register(
        "deploy",
        DeployOptions,
        _cmd_deploy,
        help="serve OUT/model and make it the OpenClaw agent's model (with rollback)",
        description="Serve OUT/model on 127.0.0.1 and make it the OpenClaw agent's model (with rollback). "
        "To serve it with Ollama or llama.cpp instead, write a GGUF first: `ark-trainer export OUT --format "
        "gguf`, then `ollama create NAME -f OUT/export/Modelfile` or `llama-server -m OUT/export/model-f16.gguf`.",
    )


def _cmd_deploy(args: DeployOptions) -> int:
    from ark_trainer.services.deploy.targets import Serving, get_target

    deploy = get_target(args.target)
    if args.status:
        info = deploy.status(args.out)
        for key, value in info.items():
            print(f"{key:12} {value}")
        return 0 if info["server"] == "healthy" and info["deploy"] == "complete" else 1
    if args.stop:
        print("stopped the model server" if deploy.stop(args.out) else "the model server was not running")
        return 0
    if args.rollback:
        info = deploy.rollback(args.out, force=args.force)
        print(
            f"rollback: {info['config_path']}: {info['restored']}; server stopped: {info['server_stopped']}"
        )
        if info.get("server_kept"):
            print(f"rollback: {info['server_kept']}")
        return 0
    if args.out is None:
        raise UserError("deploy: give the run folder (OUT), or --status / --stop / --rollback")
    if args.port is not None:  # 0 is not "a free one" here: leaving the flag out is
        from ark_trainer.services.deploy.process import check_port_range

        check_port_range(args.port)
    if args.record:
        from ark_trainer.core.folders import check_output_file

        check_output_file(args.record, "--record")  # the turns are appended: never to a file of another kind
    serving = Serving(
        port=args.port, record_to=args.record, prompt_shape=args.prompt_shape, system_chars=args.system_chars
    )
    from ark_trainer.core.runtime.signals import sigterm_raises

    with sigterm_raises():  # SIGTERM unwinds like Ctrl-C: the deploy undoes what it started (server, config)
        deploy.deploy(serving_folder(args.out), serving, client={"agent": args.agent} if args.agent else {})
    return 0


def serving_folder(spec: str) -> Path:
    """A run or model folder, as given; a GGUF or Ollama model: converted once into the per-user cache
    (``core/models/source.py``), whose folder is then served as a model folder."""
    from ark_trainer.core.models.source import model_kind, resolve_model

    if model_kind(spec) == "hf":
        return Path(spec)
    return resolve_model(spec, flag="deploy").path
