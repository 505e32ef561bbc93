"""A throw-away plug-in whose names are taken by ark-trainer's own: each is refused in one line."""

from __future__ import annotations


class RFTAgain:
    name, label = "rft", "RFT again"
    steps_flag, lr_flag = None, "rft_learning_rate"
    plots = ()

    def run(self, ctx, plan, model_in, final_dir):
        raise AssertionError("a refused stage never runs")


def register_stages(register):
    register(RFTAgain)


def register_strategies(register):
    from ark_trainer.base.strategies import Strategy

    register("GRPO", Strategy(("grpo",), "a second GRPO"))


def register_grader_kinds(register):
    register("regex", {"pattern"}, lambda entry, name: None)


def register_deploy_targets(register):
    register("openclaw", "ark_clash_plugin")


def register_commands(register):
    from dataclasses import dataclass

    @dataclass
    class Nothing:
        pass

    register("train", Nothing, lambda args: 0, help="a second train")
    raise RuntimeError("a broken hook")  # a plug-in's own bug: one line, and ark-trainer goes on
