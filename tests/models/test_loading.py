"""Model folders checked before anything is written (``core/models/loading.py``): pickle-only weights, no config."""

from __future__ import annotations

import pytest

from ark_trainer.base.errors import UserError


def test_check_model_dir_refuses_pickle_only(tmp_path):
    from ark_trainer.core.models.loading import check_model_dir

    folder = tmp_path / "rm"
    folder.mkdir()
    (folder / "config.json").write_text("{}", encoding="utf-8")
    (folder / "pytorch_model.bin").write_bytes(b"not really a pickle")
    with pytest.raises(UserError) as exc:
        check_model_dir(str(folder), "--rm_model_path")
    message = exc.value.messages[0]
    assert message.startswith("--rm_model_path: ") and "safetensors" in message


def test_check_model_dir_missing_and_no_config(tmp_path):
    from ark_trainer.core.models.loading import check_model_dir

    with pytest.raises(UserError, match="no such folder"):
        check_model_dir(str(tmp_path / "nope"), "--rm_model_path")
    with pytest.raises(UserError, match="config.json"):
        check_model_dir(str(tmp_path), "--rm_model_path")
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(UserError, match="model_type: missing"):  # the files are read, not only found
        check_model_dir(str(tmp_path), "--rm_model_path")
