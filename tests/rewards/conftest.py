"""The fixtures of the rewards' tests: judges on 127.0.0.1, a resolver that knows no ``*.invalid`` host, a
tiny model, and a module of rules that are not reward functions; the ``ark_trainer`` logger restored after
each test (a ``train`` run in-process points it at that test's captured stderr).
"""

from __future__ import annotations

import logging
import socket
import sys
from pathlib import Path

import pytest

from tests.agent.calc_env import calc  # noqa: F401 - the agent tests' Calc environment, for the episode graders
from tests.conftest import save_tiny_qwen
from tests.rewards.attacks import _serve


@pytest.fixture(autouse=True)
def _restore_logging():
    """A train run in-process points the ``ark_trainer`` logger at that test's captured stderr: undo it."""
    logger = logging.getLogger("ark_trainer")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    yield
    for handler in list(logger.handlers):
        if handler not in handlers:
            logger.removeHandler(handler)
            handler.close()
    logger.setLevel(level)
    logger.propagate = propagate


@pytest.fixture
def servers():
    made = []

    def make(mode="ok", target=""):
        made.append(_serve(mode, target))
        return made[-1]

    yield make
    for srv in made:
        srv.shutdown()
        srv.server_close()


@pytest.fixture
def no_dns(monkeypatch):
    """``*.invalid`` does not resolve (as RFC 6761 promises), without asking any resolver."""
    asked, real = [], socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        if str(host).endswith(".invalid"):
            asked.append(host)
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return asked


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return save_tiny_qwen(tmp_path_factory.mktemp("harden_model") / "model")


@pytest.fixture
def user_rules(tmp_path, monkeypatch):
    (tmp_path / "harden_rules.py").write_text(
        "BAD = [float('inf'), float('nan'), 1e308, 10**400]\n"
        "def bad(prompts, completions, **kw):\n    return [BAD[i % 4] for i in range(len(completions))]\n"
        "def fine(prompts, completions, **kw):\n    return [0.5 for _ in completions]\n"
        "def scalar(prompts, completions, **kw):\n    return 0.5\n"
        "def positional(prompts, completions):\n    return [1.0 for _ in completions]\n"
        "def grade(sample, item):\n    return 10**400\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("harden_rules", None)
