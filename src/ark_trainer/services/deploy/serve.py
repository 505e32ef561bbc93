"""The server process ``ark-trainer deploy`` starts: ``transformers serve`` with the prompt fitted to the model.

    python -m ark_trainer.services.deploy.serve NAME --host 127.0.0.1 --port 8765 --window 512 --reply_tokens 128 \
        --api_key_file OUT/deploy/api_key

Run from a folder where ``NAME`` is the model folder (deploy links ``OUT/deploy/serve/NAME`` to
``OUT/model``), so the OpenAI ``model`` field is ``NAME``. It is ``transformers serve``'s own command
class (``transformers.cli.serve.Serve``: FastAPI + uvicorn, OpenAI chat completions, streaming, tools)
with two changes to its chat handler. A prompt longer than the model's window minus ``reply_tokens`` is
fitted by whole messages (:mod:`ark_trainer.services.deploy.fit`: the current turn, the tools, the system prompt's
head, older turns), and the reply then gets ``reply_tokens`` whatever the client asked, because the client
sized its request for the whole prompt; otherwise the client's ``max_tokens`` is clamped to ``reply_tokens``
(:func:`reply_limit`). Why: OpenClaw sends a ~40k-character system prompt and refuses
models registered below 4000 tokens of context; a small model must still see the question, without
running positions it was never trained on. A template that fails on a request is answered with its
reason (:mod:`ark_trainer.services.deploy.rendererror`), not a bare 500. And ``<tool_call>`` blocks in the reply become OpenAI
``tool_calls`` (:mod:`ark_trainer.services.deploy.toolcalls`), so OpenClaw executes them.

Requests are generated side by side, and one whose client went away is stopped and not recorded
(:mod:`ark_trainer.services.deploy.concurrent`).

The app is wrapped in :class:`ark_trainer.services.deploy.gate.Gate`: the key in ``--api_key_file`` (a file, so
the key is not in the process's command line) is required on every route, cross-origin browser requests
are refused, and only chat completions, the model list and ``/health`` are served.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ark_trainer.base.fileio import read_text_bounded


def _length(value) -> int:
    """Tokens in one prompt: a [1, n] tensor (plain generate) or a list of ids (continuous batching)."""
    if hasattr(value, "shape"):
        return int(value.shape[-1])
    return len(value[0]) if value and isinstance(value[0], list) else len(value)


def _tail(value, budget: int):
    if hasattr(value, "shape"):
        return value[..., -budget:]
    return [row[-budget:] for row in value] if value and isinstance(value[0], list) else value[-budget:]


def reply_limit(asked: int | None, reply_tokens: int, room: int, fitted: bool = False) -> int:
    """The reply's tokens: what the client asked (``max_tokens``/``max_completion_tokens``), never more than
    ``reply_tokens`` (the answers' length the model was trained and evaluated with,
    :func:`ark_trainer.services.deploy.policy.reply_budget`) nor the ``room`` the prompt left in the window. A larger
    ask is clamped, not refused (as llama.cpp's server clamps a request's ``n_predict`` to its own
    ``--n-predict``): a client that asks too much still gets an answer, which ends with ``finish_reason:
    length`` where the limit cut it. A fitted prompt gets ``reply_tokens``: the client sized its ask
    for the whole prompt."""
    want = reply_tokens if fitted or not asked else min(asked, reply_tokens)
    return max(1, min(want, room))


def _fitter(processor, render, budget: int):
    """A :class:`ark_trainer.services.deploy.fit.PromptFitter` on the model's own chat template (``render``)."""
    from ark_trainer.services.deploy.fit import PromptFitter

    tokenizer = getattr(processor, "tokenizer", processor)

    def text(messages, tools=None) -> str:
        return render(messages, tools=tools, add_generation_prompt=True, tokenize=False)

    return PromptFitter(
        text,
        lambda s: tokenizer(s, add_special_tokens=False)["input_ids"],
        budget,
        log=lambda m: print(m, flush=True),
    )


def _fitting_handler(base, window: int, reply_tokens: int, shape_of=None, system_chars: int = 0):
    """A subclass of transformers' ChatCompletionHandler that applies the serving policy
    (:mod:`ark_trainer.services.deploy.policy`; ``shape_of()`` reads the model folder's shape, again after a
    reload) and keeps prompts inside ``window``."""
    from ark_trainer.services.deploy.policy import PromptShape, apply_policy
    from ark_trainer.services.deploy.rendererror import TemplateErrorAnswers, render_errors

    shape_of = shape_of or (lambda: PromptShape("openclaw", None, "as sent"))

    from ark_trainer.services.deploy.toolcalls import ToolCallResponses, use_own_parser

    class FittingChatCompletionHandler(ToolCallResponses, TemplateErrorAnswers, base):
        _cut: tuple[int, int] | None = None
        _prompt_len: int = 0
        _said_cut = False

        def _resolve_model(self, body):
            model_id, model, processor = super()._resolve_model(body)
            if not getattr(processor, "_ark_fitted", False):
                original = processor.apply_chat_template
                fitter = _fitter(processor, original, window - reply_tokens)
                shape = shape_of()
                print(
                    f"[ark serve] prompt shape {shape.shape} ({shape.source}); docs/openclaw.md", flush=True
                )

                def fitted(conversation, *args, **kwargs):
                    conversation, tools = apply_policy(conversation, kwargs.get("tools"), shape, system_chars)
                    with render_errors():  # answered with the reason (TemplateErrorAnswers)
                        conversation, kwargs["tools"] = fitter(conversation, tools)
                        encoded = original(conversation, *args, **kwargs)
                    if fitter.last is not None:  # fitted: the client sized its reply for the whole prompt
                        self._cut = (fitter.last.total, fitter.last.budget)
                    return self._fit(encoded)

                processor.apply_chat_template = fitted
                processor._ark_fitted = True
                use_own_parser(processor, model)
            self._cut, self._prompt_len = None, 0
            return model_id, model, processor

        def _fit(self, encoded):
            if not hasattr(encoded, "keys") or "input_ids" not in encoded:
                return encoded
            n = _length(encoded["input_ids"])
            budget = window - reply_tokens
            if n > budget:
                for key in ("input_ids", "attention_mask"):
                    if key in encoded:
                        encoded[key] = _tail(encoded[key], budget)
                self._cut = (n, budget)
                if not FittingChatCompletionHandler._said_cut:  # the fit above keeps prompts inside; a guard
                    FittingChatCompletionHandler._said_cut = True
                    print(f"[ark serve] prompt of {n} tokens still cut to its last {budget}", flush=True)
            self._prompt_len = min(n, budget)
            return encoded

        def _build_generation_config(self, body, model_generation_config, use_cb=False):
            config = super()._build_generation_config(body, model_generation_config, use_cb=use_cb)
            if body.get("temperature") is None and body.get("top_p") is None:
                config.do_sample = False  # greedy, as the model was evaluated, unless the client asks
            config.max_new_tokens = reply_limit(config.max_new_tokens, reply_tokens, window - self._prompt_len,
                                                fitted=self._cut is not None)  # fmt: skip
            return config

    return FittingChatCompletionHandler


