"""A reward spec whose code would run: the proof that ``plan`` runs none of it."""

from __future__ import annotations

import json
from pathlib import Path


def code_grader_spec(folder: Path) -> tuple[Path, Path]:
    """A reward spec whose python grader writes a file the moment its code runs."""
    ran = folder / "grader_code_ran"
    spec = folder / "evil.yaml"
    source = f"open({str(ran)!r}, 'w').write('ran')\ndef grade(sample, item):\n    return 1.0\n"
    spec.write_text(
        "graders:\n  - name: evil\n    type: python\n    source: " + json.dumps(source) + "\n"
        "  - name: also_evil\n    type: rule\n    rule: os:system\n",
        encoding="utf-8",
    )
    return spec, ran
