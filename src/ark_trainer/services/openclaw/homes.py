"""One run deployed from several OpenClaw homes: a record per home, one server shared while any uses it.

Each OpenClaw home (its config file: ``$OPENCLAW_CONFIG_PATH``, ``$OPENCLAW_STATE_DIR/openclaw.json`` or
``~/.openclaw/openclaw.json``) keeps its own deployments in its state folder; the run folder keeps one
record per home too, ``OUT/deploy/homes/<hash of the config path>.json``, so each home sees the others.
A deploy of OUT from a second home shares the server the first one started (same port and key) instead
of starting another one in the same folder; ``--rollback`` and ``--stop`` then stop it only when no other
home's config still points at it (its ``models.providers.ark`` has the server's URL and key), and say so
in one line when they leave it running.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import read_json, read_text_bounded
from ark_trainer.core.runtime.system import pid_alive
from ark_trainer.services.deploy.process import HOST, is_our_server, read_key

PROVIDER = "ark"


def home_file(out: str | Path, config_path: str | Path) -> Path:
    """The record of OUT's deployment by the OpenClaw home whose config is ``config_path``."""
    digest = hashlib.sha256(str(config_path).encode()).hexdigest()[:16]
    return Path(out) / "deploy" / "homes" / f"{digest}.json"


def home_records(out: str | Path) -> list[dict]:
    """Every home's record of OUT's deployment (unreadable ones skipped)."""
    folder = Path(out) / "deploy" / "homes"
    records = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = read_json(path)
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("config_path"):
            records.append(data)
    return records


def provider(config: str | Path) -> dict:
    """The config's ``models.providers.ark`` entry ({} when there is none or the file does not parse)."""
    try:
        import json5

        entry = json5.loads(read_text_bounded(config))["models"]["providers"][PROVIDER]
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return {}
    return entry if isinstance(entry, dict) else {}


def _serving(record: dict) -> bool:
    pid = record.get("pid")
    return isinstance(pid, int) and pid_alive(pid) and is_our_server(pid)


def points_at(record: dict) -> bool:
    """Whether the record's config still uses its server: our provider with the server's URL and key."""
    entry, key = provider(record["config_path"]), read_key(record.get("api_key_file"))
    url = f"http://{record.get('host') or HOST}:{record.get('port')}/v1"
    return bool(key) and entry.get("apiKey") == key and entry.get("baseUrl") == url


def shared_server(out: Path, config_path: Path, port: int | None, serve_args: list[str]) -> dict | None:
    """Another home's complete deployment of OUT whose server runs (a deploy from this home shares it), or
    None; one line when this deploy asks for that server with another port or serving settings."""
    for record in home_records(out):
        if record["config_path"] == str(config_path) or record.get("state") != "deployed":
            continue
        if not _serving(record):
            continue
        where = (
            f"{out} is already served on port {record['port']} for OpenClaw config {record['config_path']}"
        )
        if port and port != record["port"]:
            raise UserError(
                f"deploy: {where}; leave --port out (or give --port {record['port']}) to share that server, "
                "or roll that deployment back first"
            )
        if record.get("serve_args") != serve_args:
            raise UserError(
                f"deploy: {where} with other settings ({' '.join(record.get('serve_args') or [])}); deploy with "
                "the same --record, --prompt_shape and --system_chars to share it, or roll that deployment back first"
            )
        return record
    return None


def kept_running(record: dict) -> str | None:
    """Why the record's server must keep running (another home's config still points at it), or None."""
    others = [
        r for r in home_records(record["out"])
        if r["config_path"] != record["config_path"] and r.get("port") == record.get("port") and points_at(r)
    ]  # fmt: skip
    if not others or not _serving(others[0]):
        return None
    configs = ", ".join(r["config_path"] for r in others)
    return (
        f"the model server on port {record['port']} (pid {others[0]['pid']}) keeps running: OpenClaw config "
        f"{configs} still uses it; `ark-trainer deploy --rollback` under that OpenClaw home stops it"
    )
