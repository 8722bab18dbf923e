"""``flex_attention`` in eager mode on flagos.

``torch.nn.attention.flex_attention`` refuses every device type outside its list ("only
supported on CUDA, CPU, HPU, or MPS devices"); in eager mode it runs its higher-order op's dense
implementation, plain ATen operators that run on flagos through the route table, forward and
backward. The adapter lets flagos tensors through that check (only them). Compiled
``flex_attention`` needs an Inductor flex lowering for flagos, which does not exist (the
operators then run as in eager on a vendor without code generation).

Upstream, a device check that accepts PrivateUse1 devices for the eager path would make this
unnecessary. Tested with torch 2.10 to 2.13.
"""

from __future__ import annotations

from types import ModuleType

from torch_fl.integrations._support import wrap_once

__all__ = ["install"]


def install(module: ModuleType) -> str | None:
    """Install on ``torch.nn.attention.flex_attention``; the reason when it cannot be."""
    original = getattr(module, "_validate_device", None)
    if original is None:
        return "torch.nn.attention.flex_attention has no _validate_device"

    def make(fn):
        def _validate_device(query, key, value):
            if query.device.type == "flagos":
                return None
            return fn(query, key, value)

        return _validate_device

    module._validate_device = wrap_once(original, make)
    return None
