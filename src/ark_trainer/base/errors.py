"""Errors a user can act on.

Anything raised as :class:`UserError` is printed by the CLI as one line per message (naming the file,
line, field or flag and the fix) and exits with code 2, without a traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """A mistake in the user's input: printed without traceback, exit code 2."""

    def __init__(self, *messages: str) -> None:
        super().__init__(messages[0] if messages else "")
        self.messages = list(messages)
