"""The GRPO stage: ``stage.py`` (the stage), ``options.py`` (its flags), ``auto.py`` (its automatic
defaults), ``report.py`` (its report section) and the trainer's parts: ``dynamic_sampling.py``,
``shared_prefix.py``, ``grpo_eval.py`` (the best step on the dev split), ``trl_defaults.py``.

Importing the package imports none of them: the registry loads ``stage.py`` (``stages/registry.py``).
"""
