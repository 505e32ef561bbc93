"""Hot swap (``services/deploy/hotswap.py``): ``SIGHUP`` drops the loaded model and takes the new tag, loaded in its own
recorded dtype.
"""

from __future__ import annotations

import os
import signal

from ark_trainer.services.deploy import hotswap
from ark_trainer.services.deploy.record import Recorder


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


def test_sighup_drops_the_loaded_model_and_takes_the_new_tag(tmp_path, monkeypatch):
    import os
    import signal

    from ark_trainer.services.deploy import hotswap

    class Manager:
        def __init__(self):
            self.loaded_models = {"ark-loop": self}

        def delete_model(self):  # transformers' TimedModel.delete_model pops itself from the cache
            self.loaded_models.pop("ark-loop")

    manager, said = Manager(), []
    monkeypatch.setattr(hotswap, "_MANAGERS", [manager])
    monkeypatch.chdir(tmp_path)
    (tmp_path / hotswap.TAG_FILE).write_text("round-3\n")
    recorder = Recorder(lambda *a: None, tmp_path / "t.jsonl", "round-2")
    previous = signal.getsignal(signal.SIGHUP)
    try:
        hotswap.install(recorder, log=lambda text, **_: said.append(text))
        os.kill(os.getpid(), signal.SIGHUP)
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert manager.loaded_models == {} and recorder.tag == "round-3"
    assert said == ["[ark serve] serving round-3 (reloaded)"]
