"""The plumbing under every training run, apart from the pipeline's stages.

- ``launch``, ``distributed``: ``accelerate launch`` for several processes, and the ranks inside them;
- ``supervisor``: ``--auto_resume`` (restart a failed run, smaller micro-batch after an OOM);
- ``watchdog``, ``monitor``: stall detection, heartbeat, ``events.jsonl`` and logs;
- ``guards``, ``bad_steps``: reward guards (timeouts, failures), NaN/inf steps skipped and rolled back;
- ``resume``: crash-safe checkpoints and exact resume; ``runlock``: one live run per folder;
- ``signals``, ``stop_points``: Ctrl-C stops a run within seconds as ``stopped``, SIGTERM ends it as ``failed``;
- ``save_timer``: checkpoints every ``--save_minutes``; ``faults``: fault injection for tests.
- ``estimate``, ``measure``: the expected time of a run's parts, from timings measured on this machine;
- ``ticker``: a line every few seconds while a silent step (a model server's start, an install) runs.
"""
