"""``ark-trainer dashboard [RUNS...] [--port P]``: watch runs in the browser (see ``ark_trainer/services/dashboard``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ark_trainer.app.commands.args import add_command, opt


@dataclass
class DashboardOptions:
    runs: list[str] = opt(
        help="run folders or folders holding runs (default: .)",
        default_factory=lambda: ["."],
        positional=True,
        nargs="*",
    )
    port: int = opt(8765, "port on 127.0.0.1 (default: 8765; 0 = any free)", low=0)


def register(sub) -> None:
    add_command(
        sub,
        "dashboard",
        DashboardOptions,
        _dashboard,
        help="a local web page with live curves, stage timeline, evals and diagnosis of runs",
        description="Serve a web page on http://127.0.0.1:PORT that lists the runs under RUNS (run folders, "
        "or folders holding runs) with their heartbeat status and shows, per run, live training curves, "
        "the stage timeline, evaluation tables, example answers and the diagnosis. It updates while the "
        "run trains, without reloading. Works offline. Ctrl-C stops it.",
    )


def _dashboard(args: DashboardOptions) -> int:
    from ark_trainer.base.errors import UserError
    from ark_trainer.services.dashboard.server import make_server

    roots = [Path(r) for r in args.runs]
    missing = [str(r) for r in roots if not r.is_dir()]
    if missing:
        raise UserError(f"{missing[0]}: no such folder; pass run folders or folders holding runs")
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port: expected 0..65535, got {args.port}")
    try:
        server = make_server(roots, args.port)
    except OSError as exc:
        raise UserError(
            f"--port {args.port}: cannot listen on 127.0.0.1 ({exc.strerror}); pick another port"
        ) from exc
    print(
        f"dashboard: http://127.0.0.1:{server.server_port}/ (runs under {', '.join(map(str, roots))}; Ctrl-C stops)"
    )
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0
