"""Compiled ``flex_attention`` on vendors whose Inductor code is C++ on host-addressable memory.

Inductor lowers the flex-attention higher-order op to a Triton template, or on ``cpu`` tensors
to its C++ template (``lower_cpu``), chosen by the query's device type. A ``flagos`` tensor under
C++ scheduling (sim) is memory the generated C++ reads directly, as for the CPU, so its lowering
is the CPU one; everything else keeps Inductor's choice. The CPU template serves inference only,
so ``flex_attention`` asks for no log-sum-exp on such tensors, exactly as it does for ``cpu`` ones
(``torch_fl.integrations.flex_attention``); a compiled backward is refused as it is on the CPU.
Tested with torch 2.10 to 2.13.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import torch

__all__ = ["install"]

_INSTALLED = "_torch_fl_flex_on_host"


def install(lowering: ModuleType) -> bool:
    """Route flagos flex-attention lowerings to Inductor's C++ template; False when this torch
    has no such template or lowering."""
    hop = getattr(torch.ops.higher_order, "flex_attention", None)
    try:
        from torch._inductor.kernel.flex.flex_cpu import lower_cpu
    except ImportError:
        return False
    original = lowering.lowerings.get(hop) if hop is not None else None
    if original is None:
        return False
    if getattr(original, _INSTALLED, False):
        return True

    def flex_attention(query: Any, *args: Any, **kwargs: Any) -> Any:
        if query.get_device().type == "flagos":
            return lower_cpu(query, *args, **kwargs)
        return original(query, *args, **kwargs)

    setattr(flex_attention, _INSTALLED, True)
    lowering.lowerings[hop] = flex_attention
    return True
