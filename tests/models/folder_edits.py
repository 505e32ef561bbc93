"""Edits that break a copy of a model folder, for the model checks' tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path


def edit_config(**changes) -> Callable[[Path], None]:
    def edit(m: Path) -> None:
        config = json.loads((m / "config.json").read_text())
        config.update(changes)
        (m / "config.json").write_text(json.dumps(config))

    return edit
