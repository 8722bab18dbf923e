"""Heap allocations per call, flagos less CPU, for the per-call budget test.

Run in a child with malloc_count's library preloaded; prints one JSON object: case -> the extra
allocations of one flagos call over the same call on CPU tensors (steady state, averaged)."""

from __future__ import annotations

import ctypes
import json
import sys
import threading

import torch

WARM, CALLS = 30, 50


def counted(lib: ctypes.CDLL, fn) -> float:
    """Allocations per call: the least of three windows, so that a one-off allocation of
    Python's own (a new arena for its small-object allocator, a cache filling) in one window is
    not read as the call's."""
    for _ in range(WARM):
        fn()
    windows = []
    for _ in range(3):
        lib.tfl_malloc_count_start()
        for _ in range(CALLS):
            fn()
        windows.append(lib.tfl_malloc_count_stop())
    return min(windows) / CALLS


def cases(dev: str) -> dict:
    g = torch.Generator().manual_seed(0)

    def t(*shape):
        return torch.randn(*shape, generator=g).to(dev)

    a, b, o, bias, x, w = t(64, 64), t(64, 64), t(64, 64), t(64), t(8, 64), t(64, 64)
    lists = {n: ([t(256) for _ in range(n)], [t(256) for _ in range(n)]) for n in (10, 150)}
    image, kernel = t(2, 4, 8, 8), t(4, 4, 3, 3)
    image_cl = image.contiguous(memory_format=torch.channels_last)
    return {
        "add_": lambda: a.add_(b),
        "add_out": lambda: torch.add(a, b, out=o),
        "add": lambda: torch.add(a, b),
        "addmm": lambda: torch.addmm(bias, x, w),
        "foreach_add_10": lambda: torch._foreach_add_(*lists[10]),
        "foreach_add_150": lambda: torch._foreach_add_(*lists[150]),
        "conv2d": lambda: torch.nn.functional.conv2d(image, kernel, padding=1),
        "conv2d channels_last": lambda: torch.nn.functional.conv2d(image_cl, kernel, padding=1),
    }


def main() -> int:
    lib = ctypes.CDLL(sys.argv[1])
    lib.tfl_malloc_count_stop.restype = ctypes.c_long
    fl, cpu = cases("flagos:0"), cases("cpu")
    out = {k: counted(lib, fl[k]) - counted(lib, cpu[k]) for k in fl}
    # The same call from another thread (autograd's device threads are others).
    res = {}

    def other() -> None:
        res["add_ (other thread)"] = counted(lib, fl["add_"]) - counted(lib, cpu["add_"])

    th = threading.Thread(target=other)
    th.start()
    th.join()
    out.update(res)
    # An out= call served by the CPU fallback (copies to the host and back; its references kept
    # for a kernel that raises).
    from torch_fl.routing import override

    with override({"add.out": "cpu"}):
        out["add_out (cpu fallback)"] = counted(lib, fl["add_out"]) - counted(lib, cpu["add_out"])
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
