"""Environment checks for training and for OpenClaw: ``ark-trainer doctor [--json]``.

Each check is ``{"name", "status": "ok"|"warn"|"fail", "detail", "fix"}`` (``fix`` is one line, empty
when there is nothing to do). The JSON document (schema ``ark-trainer.doctor/1``, stable) is::

    {"schema": "ark-trainer.doctor/1", "ok": true, "summary": {"ok": 9, "warn": 3, "fail": 0},
     "checks": [{"name": "python", "status": "ok", "detail": "3.11.7", "fix": ""}, ...]}

Check names: python, torch, cuda, disk, libraries, serving, openclaw_cli, openclaw_config, openclaw_config_valid,
openclaw_auth, openclaw_gateway. Only ``fail`` makes the command exit non-zero: a missing GPU or a
missing OpenClaw is a warning, because training runs on CPU and without OpenClaw.
"""

from __future__ import annotations

import importlib.metadata
import shlex
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from ark_trainer.base.external import openclaw_cli as cli

SCHEMA = "ark-trainer.doctor/1"
LIBRARIES = ("transformers", "trl", "accelerate", "peft", "datasets", "tokenizers", "safetensors")
INSTALL_FIX = "run `ark-trainer install --openclaw` (Node 24 + OpenClaw from npm into .tools/)"


@dataclass
class Check:
    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str = ""


def check_python() -> Check:
    v = sys.version_info
    text = f"{v.major}.{v.minor}.{v.micro} ({sys.executable})"
    if v < (3, 11):
        return Check("python", "fail", text, "use Python 3.11 or newer")
    return Check("python", "ok", text)


def check_cpu() -> Check:
    """The CPU class whose column of docs/real-models.md's times applies here (``scale.cpu_class``)."""
    from ark_trainer.base.scale import cpu_class

    name, found = cpu_class()
    return Check("cpu", "ok", f"{name} ({found}); real-model times for this class: docs/real-models.md")


def check_torch_and_cuda() -> list[Check]:
    try:
        import torch
    except ImportError as exc:
        return [Check("torch", "fail", f"not importable: {exc}", "pip install -r requirements.txt")]
    checks = [Check("torch", "ok", torch.__version__), check_cpu()]
    if not torch.cuda.is_available():
        checks.append(
            Check(
                "cuda",
                "warn",
                "no CUDA GPU: training runs on CPU (slow)",
                "`ark-trainer install --gpu` on a GPU machine",
            )
        )
        return checks
    gpus = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        gpus.append(f"cuda:{i} {props.name} {props.total_memory / 2**30:.0f} GiB")
    checks.append(Check("cuda", "ok", f"CUDA {torch.version.cuda}: " + "; ".join(gpus)))
    return checks


def check_libraries() -> Check:
    found, missing = [], []
    for name in LIBRARIES:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
    if missing:
        return Check("libraries", "fail", "missing: " + ", ".join(missing), "pip install -r requirements.txt")
    return Check("libraries", "ok", ", ".join(found))


def check_serving() -> Check:
    """The packages ``deploy``'s model server imports (core dependencies; an old or partial install lacks them)."""
    from ark_trainer.services.deploy.process import (
        SERVING_PACKAGES,
        missing_serving_packages,
        serving_install_command,
        transformers_install_command,
        unsupported_transformers,
    )

    missing = missing_serving_packages()
    if missing:
        return Check(
            "serving", "fail", "deploy cannot start: missing " + ", ".join(missing),
            f"`{serving_install_command(missing)}`",
        )  # fmt: skip
    release = unsupported_transformers()
    if release is not None:
        return Check(
            "serving", "fail", f"deploy cannot start: transformers {release} rewrote the server it extends",
            f"`{transformers_install_command()}`",
        )  # fmt: skip
    return Check("serving", "ok", "deploy's model server: " + ", ".join(SERVING_PACKAGES.values()))


def disk_needed(model_path: str | None, checkpoints: int = 2) -> int:
    """Bytes a run needs: the model's weights ×(2 final models + per stage ``checkpoints`` × 3).

    A checkpoint holds the weights plus AdamW's two moments (about 3× the weights); RFT and GRPO each
    keep ``--save_total_limit`` of them; ``rft/final`` and ``model`` are one copy each. 10% margin.
    """
    if not model_path or not Path(model_path).is_dir():
        return 0
    weights = sum(f.stat().st_size for f in Path(model_path).glob("*.safetensors"))
    return int(weights * (2 + 2 * checkpoints * 3) * 1.1)


