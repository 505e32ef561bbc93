"""The reason the model server gives when a chat template refuses a request."""

from __future__ import annotations

REASON = "chat template failed to render: this template refuses a greeting"
