"""Comparing an operator's ``flagos`` result with its CPU result, through nested structures.

:func:`compare` walks both results together (tensors, lists, tuples, namedtuples such as
``torch.return_types``, dicts, Python scalars) and returns the first difference as a
:class:`Mismatch`, or ``None``. A tensor from the ``flagos`` side must be on ``flagos`` and have the
CPU tensor's shape and dtype; its values must match within :mod:`.tolerances`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from torch_fl.conformance import tolerances
from torch_fl.conformance.transfer import device_name

__all__ = ["Mismatch", "compare"]


@dataclass
class Mismatch:
    """Where and how two results differ. ``kind``: structure, device, metadata or values."""

    path: str
    kind: str
    message: str
    max_abs: float | None = None
    max_rel: float | None = None

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path else ""
        return f"{where}{self.message}"


def _dense(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    if t.layout != torch.strided:
        t = t.to_dense()
    return t.cpu().resolve_conj().resolve_neg()


def _compare_values(
    actual: torch.Tensor, expected: torch.Tensor, path: str, accumulates: bool
) -> Mismatch | None:
    a, e = _dense(actual), _dense(expected)
    tol = tolerances.for_tensor(e, accumulates=accumulates)
    if tol.exact or not (e.is_floating_point() or e.is_complex()):
        if torch.equal(a, e):
            return None
        differ = (a != e).reshape(-1).nonzero()
        first = int(differ[0]) if differ.numel() else 0
        return Mismatch(
            path,
            "values",
            f"{differ.numel()} of {e.numel()} elements differ (exact compare; first at flat index "
            f"{first}: {a.reshape(-1)[first].item()} != {e.reshape(-1)[first].item()})",
        )
    if e.is_complex():
        a, e = torch.view_as_real(a), torch.view_as_real(e)
    a64, e64 = a.to(torch.float64), e.to(torch.float64)
    close = torch.isclose(a64, e64, rtol=tol.rtol, atol=tol.atol, equal_nan=True)
    if bool(close.all()):
        return None
    bad = ~close
    diff = (a64 - e64).abs()
    # NaN on one side only or mismatched infinities count as infinitely far apart.
    diff = torch.where(torch.isnan(diff) | torch.isinf(diff), math.inf, diff)
    bad_diff = diff[bad]
    rel = bad_diff / e64.abs()[bad]
    max_abs = float(bad_diff.max())
    max_rel = float(rel.max()) if rel.numel() else math.inf
    first = int(bad.reshape(-1).nonzero()[0])
    return Mismatch(
        path,
        "values",
        f"{int(bad.sum())} of {bad.numel()} values differ beyond {tol}; max abs diff {max_abs:.3g}, "
        f"max rel diff {max_rel:.3g} (first at flat index {first}: "
        f"{a64.reshape(-1)[first].item():.7g} != {e64.reshape(-1)[first].item():.7g})",
        max_abs=max_abs,
        max_rel=max_rel,
    )


def _compare_tensor(
    actual: Any, expected: torch.Tensor, path: str, values: bool, accumulates: bool, devices: bool
) -> Mismatch | None:
    if not isinstance(actual, torch.Tensor):
        return Mismatch(path, "structure", f"expected a tensor, got {type(actual).__name__}")
    want = device_name() if expected.device.type == "cpu" else expected.device.type
    if devices and actual.device.type != want:
        return Mismatch(path, "device", f"result is on {actual.device}, expected a {want} tensor")
    if actual.shape != expected.shape:
        return Mismatch(path, "metadata", f"shape {tuple(actual.shape)} != {tuple(expected.shape)}")
    if actual.dtype != expected.dtype:
        return Mismatch(path, "metadata", f"dtype {actual.dtype} != {expected.dtype}")
    if actual.layout != expected.layout:
        return Mismatch(path, "metadata", f"layout {actual.layout} != {expected.layout}")
    if not values:
        return None
    return _compare_values(actual, expected, path, accumulates)


def _compare_scalar(actual: Any, expected: Any, path: str, values: bool) -> Mismatch | None:
    if type(actual) is not type(expected) and not (
        isinstance(actual, (int, float)) and isinstance(expected, (int, float))
    ):
        return Mismatch(
            path,
            "structure",
            f"expected {type(expected).__name__}, got {type(actual).__name__}",
        )
    if not values:
        return None
    if isinstance(expected, (float, complex)):
        if (
            (isinstance(expected, float) and math.isnan(expected) and math.isnan(actual))
            or actual == expected
            or abs(actual - expected) <= 1e-5 + 1.3e-6 * abs(expected)
        ):
            return None
    elif actual == expected:
        return None
    return Mismatch(path, "values", f"{actual!r} != {expected!r}")


def compare(
    actual: Any,
    expected: Any,
    *,
    values: bool = True,
    accumulates: bool = False,
    devices: bool = True,
    path: str = "",
) -> Mismatch | None:
    """The first difference between ``actual`` (flagos) and ``expected`` (CPU), or ``None``.

    ``values=False`` checks structure, devices, shapes and dtypes only (random and uninitialised
    results). ``accumulates``: scale atol for sums of many terms (see :mod:`.tolerances`).
    ``devices=False``: do not require ``flagos`` tensors (comparing inputs, some stay on CPU).
    """
    kw = {"values": values, "accumulates": accumulates, "devices": devices}
    if isinstance(expected, torch.Tensor):
        return _compare_tensor(actual, expected, path or "result", values, accumulates, devices)
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or actual.keys() != expected.keys():
            return Mismatch(path, "structure", "dict keys differ")
        for k in expected:
            found = compare(actual[k], expected[k], path=f"{path}[{k!r}]", **kw)
            if found:
                return found
        return None
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            got = len(actual) if isinstance(actual, (list, tuple)) else type(actual).__name__
            return Mismatch(path, "structure", f"expected a sequence of {len(expected)}, got {got}")
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            found = compare(a, e, path=f"{path or 'result'}[{i}]", **kw)
            if found:
                return found
        return None
    if isinstance(expected, (bool, int, float, complex)):
        return _compare_scalar(actual, expected, path or "result", values)
    if expected is None:
        return None if actual is None else Mismatch(path or "result", "structure", "expected None")
    # dtypes, devices, strings, None: equal where they are not devices.
    if isinstance(expected, torch.device):
        return None
    if actual != expected:
        return Mismatch(path or "result", "values", f"{actual!r} != {expected!r}")
    return None
