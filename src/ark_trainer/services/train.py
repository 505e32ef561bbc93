"""``train``'s entry: the validated config planned once (``services/planning.py``), then run
(``services/pipeline.py``, which takes the planned run and never the config); under ``--auto_resume`` in a
supervised child process that does the same."""

from __future__ import annotations

from pathlib import Path

from ark_trainer.core.config import TrainConfig
from ark_trainer.services.pipeline import run_prepared
from ark_trainer.services.planning import prepare


def run_train(cfg: TrainConfig) -> Path:
    """Run the whole pipeline: the run planned (:func:`~ark_trainer.services.planning.prepare`), then run;
    returns the run directory."""
    if cfg.auto_resume > 0:
        from ark_trainer.core.runtime.supervisor import SupervisedRun, supervise
        from ark_trainer.stages.report import build_report

        return supervise(SupervisedRun(cfg.resume, cfg.auto_resume, cfg.flag_items()), build_report)
    return run_prepared(prepare(cfg))
