"""``ark-trainer dashboard [RUNS...] [--port P]``: a local web page that watches runs while they train.

The server (:mod:`ark_trainer.services.dashboard.server`, standard library only, bound to 127.0.0.1) lists the runs
under the given folders with their heartbeat status and serves, per run, one JSON document
(:mod:`ark_trainer.services.dashboard.payload`): the logged metrics of each stage, the stage timeline, the
evaluation tables, example answers and the diagnosis. The page (``static/``) polls it every two seconds and
redraws its charts in place. Charts are uPlot (MIT, vendored in ``static/`` with its licence), so the page
works offline.
"""
