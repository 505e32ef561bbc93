"""Optional packages in tests: skip with a reason when one is missing, unless CI requires it.

A test module that needs an optional package calls `need("json5", "ARK_REQUIRE_OPENCLAW")` at import:
without the package it is skipped (not an import error); with the named variable set to 1, as
`scripts/test.sh` sets it, the missing package fails the run instead, so CI cannot skip it silently.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def need(module: str, require_env: str | None = None) -> ModuleType:
    """Import `module`, or skip the calling test module (fail when `require_env` is 1)."""
    if require_env and os.environ.get(require_env) == "1":
        try:
            return importlib.import_module(module)
        except ImportError as e:
            pytest.fail(f"{module} is not installed ({require_env}=1): pip install -r requirements.txt ({e})")
    return pytest.importorskip(module, reason=f"needs the optional package {module}")
