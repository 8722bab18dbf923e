"""Devices of ``flagos``: how many, which is current, their names and properties."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from torch_fl import _C
from torch_fl.device import lazy
from torch_fl.device.index import DeviceLike, explicit_index, resolve

__all__ = [
    "DeviceProperties",
    "current_device",
    "device",
    "device_count",
    "device_of",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "is_available",
    "set_device",
    "synchronize",
]


def device_count() -> int:
    """Number of ``flagos`` devices; 0 when the chosen vendor has none. Never raises."""
    try:
        return int(_C.device_count())
    except Exception:
        return 0


def is_available() -> bool:
    """Whether ``flagos`` has at least one device. Never raises and never initialises."""
    return device_count() > 0


def current_device() -> int:
    """Index of the calling thread's current ``flagos`` device."""
    lazy._lazy_init()
    return int(_C.current_device())


def set_device(device: DeviceLike) -> None:
    """Make ``device`` the calling thread's current ``flagos`` device (a negative index: no-op)."""
    index = explicit_index(device)
    if index is not None and index < 0:
        return
    _C.set_device(resolve(device))


class device:
    """Context manager making a ``flagos`` device current, restoring the previous one on exit.

    ``None`` or a negative index leaves the current device unchanged.
    """

    def __init__(self, device: Any) -> None:
        index = explicit_index(device)
        no_change = device is None or (index is not None and index < 0)
        self.idx = -1 if no_change else resolve(device)
        self.prev_idx = -1

    def __enter__(self) -> device:
        if self.idx >= 0:
            self.prev_idx = int(_C.exchange_device(self.idx))
        return self

    def __exit__(self, *exc: object) -> bool:
        if self.idx >= 0 and self.prev_idx != self.idx:
            _C.exchange_device(self.prev_idx)
        return False


class _DeviceGuard:
    """``device`` for an index already known to be valid (compiled code's device guard).

    Why: Inductor's wrapper enters it once per graph call; ``device`` resolves and validates
    an arbitrary device-like first (about 1 us of Python). ``exchange_device`` still rejects
    an index out of range.
    """

    __slots__ = ("idx", "prev_idx")

    def __init__(self, index: int) -> None:
        self.idx = index
        self.prev_idx = -1

    def __enter__(self) -> None:
        self.prev_idx = _C.exchange_device(self.idx)

    def __exit__(self, *exc: object) -> bool:
        if self.prev_idx != self.idx:
            _C.exchange_device(self.prev_idx)
        return False


#: ``set_device`` for a valid index, without resolving a device-like (compiled code's call).
_set_device_index = _C.set_device


class device_of(device):
    """Context manager making the device of ``obj`` (a tensor or storage) current.

    Objects not on ``flagos`` leave the current device unchanged.
    """

    def __init__(self, obj: Any) -> None:
        on_flagos = getattr(obj, "device", torch.device("cpu")).type == "flagos"
        super().__init__(obj.get_device() if on_flagos else -1)


def synchronize(device: DeviceLike = None) -> None:
    """Wait for all work on every stream of ``device`` (default: the current device)."""
    _C.synchronize(resolve(device))


def get_device_name(device: DeviceLike = None) -> str:
    """The runtime's name of ``device``, e.g. ``"sim:0"``."""
    return str(_C.device_name(resolve(device)))


def get_device_capability(device: DeviceLike = None) -> tuple[int, int]:
    """``(0, 0)``: flagos devices have no CUDA-style compute capability.

    Code that gates features on ``>= (8, 0)`` should ask about the feature instead.
    """
    resolve(device)
    return (0, 0)


@dataclasses.dataclass(frozen=True)
class DeviceProperties:
    """What ``get_device_properties`` tells about a ``flagos`` device."""

    name: str
    total_memory: int
    index: int
    vendor: str
    runtime: str
    major: int = 0
    minor: int = 0

    def __repr__(self) -> str:
        mib = self.total_memory // (1 << 20)
        return (
            f"_FlagosDeviceProperties(name={self.name!r}, total_memory={mib}MB, "
            f"index={self.index}, vendor={self.vendor!r}, runtime={self.runtime!r})"
        )


def get_device_properties(device: DeviceLike = None) -> DeviceProperties:
    """Name and total memory of ``device`` (default: the current device)."""
    from torch_fl import vendors

    index = resolve(device)
    _free, total = _C.mem_get_info(index)
    return DeviceProperties(
        name=str(_C.device_name(index)),
        total_memory=int(total),
        index=index,
        vendor=vendors.active_vendor().name,
        runtime=str(_C.runtime_name()),
    )
