"""Each built-in stage's own flags: ``rft.py`` for ``stages/rft.py``, ``grpo.py`` for ``stages/grpo.py``, ...

A stage names its options class as its ``options`` (``stages/registry.py``); :class:`~ark_trainer.core.config.
TrainConfig` is made of them and the shared run flags (``run_options.py``). They sit here, not in
``stages/``, because the config sits below the stages (the model floor reaches it): these modules import
only ``flags`` and ``ranges``.
"""
