"""docs/cli.md is the parsers' own --help: regenerate it with `python -m ark_trainer.app.clidoc`."""

from __future__ import annotations

from ark_trainer.app import clidoc


def test_cli_reference_is_fresh():
    assert clidoc.DOC.is_file(), "docs/cli.md missing: run python -m ark_trainer.app.clidoc"
    assert clidoc.DOC.read_text(encoding="utf-8") == clidoc.render(), (
        "docs/cli.md is stale: run python -m ark_trainer.app.clidoc"
    )


def test_reference_covers_every_command_and_nested_action():
    text = clidoc.render()
    for section in ("`ark-trainer train`", "`ark-trainer data collect`", "`ark-trainer rm train`"):
        assert section in text
    assert "--max_train_steps" in text and "--rft_steps" in text
