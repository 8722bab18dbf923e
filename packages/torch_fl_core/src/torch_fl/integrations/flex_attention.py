"""``flex_attention`` in eager mode on flagos.

``torch.nn.attention.flex_attention`` refuses every device type outside its list ("only
supported on CUDA, CPU, HPU, or MPS devices"); in eager mode it runs its higher-order op's dense
implementation, plain ATen operators that run on flagos through the route table, forward and
backward. The adapter lets flagos tensors through that check (only them).

Compiled: on a vendor without code generation the operators run as in eager. Under C++
scheduling (sim) Inductor's CPU template lowers it (``torch_fl.compile.flex_lowering``); that
template is inference-only, so the adapter asks for no log-sum-exp on such flagos tensors, as
``flex_attention`` does for ``cpu`` ones (an explicit ``return_lse`` still asks, and is refused as
on the CPU).

Upstream, a device check that accepts PrivateUse1 devices for the eager path would make this
unnecessary. Tested with torch 2.10 to 2.13.
"""

from __future__ import annotations

import inspect
from types import ModuleType
from typing import Any

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
    options = getattr(module, "_apply_kernel_options", None)
    if options is not None:
        module._apply_kernel_options = wrap_once(options, _host_template_options)
    return None


def _host_template_options(fn):
    signature = inspect.signature(fn)

    def _apply_kernel_options(*args: Any, **kwargs: Any) -> Any:
        result = fn(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        query = bound.arguments.get("query")
        if query is None or query.device.type != "flagos" or not _host_codegen():
            return result
        aux = bound.arguments.get("return_aux")
        if not bound.arguments.get("return_lse") and not (aux is not None and aux.lse):
            result["OUTPUT_LOGSUMEXP"] = False
        return result

    return _apply_kernel_options


def _host_codegen() -> bool:
    from torch_fl.compile import choice

    return choice.scheduling() == "cpp"
