"""Deploy target ``toyfile``: hands the model to a "client" that is one JSON file, ``OUT/toyfile.json``."""

from __future__ import annotations

import json
from pathlib import Path

RECORD = "toyfile.json"


def deploy(out, serving=None, client=None, log=print):
    out = Path(out)
    model = out / "model" if (out / "model").is_dir() else out
    files = sorted(p.name for p in model.iterdir())
    record = {
        "model": str(model),
        "files": files,
        "agent": (client or {}).get("agent"),
        "tag": serving and serving.tag,
    }
    (out / RECORD).write_text(json.dumps(record), encoding="utf-8")
    log(f"toyfile: {out / RECORD} points at {model}")
    return record


def swap(out, tag="", log=print):
    record = {**(current(out) or {}), "tag": tag}
    (Path(out) / RECORD).write_text(json.dumps(record), encoding="utf-8")
    return record


def current(out):
    path = Path(out) / RECORD
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def status(out):
    path = Path(out or ".") / RECORD
    return {"server": "none", "deploy": "complete" if path.is_file() else "none"}


def stop(out):
    return False


def rollback(out, force=False):
    path = Path(out or ".") / RECORD
    existed = path.is_file()
    path.unlink(missing_ok=True)
    return {
        "config_path": str(path),
        "restored": "removed" if existed else "nothing",
        "server_stopped": False,
    }


def deploy_after_train(out, info, warn):
    return deploy(out, log=info)
