"""Dynamo's view of the ``flagos`` device (``torch._dynamo.device_interface``).

Dynamo and Inductor reach a device through this class: current device, streams and events (for
stream-aware graphs), synchronize, device properties (Inductor's heuristics) and whether Triton can
target it. Everything forwards to ``torch.flagos``; only the Triton questions depend on the vendor's
declared scheduling (:func:`torch_fl.compile.scheduling`).
"""

from __future__ import annotations

import os
import types
from typing import Any

import torch
from torch._dynamo.device_interface import DeviceInterface, caching_worker_current_devices

__all__ = ["FlagosInterface"]


def _flagos() -> Any:
    return torch.flagos  # type: ignore[attr-defined]


class FlagosInterface(DeviceInterface):
    """``DeviceInterface`` for ``flagos``: the device module ``torch.flagos`` plus compile facts."""

    class device:  # noqa: N801 - the name DeviceInterface uses
        def __new__(cls, device: torch.types.Device) -> Any:
            return _flagos().device(device)

    # torch.Event / torch.Stream dispatch on the device type, so flagos uses them directly.
    Event = torch.Event
    Stream = torch.Stream

    class Worker:
        """Answers for Inductor's compile workers, which must not initialise the device."""

        @staticmethod
        def set_device(device: int) -> None:
            caching_worker_current_devices["flagos"] = device

        @staticmethod
        def current_device() -> int:
            if "flagos" in caching_worker_current_devices:
                return caching_worker_current_devices["flagos"]
            return _flagos().current_device()

        @staticmethod
        def get_device_properties(device: torch.types.Device = None) -> Any:
            return FlagosInterface.get_device_properties(device)

    @staticmethod
    def current_device() -> int:
        return _flagos().current_device()

    @staticmethod
    def set_device(device: torch.types.Device) -> None:
        _flagos().set_device(device)

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        from torch_fl import _C

        return int(_C.exchange_device(device))

    @staticmethod
    def exchange_device(device: int) -> int:
        from torch_fl import _C

        return int(_C.exchange_device(device))

    @staticmethod
    def device_count() -> int:
        return _flagos().device_count()

    @staticmethod
    def is_available() -> bool:
        return _flagos().is_available()

    @staticmethod
    def stream(stream: torch.Stream) -> Any:
        return _flagos().stream(stream)

    @staticmethod
    def current_stream() -> torch.Stream:
        return _flagos().current_stream()

    @staticmethod
    def set_stream(stream: torch.Stream) -> None:
        _flagos().set_stream(stream)

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        _flagos().set_stream(
            torch.Stream(stream_id=stream_id, device_index=device_index, device_type=device_type)
        )

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        from torch_fl.compile import runtime

        return runtime.get_raw_stream(device_idx)

    @staticmethod
    def synchronize(device: torch.types.Device = None) -> None:
        _flagos().synchronize(device)

    @classmethod
    def get_device_properties(cls, device: torch.types.Device = None) -> Any:
        from torch_fl.compile import choice as scheduling

        target = scheduling.triton_target()
        if target is not None:
            # Triton compiles for the vendor's real target: its properties (SM count, warp size,
            # compute capability) are that device's, at the same ordinal.
            return scheduling.triton_device_module().get_device_properties(
                _index(device, cls.current_device())
            )
        # C++ scheduling: the kernels run on the host's cores, which is what Inductor sizes its
        # reductions and parallel loops by (multi_processor_count, as CPU reports it).
        props = _flagos().get_device_properties(device)
        fields = {f: getattr(props, f) for f in ("name", "total_memory", "index", "major", "minor")}
        return types.SimpleNamespace(**fields, multi_processor_count=os.cpu_count() or 1)

    @staticmethod
    def get_compute_capability(device: torch.types.Device = None) -> Any:
        from torch_fl.compile import choice as scheduling

        target = scheduling.triton_target()
        if target is None:
            return ""
        from torch._dynamo.device_interface import get_interface_for_device

        return get_interface_for_device(target).get_compute_capability(
            _index(device, FlagosInterface.current_device())
        )

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return _flagos().is_bf16_supported()

    @staticmethod
    def memory_allocated(device: torch.types.Device = None) -> int:
        return _flagos().memory_allocated(device)

    @staticmethod
    def is_triton_capable(device: torch.types.Device = None) -> bool:
        from torch_fl.compile import choice as scheduling

        return scheduling.triton_target() is not None

    @classmethod
    def raise_if_triton_unavailable(cls, device: torch.types.Device = None) -> None:
        from torch_fl.compile import choice as scheduling

        if scheduling.triton_target() is None:
            raise RuntimeError(
                f"flagos: vendor {scheduling.vendor_name()!r} compiles with Inductor's "
                f"{scheduling.scheduling()!r} scheduling, not Triton"
            )
        import triton  # noqa: F401 - raises a clear ImportError when Triton is missing


def _index(device: torch.types.Device, default: int) -> int:
    if device is None:
        return default
    if isinstance(device, int):
        return device
    d = torch.device(device)
    return default if d.index is None else d.index
