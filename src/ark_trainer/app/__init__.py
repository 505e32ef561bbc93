"""The app floor: the sub-commands, the demo and the CLI reference (``cli.py`` and ``__main__`` import from here)."""
