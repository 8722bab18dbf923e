"""Turning what users pass as a device (int, "flagos:1", torch.device) into a checked index."""

from __future__ import annotations

import torch

from torch_fl import _C
from torch_fl.device import errors

__all__ = ["DeviceLike", "explicit_index", "resolve"]

#: What the device module accepts wherever CUDA's accepts a device.
DeviceLike = int | str | torch.device | None

_TYPE = "flagos"


def explicit_index(device: DeviceLike) -> int | None:
    """The index named by ``device``; None when it names none ("flagos", None).

    Raises ValueError for a device of another type. Does not check the range.
    """
    if device is None:
        return None
    if isinstance(device, bool):  # a bool is an int; True is not a device
        raise ValueError(errors.wrong_device_type(device))
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        try:
            device = torch.device(device)
        except RuntimeError as exc:
            raise ValueError(f"{errors.wrong_device_type(device)} ({exc})") from None
    if isinstance(device, torch.device):
        if device.type != _TYPE:
            raise ValueError(errors.wrong_device_type(device))
        return device.index
    raise ValueError(errors.wrong_device_type(device))


def resolve(device: DeviceLike = None) -> int:
    """A valid flagos device index: None/"flagos" is the current device.

    Initialises the device module (so queued seeds apply) and raises RuntimeError naming the vendor
    when the index is out of range or there is no device at all.
    """
    from torch_fl.device import lazy

    index = explicit_index(device)
    lazy._lazy_init()
    if index is None:
        return _C.current_device()
    count = _C.device_count()
    if not 0 <= index < count:
        raise RuntimeError(errors.invalid_ordinal(index, count))
    return index
