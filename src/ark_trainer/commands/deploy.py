"""``ark-trainer deploy OUT [--agent ID] [--port P]`` and ``deploy [OUT] --status | --stop | --rollback``.

Serves OUT/model on 127.0.0.1 (``transformers serve``), smoke-tests it, then registers it in OpenClaw's
config as provider ``ark`` and sets the agent's primary model. See :mod:`ark_trainer.openclaw.deploy`.
"""

from __future__ import annotations

from pathlib import Path

from ark_trainer.errors import UserError


def register(sub) -> None:
    p = sub.add_parser(
        "deploy", help="serve OUT/model and make it the OpenClaw agent's model (with rollback)"
    )
    p.add_argument("out", nargs="?", default=None, help="a run's --output_dir (holds model/)")
    p.add_argument("--agent", default=None, help="OpenClaw agent id (default: every agent, agents.defaults)")
    p.add_argument("--port", type=int, default=None, help="server port on 127.0.0.1 (default: a free one)")
    action = p.add_mutually_exclusive_group()
    action.add_argument("--status", action="store_true", help="show the deployment (latest, or OUT's)")
    action.add_argument("--stop", action="store_true", help="stop the model server (config unchanged)")
    action.add_argument(
        "--rollback", action="store_true", help="restore the config byte for byte, stop the server"
    )
    p.add_argument(
        "--force", action="store_true", help="with --rollback: restore even if the config changed since"
    )
    p.set_defaults(func=_cmd_deploy)


def _cmd_deploy(args) -> int:
    from ark_trainer.openclaw import deploy

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
        return 0
    if args.out is None:
        raise UserError("deploy: give the run folder (OUT), or --status / --stop / --rollback")
    deploy.deploy(Path(args.out), agent=args.agent, port=args.port)
    return 0
