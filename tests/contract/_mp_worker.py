"""The child side of test_multiprocessing.py (importable by spawn and forkserver children).

The child reports every item it receives as a plain dict of CPU data (so the report itself never
needs flagos sharing), and writes into flagos tensors it is told to, then synchronizes, so the
parent can check that the memory is shared.
"""

from __future__ import annotations

import dataclasses
import queue
import traceback

import torch

STOP = "stop"


@dataclasses.dataclass
class Holder:
    """An object of a type no container walk knows, holding a tensor."""

    tensor: torch.Tensor


def describe(t) -> dict:
    if isinstance(t, torch.UntypedStorage):
        return {
            "device": str(t.device),
            "class": type(t).__name__,
            "nbytes": t.nbytes(),
            "values": t.cpu().tolist(),
        }
    return {
        "device": str(t.device),
        "class": type(t).__name__,
        "shape": tuple(t.shape),
        "stride": tuple(t.stride()),
        "offset": t.storage_offset(),
        "dtype": str(t.dtype),
        "requires_grad": t.requires_grad,
        "values": t.detach().cpu().tolist(),
    }


def receive(inq, outq, timeout: float) -> None:
    """Report each item of ``inq`` on ``outq`` until STOP: ("item", description) or, for an item
    ``("write", t, value)``, the description after ``t.fill_(value)`` and a synchronize;
    ``("keep", t)`` keeps ``t`` (reported), ``("kept",)`` reports the kept tensor again, and
    ``("echo", t)`` sends ``t`` itself back as ("tensor", t)."""
    kept = None
    try:
        while True:
            try:
                item = inq.get(timeout=timeout)
            except queue.Empty:
                outq.put(("empty", None))
                return
            if isinstance(item, str) and item == STOP:
                outq.put(("stopped", None))
                return
            if isinstance(item, tuple) and item and item[0] == "keep":
                kept = item[1]
                outq.put(("item", describe(kept)))
            elif isinstance(item, tuple) and item and item[0] == "kept":
                outq.put(("item", describe(kept)))
            elif isinstance(item, tuple) and item and item[0] == "echo":
                outq.put(("tensor", item[1]))
            elif isinstance(item, tuple) and item and item[0] == "write":
                _, t, value = item
                with torch.no_grad():
                    t.fill_(value)
                if t.device.type == "flagos":
                    torch.flagos.synchronize(t.device)
                outq.put(("item", describe(t)))
                del t
            else:
                outq.put(("item", describe(item)))
            del item
    except BaseException:
        outq.put(("error", traceback.format_exc()))