def _size(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def check_disk(output_dir: str | None, model_path: str | None, checkpoints: int = 2) -> Check:
    where = Path(output_dir or ".").resolve()
    while not where.exists():
        where = where.parent
    free = shutil.disk_usage(where).free
    need = disk_needed(model_path, checkpoints)
    detail = f"{_size(free)} free at {where}"
    if not need:
        return Check("disk", "ok" if free > 2**30 else "warn", detail + " (give --model_path to size a run)")
    detail += f"; the run needs about {_size(need)}"
    if free < need:
        return Check("disk", "fail", detail, "free disk space or lower --save_total_limit")
    if free < 2 * need:
        return Check("disk", "warn", detail + " (less than twice that)", "free disk space for headroom")
    return Check("disk", "ok", detail)


def check_openclaw() -> list[Check]:
    """The OpenClaw checks; every one is a warning at worst except an invalid config (a fail)."""
    path = cli.find_openclaw()
    if path is None:
        return [
            Check(
                "openclaw_cli",
                "warn",
                "OpenClaw CLI not found (PATH, .tools, $ARK_OPENCLAW_BIN)",
                INSTALL_FIX,
            )
        ]
    try:
        ver = cli.version()
    except cli.OpenClawError as exc:
        return [Check("openclaw_cli", "fail", f"{path}: {exc}", INSTALL_FIX)]
    checks = [Check("openclaw_cli", "ok", f"{ver} at {path}{_not_on_path(path)}")]
    cfg, source = cli.config_path()
    exists = "exists" if cfg.is_file() else "not created yet"
    checks.append(Check("openclaw_config", "ok", f"{cfg} (from {source}; {exists})"))
    with ThreadPoolExecutor(3) as pool:  # each call starts Node (1-4 s); run them side by side
        jobs = [pool.submit(f) for f in (_config_valid, _auth, _gateway)]
        checks += [job.result() for job in jobs]
    return checks


def _not_on_path(path: str) -> str:
    """A note when the CLI found is not what ``openclaw`` runs in a shell (the fixes below name its path)."""
    if cli.typed_command() == "openclaw":
        return ""
    folder = shlex.quote(str(Path(path).parent))
    return f" (not on PATH: `export PATH={folder}:$PATH` to run it as `openclaw`)"


def _config_valid() -> Check:
    cfg, _ = cli.config_path()
    if not cfg.is_file():
        return Check(
            "openclaw_config_valid",
            "warn",
            "no config file: OpenClaw runs on its defaults",
            f"`{cli.typed_command()} onboard` or `ark-trainer deploy OUT`",
        )
    try:
        data = cli.run_json(["config", "validate", "--json"], check=False)
    except cli.OpenClawError as exc:
        return Check(
            "openclaw_config_valid",
            "fail",
            str(exc),
            f"`{cli.typed_command()} config validate` shows the problem",
        )
    if data.get("valid"):
        warnings = data.get("warnings") or []
        return Check("openclaw_config_valid", "ok", f"valid ({len(warnings)} warnings)")
    issues = data.get("issues") or data.get("errors") or data.get("error") or data
    return Check(
        "openclaw_config_valid",
        "fail",
        f"invalid: {str(issues)[:300]}",
        f"`{cli.typed_command()} config validate`, or `ark-trainer deploy --rollback` if ark-trainer changed it",
    )


def _auth() -> Check:
    try:
        data = cli.run_json(["models", "status", "--json"], timeout=60)
    except cli.OpenClawError as exc:
        return Check("openclaw_auth", "warn", str(exc), f"`{cli.typed_command()} models status`")
    model = data.get("resolvedDefault") or data.get("defaultModel")
    missing = (data.get("auth") or {}).get("missingProvidersInUse") or []
    if missing:
        return Check(
            "openclaw_auth",
            "warn",
            f"default model {model}: no credentials for {', '.join(missing)}",
            f"`{cli.typed_command()} configure` to log in, or `ark-trainer deploy OUT` to answer with a local model",
        )
    return Check("openclaw_auth", "ok", f"default model {model}: credentials present")


def _gateway() -> Check:
    try:
        data = cli.run_json(["gateway", "status", "--json", "--timeout", "2000"], timeout=60)
    except cli.OpenClawError as exc:
        return Check("openclaw_gateway", "warn", str(exc), f"`{cli.typed_command()} gateway status`")
    rpc = data.get("rpc") or {}
    url = rpc.get("url") or (data.get("gateway") or {}).get("probeUrl")
    if rpc.get("ok"):
        return Check("openclaw_gateway", "ok", f"reachable at {url}")
    return Check(
        "openclaw_gateway",
        "warn",
        f"not reachable at {url} ({rpc.get('error', 'no answer')}); `{cli.typed_command()} agent --local` still works",
        f"`{cli.typed_command()} gateway` to start it (needed for channels, not for ark-trainer)",
    )


def run_checks(
    output_dir: str | None = None, model_path: str | None = None, checkpoints: int = 2, openclaw: bool = True
) -> list[Check]:
    checks = [check_python(), *check_torch_and_cuda(), check_libraries(), check_serving()]
    checks.append(check_disk(output_dir, model_path, checkpoints))
    if openclaw:
        checks += check_openclaw()
    return checks


def to_json(checks: list[Check]) -> dict:
    summary = {s: sum(c.status == s for c in checks) for s in ("ok", "warn", "fail")}
    return {
        "schema": SCHEMA,
        "ok": summary["fail"] == 0,
        "summary": summary,
        "checks": [asdict(c) for c in checks],
    }


def format_text(checks: list[Check]) -> str:
    lines = []
    for c in checks:
        lines.append(f"{c.status.upper():4}  {c.name:22} {c.detail}")
        if c.fix and c.status != "ok":
            lines.append(f"{'':28}fix: {c.fix}")
    return "\n".join(lines)
