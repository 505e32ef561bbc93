"""Several users at once: requests generate side by side, and a request whose client left stops generating.

``transformers serve`` generates one request at a time on one inference thread per model: an agent turn
of a few hundred tokens on a CPU made every other user wait for its whole answer (a direct request waited
428 s behind one). Its continuous batching (paged attention) is built for GPUs: tried here on the 2-core
CPU with a tiny Qwen2 (transformers 5.24), four requests had no token after 8 s, and its worker started
only about 50 s later. So the server generates each
request on its own thread (:func:`parallel_manager`, up to ``workers`` at once, the rest queued): the
requests' decoding steps interleave, each user sees tokens from the start, and a short answer finishes
before a long one that began earlier. Each request keeps its own cache; the weights are shared, read-only.

A client that goes away (OpenClaw's timeout, a closed terminal) must not keep the model busy, and its
partial answer is not a turn: :class:`CancelOnDisconnect` watches the connection once the request is read,
and on ``http.disconnect`` before the answer was sent cancels the request, which stops its generation at
the next token (a streamed answer through transformers' own streamer, a plain one through
:class:`_Cancelled`); the recorder never sees an answer end, so nothing is recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ark_trainer.services.deploy.record import ROUTE

DEFAULT_WORKERS = 4


class _Cancelled:
    """A stopping criterion that ends ``generate`` once ``event`` is set (the client left)."""

    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def __call__(self, input_ids, scores, **_: Any):
        import torch

        return torch.full(
            (input_ids.shape[0],), self.event.is_set(), dtype=torch.bool, device=input_ids.device
        )


def parallel_manager(workers: int = DEFAULT_WORKERS) -> type:
    """A subclass of transformers' ``GenerateManager`` that runs up to ``workers`` generations at once and
    stops a plain (non-streamed) one whose request was cancelled."""
    from transformers.cli.serving.utils import GenerateManager
    from transformers.generation.stopping_criteria import StoppingCriteriaList

    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ark-generate")

    class ParallelGenerateManager(GenerateManager):
        def __init__(self) -> None:  # no single inference thread: the shared pool
            self.pool = pool

        def submit(self, fn, *args, **kwargs):
            return self.pool.submit(fn, *args, **kwargs)

        def async_submit(self, fn, *args, **kwargs):
            return asyncio.wrap_future(self.pool.submit(fn, *args, **kwargs))

        async def generate_non_streaming(self, model, processor, inputs, gen_config, request_id):
            stop = threading.Event()
            kwargs = {**inputs, "generation_config": gen_config, "tokenizer": processor,
                      "stopping_criteria": StoppingCriteriaList([_Cancelled(stop)])}  # fmt: skip
            if hasattr(model, "has_talker"):
                kwargs["generation_mode"] = "text"
            try:
                sequences = await self.async_submit(model.generate, **kwargs)
            except asyncio.CancelledError:
                stop.set()  # the client left: the generation ends at its next token
                raise
            input_len = inputs["input_ids"].shape[-1]
            generated = sequences[0, input_len:]
            return processor.decode(generated, skip_special_tokens=True), input_len, generated

    return ParallelGenerateManager


def install(workers: int = DEFAULT_WORKERS) -> None:
    """Make ``transformers serve`` create :func:`parallel_manager`'s managers (patched in by name)."""
    from transformers.cli.serving import utils

    utils.GenerateManager = parallel_manager(workers)  # patched in: transformers looks the name up per model


class CancelOnDisconnect:
    """ASGI middleware: a chat completion whose client disconnects before its answer ends is cancelled."""

    def __init__(self, app, log=print) -> None:
        self.app, self.log = app, log
        self.cancelled = 0

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or (scope.get("method"), scope.get("path")) != ROUTE:
            return await self.app(scope, receive, send)
        read, answered = asyncio.Event(), asyncio.Event()

        async def recv():
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body"):
                read.set()  # the body is in: from now on receive() only says the client left
            return message

        async def snd(message):
            if message["type"] == "http.response.body" and not message.get("more_body"):
                answered.set()
            await send(message)

        async def gone() -> None:
            await read.wait()
            while (await receive())["type"] != "http.disconnect":
                pass

        task = asyncio.ensure_future(self.app(scope, recv, snd))
        watch = asyncio.ensure_future(gone())
        try:
            await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
            if not task.done() and not answered.is_set():  # the client left (or the server stops)
                task.cancel()
                self.cancelled += 1
                self.log("[ark serve] the client went away: its generation stopped, its turn not recorded",
                         flush=True)  # fmt: skip
        with contextlib.suppress(asyncio.CancelledError):
            await task
