"""The base floor: what every other floor stands on (errors, files, YAML, HTTP, plug-ins, flags, option classes,
chat templates, external tools); it imports nothing of ark_trainer above it."""
