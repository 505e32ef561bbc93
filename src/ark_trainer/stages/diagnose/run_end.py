"""The diagnosis at the end of every ``train`` run: console, ``OUT/diagnosis.json``, report, deploy gate.

:func:`after_run` runs once the run has finished or failed (the heartbeat already says which), before the
report and before ``--openclaw_env True`` deploys; :func:`may_deploy` then refuses to deploy a final model no
better than the base unless ``--deploy_if_not_better True``. :func:`report_blocks` is the report's part: a
``no_improvement`` alert at the top and the Diagnosis section, computed from the run folder like the rest of
the report (so ``ark-trainer report OUT`` rebuilds it too).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ark_trainer.base.fileio import write_json
from ark_trainer.core.runfolder import DIAGNOSIS
from ark_trainer.stages.diagnose import diagnose, to_json

log = logging.getLogger("ark_trainer")

TOP_CODES = ("no_improvement",)  # shown above everything else in the report and on the console


def after_run(out: Path) -> dict[str, Any] | None:
    """Diagnose the run that just ended; write ``OUT/diagnosis.json``; log what is above ``info``."""
    try:
        result = diagnose(out)
        write_json(Path(out) / DIAGNOSIS, to_json(result))
    except Exception as exc:  # noqa: BLE001 - a diagnosis must never hide the run's own outcome
        log.error("diagnosis failed (%s: %s); try: ark-trainer diagnose %s", type(exc).__name__, exc, out)
        return None
    serious = [f for f in result["findings"] if f.severity != "info"]
    for f in sorted(serious, key=lambda f: f.code not in TOP_CODES):
        log.warning("diagnosis: %s %s (%s): %s; fix: %s", f.severity, f.code, f.stage, f.evidence, f.fix)
    if not serious:
        log.info("diagnosis: nothing above info (ark-trainer diagnose %s)", out)
    return result


def may_deploy(result: dict[str, Any] | None, deploy_if_not_better: bool) -> bool:
    """False when the final model is no better than the base and the user did not ask to deploy it anyway."""
    found = next((f for f in (result or {}).get("findings", []) if f.code == "no_improvement"), None)
    if found is None:
        return True
    if deploy_if_not_better:
        log.warning("openclaw: deploying although %s (--deploy_if_not_better True)", found.evidence)
        return True
    log.warning(
        "openclaw: not deployed: %s; the agent keeps its model. Deploy anyway with --deploy_if_not_better "
        "True (or: ark-trainer deploy OUT)",
        found.evidence,
    )
    return False


def report_blocks(run_dir: Path, middle: list | tuple = ()) -> list:
    """The report's diagnosis: a top alert per :data:`TOP_CODES` finding, ``middle``, the Diagnosis section."""
    from ark_trainer.stages.report.render import Heading, Para, Table

    try:
        findings = diagnose(run_dir)["findings"]
    except Exception as exc:  # noqa: BLE001 - the report is still written without it
        return [
            *middle,
            Heading("Diagnosis"),
            Para(f"Diagnosis failed: {type(exc).__name__}: {exc}", alert=True),
        ]
    blocks: list = [
        Para(f"WARNING: {f.evidence}. Fix: {f.fix}.", alert=True) for f in findings if f.code in TOP_CODES
    ]
    blocks += [*middle, Heading("Diagnosis")]
    if not findings:
        return [*blocks, Para("No findings: nothing in the run folder looks wrong.")]
    rows = [[f.severity, f.code, f.stage, f.evidence, f.fix] for f in findings]
    intro = "Most severe first; `ark-trainer diagnose OUT` prints the same (codes in docs/long-runs.md)."
    return [*blocks, Para(intro), Table(["severity", "code", "stage", "evidence", "fix"], rows)]
