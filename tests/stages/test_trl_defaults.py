"""Where GRPO's defaults differ from TRL's (``stages/grpo/trl_defaults.py``): the doc and the report show the
one list, and each TRL value is what TRL 1.16 declares."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from ark_trainer.stages.grpo import trl_defaults
from ark_trainer.stages.grpo.options import GRPOOptions


def test_the_doc_holds_the_list():
    text = trl_defaults.DOC.read_text(encoding="utf-8")
    assert trl_defaults.rewritten(text) == text, "run python -m ark_trainer.stages.grpo.trl_defaults"


def test_each_trl_value_is_trl_s_declared_default_and_each_of_ours_the_flag_s():
    from trl import GRPOConfig

    declared = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    options = GRPOOptions()
    checked = 0
    for d in trl_defaults.DIFFERENCES:
        if d.setting in declared:
            assert declared[d.setting] == d.trl, (d.setting, declared[d.setting])
            checked += 1
        if d.flag:
            assert d.ours == str(getattr(options, d.flag)), d.flag
    assert checked >= 8


def test_the_report_s_grpo_section_shows_the_same_rows_as_the_doc():
    from ark_trainer.stages.grpo.stage import GRPOStage
    from ark_trainer.stages.report.render import Table

    run = SimpleNamespace(metrics=lambda stage: [{"step": 1, "reward": 0.5}], config={})
    tables = [b for b in GRPOStage().report_blocks(run) if isinstance(b, Table)]
    shown = next(t for t in tables if t.header == trl_defaults.HEADER)
    doc = trl_defaults.DOC.read_text(encoding="utf-8")
    block = doc[doc.index(trl_defaults.BEGIN) : doc.index(trl_defaults.END)].splitlines()[3:]
    in_doc = [[c.strip().replace("\\|", "|") for c in line.strip("|").split(" | ")] for line in block]
    assert shown.rows == in_doc and len(in_doc) == len(trl_defaults.DIFFERENCES)
