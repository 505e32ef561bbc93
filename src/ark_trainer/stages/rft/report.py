"""The RFT stage's report section: "RFT data selection", what sampling and selection kept (its last
``rft_selection`` event). The stage (``stage.py``) hands it to the report (``report_blocks``)."""

from __future__ import annotations


def blocks(run) -> list:
    """The report's "RFT data selection" section: what sampling and selection kept."""
    from ark_trainer.stages.report import short
    from ark_trainer.stages.report.render import Heading, Para, Table

    events = run.of("rft_selection")
    if not events:
        return [Heading("RFT data selection"), Para("Not run.")]
    e = events[-1]
    keys: tuple[str, ...] = (
        "n_prompts",
        "n_scored",
        "n_selected",
        "n_pairs",
        "mean_best",
        "mean_all",
        "threshold",
    )
    keys += tuple(k for k in ("n_rows", "n_needed", "rounds") if k in e)  # sampling sized to the steps
    return [
        Heading("RFT data selection"),
        Table(["field", "value"], [[k, short(e.get(k, "—"))] for k in keys]),
    ]
