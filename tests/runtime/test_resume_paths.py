"""Resume compares the paths a run was given by what they resolve to: the same file or folder spelled another
way (relative, absolute, ``./``, a trailing slash, through a symlink, ``~``) is the same run; another one is
not."""

from __future__ import annotations

import pytest

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import atomic_write_text
from ark_trainer.core.config import resolve_config, to_yaml
from ark_trainer.stages.registry import config_class
from tests.conftest import resume_check
from tests.runtime.test_resume import all_stages


def _cfg(**flags):
    return resolve_config(config_class(), {"device": "cpu", **flags})


@pytest.fixture
def run(tmp_path, monkeypatch):
    """A run started from ``tmp_path`` with relative paths, with progress saved."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.jsonl").write_text("{}\n")
    (tmp_path / "model").mkdir()
    (tmp_path / "out").mkdir()
    first = _cfg(model_path="model", data_path="d.jsonl", output_dir="out")
    atomic_write_text(tmp_path / "out" / "run.yaml", to_yaml(first))
    (tmp_path / "out" / "events.jsonl").write_text(
        '{"event": "stage_end", "stage": "eval_base", "status": "ok"}\n'
    )
    return tmp_path


def test_the_same_paths_spelled_another_way_resume_the_run(run, monkeypatch):
    (run / "link.jsonl").symlink_to(run / "d.jsonl")
    monkeypatch.setenv("HOME", str(run))
    for model, data, out in (
        ("./model", "./d.jsonl", "./out"),
        (str(run / "model"), str(run / "d.jsonl"), str(run / "out")),
        ("model/", "link.jsonl", "out/"),
        ("~/model", "~/d.jsonl", "~/out"),
        ("model/../model", "model/../d.jsonl", "./out/."),
    ):
        cfg = _cfg(model_path=model, data_path=data, output_dir=out, resume="True")
        assert resume_check(cfg, run / "out", all_stages()), (model, data, out)


def test_another_file_is_still_another_run(run):
    (run / "other.jsonl").write_text("{}\n")
    cfg = _cfg(model_path="./model", data_path="./other.jsonl", output_dir="out", resume="True")
    with pytest.raises(UserError) as err:
        resume_check(cfg, run / "out", all_stages())
    assert err.value.messages == [
        f"--resume: --data_path: './other.jsonl' differs from 'd.jsonl' in {run / 'out' / 'run.yaml'}"
    ]
    cfg = _cfg(
        model_path="./model", data_path="d.jsonl", output_dir="out", resume="True", max_train_steps="7"
    )
    with pytest.raises(UserError, match="--max_train_steps"):  # a flag that is not a path compares as before
        resume_check(cfg, run / "out", all_stages())
