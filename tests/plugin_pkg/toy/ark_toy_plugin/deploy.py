"""Deploy target ``toyfile``: hands the model to a "client" that is one JSON file, ``OUT/toyfile.json``."""

from __future__ import annotations

import json
from pathlib import Path

RECORD = "toyfile.json"


def deploy(
    out, agent=None, port=None, log=print, record_to=None, tag="", prompt_shape="auto", system_chars=0
):
    out = Path(out)
    model = out / "model" if (out / "model").is_dir() else out
    record = {"model": str(model), "files": sorted(p.name for p in model.iterdir()), "agent": agent}
    (out / RECORD).write_text(json.dumps(record), encoding="utf-8")
    log(f"toyfile: {out / RECORD} points at {model}")
    return record


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
