"""The ``gcu`` vendor object core finds through the ``torch_fl.vendors`` entry point."""

from __future__ import annotations

from torch_fl.vendors.native import NativeVendor

__all__ = ["GcuVendor", "vendor"]


class GcuVendor(NativeVendor):
    name = "gcu"
    description = "Enflame GCU (topsrt runtime, generated topsaten kernels)"
    package = "torch_fl_gcu"
    device_noun = "GCU device"
    no_device_detail = "topsGetDeviceCount reported 0 GCU devices"
    no_device_hint = "driver loaded? /dev/gcu* present?"
    emulator_name = "TopsRider emulator"
    emulated_devices = "GCU cards"
    hardware_sdk = "an SDK for Enflame hardware"
    kernel_names = ("topsaten", "topsaten")
    #: flagtree ``0.6.1+enflame3.6`` or Enflame's ``triton_gcu``; core's producer barrier orders
    #: the topsaten kernels behind FlagGems' (docs/gcu.md, "Two producers on one stream").
    gems_vendor = "enflame"
    triton_backends = ("enflame",)
    triton_label = "'enflame'"
    #: ECCL, through core's collective seat (lib/libtorch_fl_gcu_collective.so).
    collective_sdk = ("eccl", "libeccl.so")


vendor = GcuVendor()
