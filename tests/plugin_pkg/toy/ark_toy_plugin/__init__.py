"""A throw-away ark-trainer plug-in (the tests install it through its entry point): one of each thing.

``ark-toy-plugin`` declares ``[ark_trainer] toy = ark_toy_plugin``; ark-trainer calls each hook below when
the registry it fills is first used. Nothing heavy is imported until a hook or the stage runs.
"""

from __future__ import annotations


def register_stages(register):
    from ark_toy_plugin.stage import EchoStage

    register(EchoStage)  # the one registration line of a new stage


def register_strategies(register):
    from ark_trainer.base.strategies import Strategy

    register("ECHO", Strategy(("echo",), "one step: supervised fine-tuning on each row's first candidate"))


def register_grader_kinds(register):
    register("max_words", {"max_words"}, _max_words)


def register_deploy_targets(register):
    register("toyfile", "ark_toy_plugin.deploy")  # imported only when `deploy --target toyfile` runs


def register_commands(register):
    from ark_toy_plugin.hello import HelloOptions, hello

    register("hello", HelloOptions, hello, help="say hello from the toy plug-in")


def _max_words(entry, name: str):
    """Grader type ``max_words``: 1.0 for an answer of at most ``max_words`` words, else 0.0."""
    from ark_trainer.rewards.contract import completion_text

    limit = int(entry.number("max_words", 5, low=1, integer=True))

    def reward(prompts, completions, **columns):
        return [1.0 if len(completion_text(c).split()) <= limit else 0.0 for c in completions]

    reward.__name__ = name
    return reward
