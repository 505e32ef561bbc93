"""Write a patch into OpenClaw's config: ``openclaw config patch`` when the CLI is there, else a JSON5 edit.

The CLI path is OpenClaw's own validated write (schema checked before anything is written). Without the
CLI the config is read as JSON5, the patch merged with the same rules (objects merge recursively,
arrays and scalars replace, ``null`` deletes), and the result written as JSON (valid JSON5; comments
are not kept) through a backup (``openclaw.json.ark-bak``), a temp file in the same folder, fsync and
rename, so a reader sees the old file or the new one, never half of it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ark_trainer.base.errors import UserError
from ark_trainer.base.external import openclaw_cli as cli
from ark_trainer.base.fileio import atomic_write_text, read_text_bounded


def merge(base: dict, patch: dict) -> dict:
    out = dict(base)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def apply_patch(config: Path, patch: dict, patch_file: Path) -> str:
    """Apply ``patch`` (also saved at ``patch_file``); returns how: ``openclaw config patch`` or ``json5 edit``."""
    if cli.find_openclaw() is not None:
        try:
            cli.run_json(["config", "patch", "--file", str(patch_file), "--dry-run", "--json"], timeout=120)
            res = cli.run(["config", "patch", "--file", str(patch_file)], timeout=120)
        except cli.OpenClawError as exc:
            raise UserError(f"deploy: OpenClaw refused the config patch: {exc}") from exc
        if res.returncode != 0:
            raise UserError(
                f"deploy: `openclaw config patch` failed: {(res.stderr or res.stdout).strip()[-400:]}"
            )
        return "openclaw config patch"
    json5_edit(config, patch)
    return "json5 edit"


def json5_edit(config: Path, patch: dict) -> None:
    import json5

    current = {}
    if config.is_file():
        try:
            current = json5.loads(read_text_bounded(config))
        except ValueError as exc:
            raise UserError(
                f"deploy: {config}: not valid JSON5 ({exc}); fix it or run `openclaw doctor`"
            ) from exc
        shutil.copy2(config, config.with_name(config.name + ".ark-bak"))
    text = json.dumps(merge(current, patch), ensure_ascii=False, indent=2) + "\n"
    mode = config.stat().st_mode & 0o777 if config.is_file() else 0o600
    atomic_write_text(config, text, mode, follow_links=True)  # a linked config stays a link


def validate(config: Path) -> None:
    """``openclaw config validate`` when the CLI is there; else the file must at least parse as JSON5."""
    if cli.find_openclaw() is None:
        import json5

        json5.loads(read_text_bounded(config))
        return
    data = cli.run_json(["config", "validate", "--json"], timeout=120, check=False)
    if not data.get("valid"):
        raise UserError(f"deploy: `openclaw config validate` rejects {config}: {json.dumps(data)[:400]}")
