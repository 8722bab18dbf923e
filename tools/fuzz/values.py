"""The values programs are built from: dtypes, fills, shapes and ``mk``, the one constructor
programs call for their base tensors."""

from __future__ import annotations

import math

import torch

DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "int64": torch.int64,
    "bool": torch.bool,
    "complex64": torch.complex64,
    "bfloat16": torch.bfloat16,
    "int32": torch.int32,
    "uint8": torch.uint8,
    "float16": torch.float16,
}
MAIN_DTYPES = ["float32", "float64", "int64", "bool", "complex64", "bfloat16"]
FILLS = ["0", "1.5", "float('nan')"]
FILLS2 = ["2", "0.5", "True", "3j", "float('inf')"]
SPECIAL = [float("nan"), float("inf"), float("-inf"), -0.0, 0.5, 1e30]


def mk(shape, dtype, seed, device, special=False):
    """Deterministic small values: halves in [-4, 4]; NaN/inf/-0.0 when special."""
    g = torch.Generator().manual_seed(seed)
    dt = DTYPES[dtype]
    n = 1
    for s in shape:
        n *= s
    if dt == torch.bool:
        t = torch.randint(0, 2, (n,), generator=g).bool()
    elif dt in (torch.int64, torch.int32, torch.uint8):
        lo = 0 if dt == torch.uint8 else -5
        t = torch.randint(lo, 6, (n,), generator=g).to(dt)
    else:
        base = torch.randint(-8, 9, (n,), generator=g).double() / 2
        if special and n > 0:
            k = torch.randint(0, n, (max(1, n // 3),), generator=g)
            vals = torch.tensor(SPECIAL, dtype=torch.float64)
            base[k] = vals[torch.randint(0, len(SPECIAL), (len(k),), generator=g)]
        if dt.is_complex:
            im = torch.randint(-8, 9, (n,), generator=g).double() / 2
            t = torch.complex(base, im).to(dt)
        else:
            t = base.to(dt)
    return t.reshape(shape).clone().to(device)


PROGRAM_GLOBALS = {"torch": torch, "mk": mk, "math": math}


SHAPES = [
    (),
    (0,),
    (1,),
    (5,),
    (3, 4),
    (4, 3),
    (2, 3, 4),
    (4, 1),
    (1, 4),
    (2, 0, 3),
    (6, 6),
    (3, 3),
    (8,),
    (2, 2, 2),
    (2, 3, 2, 2),
]


def bcastable(a, b):
    try:
        torch.broadcast_shapes(a, b)
        return True
    except RuntimeError:
        return False
