"""The ``ascend`` vendor object core finds through the ``torch_fl.vendors`` entry point."""

from __future__ import annotations

from torch_fl.vendors.native import NativeVendor

__all__ = ["AscendVendor", "vendor"]


class AscendVendor(NativeVendor):
    name = "ascend"
    description = "Huawei Ascend NPU (aclrt runtime, generated ACLNN kernels)"
    package = "torch_fl_ascend"
    device_noun = "Ascend NPU"
    no_device_detail = "aclrtGetDeviceCount reported 0 NPUs"
    no_device_hint = "driver installed? /dev/davinci* present?"
    emulator_name = "CANN emulator"
    emulated_devices = "Ascend NPUs"
    hardware_sdk = "a CANN toolkit for Ascend hardware"
    kernel_names = ("ACLNN", "aclnn")
    #: triton-ascend registers its backend as ``npu``, flagtree's Ascend build as ``ascend``.
    gems_vendor = "ascend"
    triton_backends = ("npu", "ascend")
    triton_label = "Ascend"
    #: mode="reduce-overhead" replays compiled (routed) graphs through CANN's stream capture.
    compile_graphs = True
    #: HCCL, through core's collective seat (lib/libtorch_fl_ascend_collective.so).
    collective_sdk = ("hccl", "libhccl.so")


vendor = AscendVendor()
