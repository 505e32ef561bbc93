"""The RFT stage: ``stage.py`` (the stage), ``options.py`` (its flags), ``report.py``
(its report section).

Importing the package imports none of them: the registry loads ``stage.py`` (``stages/registry.py``).
"""