def _recording(app, args, dtype_of=None):
    """The app, wrapped in the recorder when ``--record`` asks (inside the gate: refusals are not turns);
    ``SIGHUP`` reloads the model folder (:mod:`ark_trainer.services.deploy.hotswap`) in ``dtype_of()``."""
    from ark_trainer.services.deploy import hotswap

    recorder = None
    if args.record:
        from ark_trainer.services.deploy.record import Recorder

        app = recorder = Recorder(app, args.record, args.tag)
    hotswap.install(recorder, dtype_of=dtype_of)
    from ark_trainer.services.deploy.concurrent import CancelOnDisconnect
    from ark_trainer.services.deploy.record import BudgetLog

    return BudgetLog(CancelOnDisconnect(app))  # a request whose client left: stopped, never recorded


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ark_trainer.services.deploy.serve")
    parser.add_argument("name", help="model folder, relative to the working directory: the served model id")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--window", type=int, required=True, help="the model's context in tokens")
    parser.add_argument("--reply_tokens", type=int, required=True, help="tokens kept free for the reply")
    parser.add_argument("--device", default="auto")
    parser.add_argument(
        "--prompt_shape",
        default="auto",
        help="serving policy: auto (the model's own), bare, tools, openclaw-turns, openclaw",
    )
    parser.add_argument(
        "--system_chars", type=int, default=0, help="of OpenClaw's system prompt, shown to a bare model"
    )
    parser.add_argument(
        "--dtype",
        default="auto",
        help="dtype the model is loaded in: auto (the one its evaluation used, recorded by train; else the "
        "weights' own), float32, bfloat16, float16",
    )
    parser.add_argument(
        "--concurrent", type=int, default=4, help="requests generated side by side (the rest wait their turn)"
    )
    parser.add_argument("--api_key_file", required=True, help="file holding the key clients must send")
    parser.add_argument("--record", help="append every exchange, scrubbed, to this JSONL (deploy/record.py)")
    parser.add_argument(
        "--tag", default="", help="what served the answers (a loop round), logged and recorded"
    )
    args = parser.parse_args(argv)
    key = read_text_bounded(args.api_key_file).strip()
    if not key:
        parser.error(f"--api_key_file: {args.api_key_file} is empty")
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ.setdefault(var, "1")

    import transformers.cli.serving.chat_completion as chat_completion
    import transformers.cli.serving.server as serving_server
    from transformers.cli.serve import Serve

    from ark_trainer.services.deploy.gate import Gate, config_vocab_size
    from ark_trainer.services.deploy.hotswap import track_model_managers

    track_model_managers()
    from ark_trainer.services.deploy.concurrent import install as generate_side_by_side

    generate_side_by_side(args.concurrent)  # one long answer no longer holds up every other user

    # Both patches replace transformers' own names at run time, which its types cannot express.
    from ark_trainer.services.deploy.policy import shape_for
    from ark_trainer.services.deploy.precision import serving_dtype

    def shape_of():
        return shape_for(Path(args.name), args.window, args.prompt_shape)

    def dtype_of() -> str:  # read again after a hot swap: the new model's own record
        dtype, why = serving_dtype(Path(args.name), args.dtype)
        print(f"[ark serve] dtype {dtype} ({why}); docs/openclaw.md", flush=True)
        return dtype

    chat_completion.ChatCompletionHandler = _fitting_handler(  # a subclass, patched in
        chat_completion.ChatCompletionHandler, args.window, args.reply_tokens, shape_of, args.system_chars
    )
    build_server = serving_server.build_server
    serving_server.build_server = lambda *a, **kw: Gate(  # an ASGI app, not FastAPI
        _recording(build_server(*a, **kw), args, dtype_of),
        key,
        args.port,
        vocab_size=lambda: config_vocab_size(Path(args.name)),
    )
    print(f"[ark serve] serving {args.tag or args.name}", flush=True)
    # Serve() builds the app with the names it imports from chat_completion and serving.server at call
    # time (the fitted handler, the gated app), then runs uvicorn until stopped.
    Serve(
        force_model=args.name, host=args.host, port=args.port, device=args.device, dtype=dtype_of(),
        log_level="info",
    )  # fmt: skip


if __name__ == "__main__":
    main()
