"""Describing what a program left behind: tensors' bytes and metadata, results, and every
variable's state with storages labelled canonically, so that a CPU run and a flagos run compare
as JSON-like values."""

from __future__ import annotations

import math
import re

import torch

DEV_RE = re.compile(r"flagos:\d|flagos|PrivateUse1|privateuseone")


def norm_msg(s: str) -> str:
    s = s.split("\nException raised from")[0]
    s = re.sub(r"flagos(?=[A-Z][a-zA-Z]*Type)", "CPU", s)  # flagosFloatType -> CPUFloatType
    s = DEV_RE.sub("cpu", s)
    s = re.sub(r"0x[0-9a-f]+", "0xADDR", s)
    return s.strip()


def tensor_bytes(t: torch.Tensor) -> str:
    t = t.detach()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    t = t.cpu()
    t = torch.empty((t.numel(),), dtype=t.dtype).copy_(t.reshape(-1))
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    try:
        b = t.view(torch.uint8)
    except RuntimeError:
        b = t.to(torch.float64).view(torch.uint8)
    return b.numpy().tobytes().hex()


def tensor_values(t: torch.Tensor):
    try:
        t = t.detach().resolve_conj().resolve_neg().cpu()
        if t.dtype == torch.bfloat16 or t.dtype == torch.float16:
            t = t.float()
        return t.tolist()
    except Exception as e:
        return f"<{type(e).__name__}>"


def tensor_meta(t: torch.Tensor):
    return {
        "dtype": str(t.dtype),
        "shape": list(t.shape),
        "stride": list(t.stride()),
        "offset": t.storage_offset(),
        "conj": t.is_conj(),
        "neg": t.is_neg(),
        "devtype": t.device.type if t.device.type != "privateuseone" else "flagos",
        "is_view": t._is_view(),
        "requires_grad": t.requires_grad,
        "version": t._version,
        "grad_fn": type(t.grad_fn).__name__ if t.grad_fn is not None else None,
    }


def flatten_vars(ns, names):
    """(label, tensor) for every tensor variable, tensors inside tuples/lists too."""
    out = []
    for n in names:
        v = ns.get(n)
        if isinstance(v, torch.Tensor):
            out.append((n, v))
        elif isinstance(v, (tuple, list)):
            for i, e in enumerate(v):
                if isinstance(e, torch.Tensor):
                    out.append((f"{n}[{i}]", e))
    return out


def storage_key(t):
    try:
        return t.untyped_storage()._cdata
    except Exception:
        return None


def snapshot(ns, names, tainted=()):
    """Every variable's state; storages labelled canonically (first seen = S0). Tensors over a
    storage that set_ grew hold uninitialized bytes: not compared."""
    labels = {}
    snap = {}
    for label, t in flatten_vars(ns, names):
        k = storage_key(t)
        if k not in labels:
            labels[k] = f"S{len(labels)}"
        d = tensor_meta(t)
        d["storage"] = labels[k]
        d["nbytes"] = t.untyped_storage().nbytes()
        d["bytes"] = "<uninitialized>" if k in tainted else tensor_bytes(t)
        snap[label] = d
    return snap


def describe_result(v, ns, names, depth=0, tainted=()):
    if isinstance(v, torch.Tensor):
        d = tensor_meta(v)
        d["kind"] = "T"
        d["is"] = sorted(n for n, t in flatten_vars(ns, names) if t is v)
        sk = storage_key(v)
        d["shares"] = sorted(n for n, t in flatten_vars(ns, names) if storage_key(t) == sk)
        d["bytes"] = "<uninitialized>" if sk in tainted else tensor_bytes(v)
        return d
    if isinstance(v, (tuple, list)) and depth < 2:
        return {
            "kind": type(v).__name__,
            "items": [describe_result(e, ns, names, depth + 1, tainted) for e in v],
        }
    if isinstance(v, float):
        if math.isnan(v):
            return {"kind": "py", "v": "nan"}
        return {"kind": "py", "v": repr(v)}
    if isinstance(v, torch.device):
        return {"kind": "device", "v": v.type if v.type == "cpu" else "flagos"}
    if isinstance(v, (int, bool, str, type(None), torch.Size, torch.dtype, complex)):
        r = repr(v)
        return {"kind": "py", "v": DEV_RE.sub("cpu", r)}
    return {"kind": type(v).__name__, "v": norm_msg(repr(v))[:200]}


def contains_tensor(v):
    if isinstance(v, torch.Tensor):
        return True
    if isinstance(v, (tuple, list)):
        return any(contains_tensor(e) for e in v)
    return False


class AllTainted(set):
    def __contains__(self, k):
        return True
