"""A chat template that fails on one request: answered with its reason, never a bare "HTTP Error 500".

The model's chat template renders each request (the serving policy and the fit render it too); a template
may refuse a conversation (``raise_exception('…')``: Qwen's and Llama's do for roles out of order) or break
on one (a field it does not expect). transformers let that escape as a 500 with no body a client can read.
The server answers it instead as OpenAI's API answers an error, ``{"error": {"message": "chat template
failed to render: <reason>", ...}}``: 400 when the template refused the request (a Jinja ``TemplateError``),
500 when it broke otherwise, and says so in one line in ``server.log``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

MAX_REASON_CHARS = 300


class TemplateRenderError(Exception):
    """The chat template failed to render one request; ``status`` and ``message`` are what the client gets."""

    def __init__(self, cause: BaseException) -> None:
        reason = " ".join(str(cause).split())[:MAX_REASON_CHARS] or type(cause).__name__
        self.status = 400 if _refused(cause) else 500
        self.message = f"chat template failed to render: {reason}"
        super().__init__(self.message)

    def body(self) -> dict:
        kind = "invalid_request_error" if self.status == 400 else "server_error"
        return {"error": {"message": self.message, "type": kind, "code": "chat_template_error"}}


def _refused(cause: BaseException) -> bool:
    try:
        from jinja2.exceptions import TemplateError
    except ImportError:  # pragma: no cover - jinja2 comes with transformers' chat templates
        return False
    return isinstance(cause, TemplateError)


@contextmanager
def render_errors() -> Iterator[None]:
    """Whatever fails while the template renders (the fit's renders included) is a :class:`TemplateRenderError`."""
    try:
        yield
    except TemplateRenderError:
        raise
    except Exception as exc:
        raise TemplateRenderError(exc) from exc


class TemplateErrorAnswers:
    """Mixin for transformers' ChatCompletionHandler: a :class:`TemplateRenderError` is answered as an
    OpenAI error body with its reason (and one line in ``server.log``) instead of a bare 500."""

    async def handle_request(self, body, request_id):
        try:
            return await super().handle_request(body, request_id)  # type: ignore[misc]  # transformers' handler
        except TemplateRenderError as exc:
            from fastapi.responses import JSONResponse

            print(f"[ark serve] answered {exc.status}: {exc.message}", flush=True)
            return JSONResponse(exc.body(), status_code=exc.status)
