"""A module imported by its path from before the floors were folders is the moved module itself."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest


def test_an_old_path_gives_the_moved_module_with_a_warning():
    import ark_trainer.services.deploy.policy as moved

    sys.modules.pop("ark_trainer.deploy.policy", None)
    sys.modules.pop("ark_trainer.deploy", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from ark_trainer.deploy import policy  # type: ignore[import-not-found]
    assert policy is moved
    assert any("ark_trainer.services.deploy" in str(w.message) for w in caught)


def test_an_old_entry_point_path_resolves_in_a_fresh_process():
    # what an older run.yaml's --env or a plug-in written before the move names
    code = (
        "import importlib; m = importlib.import_module('ark_trainer.demo.agent_env'); "
        "import ark_trainer.app.demo.agent_env as new; assert m is new; print(m.__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ark_trainer.app.demo.agent_env"


@pytest.mark.parametrize("name", ["ark_trainer.no_such_module", "ark_trainer.base.no_such_module"])
def test_a_name_that_never_existed_is_still_an_import_error(name):
    import importlib

    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(name)
