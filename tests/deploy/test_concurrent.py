"""Several users at once (``services/deploy/concurrent.py``): four requests are all answering before the first ends;
a plain request whose client left stops generating; a request whose client left is not recorded.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from tests.conftest import save_tiny_qwen


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = save_tiny_qwen(tmp_path_factory.mktemp("concurrent") / "model", max_position_embeddings=4096)
    return AutoModelForCausalLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


def _inputs(tok, text):
    return dict(tok(text, return_tensors="pt"))


def _config(n):
    from transformers import GenerationConfig

    return GenerationConfig(max_new_tokens=n, min_new_tokens=n, do_sample=False)


def test_four_streamed_requests_are_all_answering_before_the_first_ends(tiny):
    """transformers' own manager answers them one after another: the first ends before the second starts."""
    from ark_trainer.services.deploy.concurrent import parallel_manager

    model, tok = tiny
    manager = parallel_manager(4)()
    events: list[tuple[str, int]] = []

    async def read(i, queue):
        while await queue.get() is not None:
            pass
        events.append(("end", i))

    async def watch(
        streamers,
    ):  # a token counts, whether or not it decodes to text (a random model's may not)
        started: set[int] = set()
        while len(started) < len(streamers):
            for i, streamer in enumerate(streamers):
                if i not in started and streamer.total_tokens > 0:
                    started.add(i)
                    events.append(("first", i))
            await asyncio.sleep(0.002)

    async def main():
        streams = [
            manager.generate_streaming(model, tok, _inputs(tok, f"hello world {i}"), _config(120), f"r{i}")
            for i in range(4)
        ]
        await asyncio.gather(
            watch([s for _, s in streams]), *(read(i, q) for i, (q, _) in enumerate(streams))
        )

    asyncio.run(main())
    first_end = next(k for k, (what, _) in enumerate(events) if what == "end")
    assert sorted(i for what, i in events[:first_end] if what == "first") == [0, 1, 2, 3], events


def test_a_plain_request_whose_client_left_stops_generating(tiny):
    from ark_trainer.services.deploy.concurrent import parallel_manager

    model, tok = tiny
    manager = parallel_manager(2)()
    steps = [0]
    forward = model.forward

    def counted(*args, **kwargs):
        steps[0] += 1
        return forward(*args, **kwargs)

    model.forward = counted
    try:

        async def main():
            task = asyncio.ensure_future(
                manager.generate_non_streaming(model, tok, _inputs(tok, "hello"), _config(3000), "r")
            )
            while steps[0] < 5:
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(main())
        seen, deadline = -1, time.time() + 60
        while seen != steps[0] and time.time() < deadline:  # until the generation has ended
            seen = steps[0]
            time.sleep(0.5)
    finally:
        model.forward = forward
    assert steps[0] < 3000  # stopped, not run to its 3000 tokens


def test_a_request_whose_client_left_is_cancelled_and_not_recorded(tmp_path):
    from ark_trainer.services.deploy.concurrent import CancelOnDisconnect
    from ark_trainer.services.deploy.record import Recorder, read_turns

    reply = json.dumps({"choices": [{"message": {"content": "答"}}]}).encode()
    state = {"cancelled": 0}

    def serve(release: asyncio.Event):
        async def app(scope, receive, send):
            await receive()
            try:
                await release.wait()  # generating, until released (or cancelled)
            except asyncio.CancelledError:
                state["cancelled"] += 1
                raise
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": reply})

        return app

    body = json.dumps({"messages": [{"role": "user", "content": "问"}]}).encode()
    said: list[str] = []

    async def one(leave: bool):
        release = asyncio.Event()
        app = CancelOnDisconnect(Recorder(serve(release), tmp_path / "turns.jsonl", log=lambda *a, **k: None),
                                 log=lambda m, **_: said.append(m))  # fmt: skip
        incoming: asyncio.Queue = asyncio.Queue()
        incoming.put_nowait({"type": "http.request", "body": body, "more_body": False})

        async def receive():
            return await incoming.get()

        async def send(_):
            return None

        scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": []}
        call = asyncio.ensure_future(app(scope, receive, send))
        await asyncio.sleep(0.1)
        if leave:
            incoming.put_nowait({"type": "http.disconnect"})
        else:
            release.set()
        await asyncio.wait_for(call, 10)

    asyncio.run(one(leave=True))
    assert state["cancelled"] == 1 and not read_turns(tmp_path / "turns.jsonl")
    assert said and "went away" in said[0]
    asyncio.run(one(leave=False))  # a client that stays gets its answer recorded
    assert state["cancelled"] == 1 and len(read_turns(tmp_path / "turns.jsonl")) == 1
