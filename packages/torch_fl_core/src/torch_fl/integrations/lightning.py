"""Lightning: a ``flagos`` accelerator, chosen by ``accelerator="auto"`` when flagos is the
accelerator, with single-device, DDP and mixed-precision training as on CUDA.

Lightning knows a fixed set of accelerators and treats any other device as the CPU in three
places; the adapter registers :class:`FlagosAccelerator` as ``"flagos"`` and answers those three
for it (each only for the flagos accelerator):

- ``accelerator="auto"`` picks ``"cpu"`` where it finds no CUDA/MPS/XLA: it picks ``"flagos"``
  while flagos is the process's accelerator;
- one device gets ``SingleDeviceStrategy("cpu")`` unless the accelerator is CUDA/MPS: it gets the
  flagos device;
- ``"16-mixed"``/``"bf16-mixed"`` autocast on ``cuda`` unless the accelerator is CPU/MPS (so a
  flagos model silently stayed fp32): they autocast on ``flagos``, with a flagos ``GradScaler``;
- DDP passes ``device_ids`` and enters ``torch.cuda.stream`` for any non-CPU device: for flagos
  devices DDP runs without ``device_ids`` (the module's device is the flagos device).

The process group backend Lightning asks torch for (``Backend.default_device_backend_map``) is
already torch-fl's ``flagos`` backend. Upstream, Lightning deriving these from
``torch.accelerator`` would make this unnecessary. Tested with lightning 2.6.6.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import torch

from torch_fl.integrations._support import flagos_is_the_accelerator, wrap_once

__all__ = ["TESTED", "install"]

TESTED = "2.6.6"
NAME = "flagos"


def _version() -> str:
    return str(getattr(sys.modules.get("lightning"), "__version__", "?"))


def _accelerator_class(base: type) -> type:
    class FlagosAccelerator(base):  # type: ignore[misc, valid-type]
        """Lightning's accelerator for torch-fl's ``flagos`` devices."""

        def setup_device(self, device: torch.device) -> None:
            if device.type != NAME:
                raise ValueError(f"Device should be flagos, got {device} instead")
            torch.flagos.set_device(device)

        def get_device_stats(self, device: Any) -> dict[str, Any]:
            return dict(torch.flagos.memory_stats(device))

        def teardown(self) -> None:
            torch.flagos.empty_cache()

        @staticmethod
        def parse_devices(devices: Any) -> list[int]:
            count = torch.flagos.device_count()
            if devices in ("auto", -1, "-1"):
                return list(range(count))
            if isinstance(devices, str):
                devices = (
                    [int(d) for d in devices.split(",") if d.strip()]
                    if "," in devices
                    else int(devices)
                )
            if isinstance(devices, int):
                if devices > count:
                    raise ValueError(f"asked for {devices} flagos devices; there are {count}")
                return list(range(devices))
            indices = [int(d) for d in devices]
            bad = [i for i in indices if not 0 <= i < count]
            if bad:
                raise ValueError(f"flagos devices {bad} do not exist (there are {count})")
            return indices

        @staticmethod
        def get_parallel_devices(devices: Any) -> list[torch.device]:
            return [torch.device(NAME, i) for i in devices]

        @staticmethod
        def auto_device_count() -> int:
            return torch.flagos.device_count()

        @staticmethod
        def is_available() -> bool:
            return torch.flagos.is_available()

        @staticmethod
        def name() -> str:
            return NAME

        @classmethod
        def register_accelerators(cls, accelerator_registry: Any) -> None:
            accelerator_registry.register(NAME, cls, description=cls.__name__)

    return FlagosAccelerator


def _is_flagos(flag: Any, cls: type) -> bool:
    return flag == NAME or isinstance(flag, cls)


def install(pytorch: ModuleType) -> str | None:
    """Install once ``lightning.pytorch`` is imported (whole: its accelerator registry is filled
    by then); the reason when it cannot be."""
    try:
        from lightning.fabric.utilities import device_parser
        from lightning.pytorch import accelerators
        from lightning.pytorch.plugins.precision import MixedPrecision
        from lightning.pytorch.strategies import DDPStrategy, SingleDeviceStrategy
        from lightning.pytorch.trainer.connectors import accelerator_connector as connector
    except ImportError as exc:
        return f"lightning {_version()}: {exc} (tested with {TESTED})"
    base = getattr(accelerators, "Accelerator", None)
    registry = getattr(accelerators, "AcceleratorRegistry", None)
    conn = getattr(connector, "_AcceleratorConnector", None)
    needed = {
        "Accelerator": base,
        "AcceleratorRegistry": registry,
        "_AcceleratorConnector": conn,
        "_AcceleratorConnector._choose_strategy": getattr(conn, "_choose_strategy", None),
        "_AcceleratorConnector._check_and_init_precision": getattr(
            conn, "_check_and_init_precision", None
        ),
        "device_parser._select_auto_accelerator": getattr(
            device_parser, "_select_auto_accelerator", None
        ),
        "DDPStrategy.determine_ddp_device_ids": getattr(
            DDPStrategy, "determine_ddp_device_ids", None
        ),
    }
    missing = [name for name, obj in needed.items() if obj is None]
    if missing:
        return f"lightning {_version()} has no {', '.join(missing)} (tested with {TESTED})"

    accelerator_cls = _accelerator_class(base)
    if NAME not in registry:
        accelerator_cls.register_accelerators(registry)
    accelerators.FlagosAccelerator = accelerator_cls

    def auto(original):
        def _select_auto_accelerator() -> str:
            chosen = original()
            return NAME if chosen == "cpu" and flagos_is_the_accelerator() else chosen

        return _select_auto_accelerator

    original_auto = device_parser._select_auto_accelerator
    replacement = wrap_once(original_auto, auto)
    # Modules that imported it by name (the trainer's connector, the fabric CLI) hold the original.
    for name, module in list(sys.modules.items()):
        if (
            name.startswith("lightning")
            and getattr(module, "_select_auto_accelerator", None) is original_auto
        ):
            module._select_auto_accelerator = replacement

    def strategy(original):
        def _choose_strategy(self):
            if (
                _is_flagos(self._accelerator_flag, accelerator_cls)
                and self._num_nodes_flag <= 1
                and len(self._parallel_devices) == 1
            ):
                return SingleDeviceStrategy(device=self._parallel_devices[0])
            return original(self)

        return _choose_strategy

    conn._choose_strategy = wrap_once(conn._choose_strategy, strategy)

    def precision(original):
        def _check_and_init_precision(self):
            plugin = original(self)
            if isinstance(plugin, MixedPrecision) and _is_flagos(
                self._accelerator_flag, accelerator_cls
            ):
                return MixedPrecision(self._precision_flag, NAME)
            return plugin

        return _check_and_init_precision

    conn._check_and_init_precision = wrap_once(conn._check_and_init_precision, precision)

    def device_ids(original):
        def determine_ddp_device_ids(self):
            if self.root_device.type == NAME:
                return None  # no torch.cuda.stream; DDP takes the module's (flagos) device
            return original(self)

        return determine_ddp_device_ids

    DDPStrategy.determine_ddp_device_ids = wrap_once(
        DDPStrategy.determine_ddp_device_ids, device_ids
    )
    return None
