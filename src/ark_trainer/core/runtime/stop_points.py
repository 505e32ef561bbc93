"""Where a run that was asked to stop (Ctrl-C, ``core/runtime/signals.py``) actually stops: the stop points.

An optimizer step of a real model on CPU lasts a minute, and one backward pass can take most of it as one
uninterruptible call; a stop checked only between steps came a minute late. So the check runs inside the
model: before each decoder layer's forward (every decoding step of a generation batch, TRL's included, and
every micro-step's forward) and as each layer's gradient is computed in the backward pass. A stop there
leaves nothing half-saved: checkpoints are only ever written between steps, after the backward pass.
"""

from __future__ import annotations

from typing import Any

from ark_trainer.core.runtime.signals import check_stop


def decoder_layers(model) -> list:
    """The model's decoder layers (transformers' ``GradientCheckpointingLayer``: every decoder of the Hub's
    causal LMs); none for a model without them (its steps' and batches' own stop points remain)."""
    from transformers.modeling_layers import GradientCheckpointingLayer

    return [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]


def _stop_in_backward(module, args, output) -> None:
    """A forward hook: the output's gradient, once computed in the backward pass, is a stop point too."""
    first = output[0] if isinstance(output, tuple | list) and output else output
    if getattr(first, "requires_grad", False):
        first.register_hook(_check_grad)


def _check_grad(grad):
    check_stop()
    return grad


def add_stop_points(model) -> list[Any]:
    """Stop points in ``model``'s decoder layers (forward and backward); returns the hook handles."""
    handles = []
    for layer in decoder_layers(model):
        handles.append(layer.register_forward_pre_hook(lambda module, args: check_stop()))
        handles.append(layer.register_forward_hook(_stop_in_backward))
    return handles


def remove_stop_points(handles: list[Any]) -> None:
    for handle in handles:
        handle.remove()


def stop_callback():
    """A TrainerCallback: stop points before each step, after each micro-step and in the trained model's
    layers (not at a step's end: the checkpoint due at that step is saved first)."""
    from transformers import TrainerCallback

    class _StopPoints(TrainerCallback):
        def __init__(self) -> None:
            self.handles: list[Any] = []

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            if model is not None and not self.handles:
                self.handles = add_stop_points(model)
            check_stop()

        def on_step_begin(self, args, state, control, **kwargs):
            check_stop()

        def on_substep_end(self, args, state, control, **kwargs):
            check_stop()

        def on_train_end(self, args, state, control, **kwargs):
            remove_stop_points(self.handles)
            self.handles = []

    return _StopPoints()
