"""Hot swap (``deploy/hotswap.py``): the new model is loaded in its own recorded dtype."""

from __future__ import annotations

import os
import signal

from ark_trainer.deploy import hotswap


def test_a_hot_swap_loads_the_new_model_in_its_own_recorded_dtype(tmp_path, monkeypatch):
    class Manager:
        loaded_models: dict = {}
        dtype = "auto"

        @staticmethod
        def _resolve_dtype(dtype):
            return f"torch.{dtype}"

    manager = Manager()
    monkeypatch.setattr(hotswap, "_MANAGERS", [manager])
    monkeypatch.chdir(tmp_path)
    previous = signal.getsignal(signal.SIGHUP)
    try:
        hotswap.install(log=lambda *a, **k: None, dtype_of=lambda: "bfloat16")
        os.kill(os.getpid(), signal.SIGHUP)
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert manager.dtype == "torch.bfloat16"
