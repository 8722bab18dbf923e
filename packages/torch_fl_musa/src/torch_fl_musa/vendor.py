"""The ``musa`` vendor object core finds through the ``torch_fl.vendors`` entry point."""

from __future__ import annotations

from torch_fl.vendors.native import NativeVendor

__all__ = ["MusaVendor", "vendor"]


class MusaVendor(NativeVendor):
    name = "musa"
    description = "Moore Threads MUSA GPU (MUSA runtime, generated muDNN kernels)"
    package = "torch_fl_musa"
    device_noun = "MUSA GPU"
    no_device_detail = "musaGetDeviceCount reported 0 MUSA GPUs"
    no_device_hint = "driver loaded? /dev/mtgpu* present?"
    emulator_name = "MUSA emulator"
    emulated_devices = "MUSA GPUs"
    hardware_sdk = "a MUSA SDK for Moore Threads hardware"
    kernel_names = ("muDNN", "muDNN operator")
    #: FlagGems' vendor name for Moore Threads and the backend name its Triton registers.
    gems_vendor = "mthreads"
    triton_backends = ("musa", "mthreads")
    triton_label = "'mthreads'"
    #: mode="reduce-overhead" replays compiled (routed) graphs through MUSA's stream capture.
    compile_graphs = True
    #: MCCL, through core's collective seat (lib/libtorch_fl_musa_collective.so).
    collective_sdk = ("mccl", "libmccl.so")


vendor = MusaVendor()
