"""The KTO stage: ``stage.py`` (the stage), ``options.py`` (its flags).

Importing the package imports neither: the registry loads ``stage.py`` (``stages/registry.py``).
"""
