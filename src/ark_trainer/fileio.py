"""Small file helpers: atomic writes (temp file in the same folder, fsync, rename) and JSON(L)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: str | Path, data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` so that readers see the old file or the new one, never half of it.

    ``mode`` is the new file's permission bits (run files are meant to be read by others; a config that
    holds secrets keeps its own, e.g. 0o600).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)  # mkstemp makes 0600
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str, mode: int = 0o644) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode)


def write_json(path: str | Path, data: Any, mode: int = 0o644) -> None:
    """Atomic JSON; ``mode=0o600`` for a file that holds a secret (an API key, a copy of a config)."""
    atomic_write_text(path, json.dumps(data, ensure_ascii=False, indent=2) + "\n", mode)


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def write_jsonl(path: str | Path, rows: list[dict]) -> None:
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def read_jsonl(path: str | Path) -> list[dict]:
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def yaml_error(path: str | Path, exc: Exception) -> str:
    """``path:line: not valid YAML (problem)`` for a ``yaml.YAMLError``: the one wording for every YAML file."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or "syntax error"
    return f"{path}:{mark.line + 1 if mark else 1}: not valid YAML ({problem})"
