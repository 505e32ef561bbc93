"""Models, low on the core floor: model and tokenizer loading, device and precision, prompt rendering.

Everything that trains, evaluates, scores or serves a model reads it through these modules, and they import
nothing of the stages, rewards or pipeline above them (``tests/test_import_graph.py`` checks it).

- ``device``: where and how a run computes (``Runtime``, ``resolve_runtime``)
- ``loading``: model folders checked and loaded (safetensors only, no remote code unless asked)
- ``prompts``: the exact text a model is conditioned on (chat template or plain text)
"""
