"""Serving a trained model behind an OpenAI-compatible API, for any client (OpenClaw is one target).

- ``serve``: the server process (``transformers serve`` with the prompt fitted to the model's window);
- ``fit``: fitting a request into a small window by whole messages (the question survives);
- ``toolcalls``: ``<tool_call>`` blocks in a reply as OpenAI ``tool_calls``; tool turns for templates without them;
- ``gate``: the API key on every route, no cross-origin browser requests, only the routes a client needs;
- ``process``: start the server, check its health and a smoke request, find and stop it;
- ``record``: the server's recording of every exchange as a scrubbed training row (``--record``);
- ``hotswap``: ``SIGHUP`` makes the server load what its model folder points to now (the live loop).

The OpenClaw target (config patch, rollback, deployment records) is ``ark_trainer.services.openclaw.deploy``.
"""
