"""The fixtures of the agent tests."""

from tests.agent.calc_env import calc  # noqa: F401 - the Calc environment with tight limits
