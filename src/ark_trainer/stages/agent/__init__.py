"""Agent episodes: tool calls in the model's text, the tools that run them, and multi-turn rollouts."""
