"""``torch.compile`` on ``flagos``: Dynamo's device interface and Inductor's code generation.

:func:`register` runs when ``torch_fl`` is imported. Dynamo and Inductor are not imported then
(that would add about a second to every ``import torch``); the registration completes the moment
they are imported, before anything can be traced (:mod:`torch_fl.compile._import_hooks`). After
that, plain ``torch.compile(model)`` works on ``flagos`` tensors with the default backend.

Which Inductor scheduling compiles ``flagos`` graphs is the vendor's choice, see
:mod:`torch_fl.compile.choice` and docs/compile.md.
"""

from __future__ import annotations

from types import ModuleType

from torch_fl.compile.choice import (
    graphs_supported,
    scheduling,
    triton_target,
    tuning_device_type,
)

__all__ = [
    "graphs_supported",
    "register",
    "registered",
    "scheduling",
    "triton_target",
    "tuning_device_type",
]

_DEVICE = "flagos"
_done: set[str] = set()


def _register_dynamo(module: ModuleType) -> None:
    from torch_fl.compile.device_interface import FlagosInterface

    module.register_interface_for_device(_DEVICE, FlagosInterface)
    _done.add("dynamo")


def _register_inductor(module: ModuleType) -> None:
    from torch_fl.compile import inductor

    inductor.register(module)
    _done.add("inductor")


def register() -> None:
    """Arm (or, if Dynamo/Inductor are already imported, perform) the registration. Idempotent."""
    from torch_fl.compile import _import_hooks, conv_layout

    # Fake tensors (compile, export) predict a flagos convolution's strides as flagos answers.
    conv_layout.install()
    _import_hooks.when_imported("torch._dynamo.device_interface", _register_dynamo)
    _import_hooks.when_imported("torch._inductor.compile_fx", _register_inductor)


def registered() -> frozenset[str]:
    """Which halves are registered so far: ``{"dynamo", "inductor"}`` once both are imported."""
    return frozenset(_done)
