"""A tool environment for the agent tests, written to a file in the test's folder: ``Calc`` adds, and has a
tool that fails, one that is too slow and one that says too much (``calc`` limits them); ``call`` writes a
tool call as the model would, ``row`` a data row.
"""

from __future__ import annotations

import json

import pytest

from ark_trainer.stages.agent.env import Limits, ToolEnv, limited_env_class, load_env

ENV_SOURCE = '''
import time

class Calc:
    def reset(self, target=None, **row):
        self.target, self.said = target, None

    def add(self, a: int, b: int) -> int:
        """Add two numbers.

        Args:
            a: The first number.
            b: The second number.
        """
        self.said = a + b
        return a + b

    def boom(self) -> str:
        """Always fails."""
        raise RuntimeError("the tool broke")

    def slow(self) -> str:
        """Takes too long."""
        time.sleep(2)
        return "late"

    def essay(self) -> str:
        """A long text."""
        return "x" * 100

    def get_reward(self) -> float:
        return 1.0 if self.said == self.target else 0.0

def make_env():
    return Calc()

def no_reset():
    return object()

class Bare:
    def reset(self, **row):
        pass

def no_tools():
    return Bare()

def undocumented():
    def f(x):
        return x
    return [f]
'''


@pytest.fixture
def calc(tmp_path) -> type[ToolEnv]:
    path = tmp_path / "calc_env.py"
    path.write_text(ENV_SOURCE)
    return limited_env_class(
        load_env(f"{path}:make_env"), Limits(max_turns=3, tool_timeout=0.3, max_tool_output=20)
    )


def call(name: str, **args) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


def row(**cols) -> dict:
    return {"prompt": [{"role": "user", "content": "add 2 and 3"}], **cols}
