"""A chat template that fails on one request (``services/deploy/rendererror.py``): answered as OpenAI's API answers an
error (``{"error": {"message": "chat template failed to render: <reason>"}}``), 400 when the template refused
the request, 500 when it broke; transformers let such a failure escape as a 500 with no readable body.
"""

from __future__ import annotations

from ark_trainer.services.deploy.rendererror import TemplateRenderError


def test_a_refusing_template_is_400_a_broken_one_500():
    from jinja2.exceptions import TemplateError

    refused = TemplateRenderError(TemplateError("roles must alternate\nuser/assistant"))
    assert refused.status == 400 and refused.body()["error"]["message"] == (
        "chat template failed to render: roles must alternate user/assistant"
    )
    broken = TemplateRenderError(TypeError('can only concatenate str (not "int") to str'))
    assert broken.status == 500 and broken.body()["error"]["code"] == "chat_template_error"
