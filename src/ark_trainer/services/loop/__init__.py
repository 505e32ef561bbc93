"""The live loop (``ark-trainer loop``): the agent's own use becomes training data, rounds train in the
background, a gate promotes a candidate only when nothing regresses, and any round can be served again.

- ``state``: ``LOOP/state.json``, the loop's memory across crashes (atomic writes);
- ``feedback``: the next user message as feedback on the answer before it (configurable rules);
- ``safety``: the filter a correction's hinted answer passes before it becomes a training target;
- ``rounds``: a round's data, its training process (``train`` at lower priority) and its result;
- ``gate``: promote or refuse, with the reasons;
- ``serving``: which model ``LOOP/model`` points to, and swapping the server onto it;
- ``supervisor``: the long-running loop that ties them together;
- ``control``: ``loop --rollback N`` and ``loop --stop`` from another shell;
- ``report``: ``LOOP/report.md`` with the main metric per round.
"""
