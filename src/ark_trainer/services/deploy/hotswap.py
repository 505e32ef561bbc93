"""Hot swap: ``SIGHUP`` makes a running model server serve what its model folder points to now.

The live loop promotes a round by repointing ``LOOP/model`` (a symlink) and sending the server
``SIGHUP`` (:func:`ark_trainer.services.openclaw.deploy.swap`). The handler installed here drops the models
``transformers serve`` has loaded (its ``ModelManager`` cache), so the next request loads the folder
again, now the new model, and reads the new tag (what serves: ``round-N``) from ``.tag`` in the server's
working folder for the log and the recorder. Nothing else changes: same process, port, key and model id,
so OpenClaw's config is untouched and no request is refused; the first request after the swap waits
for the load (the loop sends a smoke request right away, so usually no agent request does).
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from ark_trainer.base.fileio import read_text_bounded

TAG_FILE = ".tag"
_MANAGERS: list[Any] = []


def track_model_managers() -> None:
    """Remember every ``ModelManager`` transformers creates (it builds one inside ``Serve``)."""
    from transformers.cli.serving import model_manager

    init = model_manager.ModelManager.__init__

    def tracked(self, *args, **kwargs):
        init(self, *args, **kwargs)
        _MANAGERS.append(self)

    model_manager.ModelManager.__init__ = tracked  # patched in


def unload_all() -> int:
    """Drop every loaded model; returns how many were dropped."""
    dropped = 0
    for manager in _MANAGERS:
        for timed in list(manager.loaded_models.values()):
            timed.delete_model()
            dropped += 1
    return dropped


def install(recorder: Any = None, log=print, dtype_of=None) -> None:
    """On ``SIGHUP``: unload the models, take the tag from ``./.tag``, say so in the log; the next load
    is in ``dtype_of()`` (the new model's recorded precision, :mod:`ark_trainer.services.deploy.precision`)."""

    def reload(_signum, _frame) -> None:
        path = Path(TAG_FILE)
        tag = read_text_bounded(path).strip() if path.is_file() else ""
        unload_all()
        if dtype_of is not None:
            dtype = dtype_of()
            for manager in _MANAGERS:
                manager.dtype = manager._resolve_dtype(dtype)
        if recorder is not None:
            recorder.tag = tag
        log(f"[ark serve] serving {tag or 'the model folder'} (reloaded)", flush=True)

    signal.signal(signal.SIGHUP, reload)
