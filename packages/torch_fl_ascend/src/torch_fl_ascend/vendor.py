"""The ``ascend`` vendor object core finds through the ``torch_fl.vendors`` entry point."""

from __future__ import annotations

from pathlib import Path

from torch_fl.vendors.native import NativeVendor

__all__ = ["AscendVendor", "vendor"]


#: The collective table over HCCL (csrc/collective/hccl_collective.cpp), in the package's lib/.
COLLECTIVE_LIBRARY = Path(__file__).resolve().parent / "lib" / "libtorch_fl_ascend_collective.so"


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

    def collective_library(self) -> tuple[str, str | None]:
        """HCCL, through core's collective seat (the ``vendor`` tier of torch.distributed): the
        package's libtorch_fl_ascend_collective.so over the toolkit's libhccl.so."""
        found = self.sdk.loaded()
        homes = [Path(found.lib_dir)] if found else list(self.sdk.search_dirs())
        if not any((d / "libhccl.so").is_file() for d in homes):
            where = ", ".join(str(d) for d in homes)
            return "hccl", f"libhccl.so is not in the CANN toolkit ({where})"
        if not COLLECTIVE_LIBRARY.is_file():
            return "hccl", f"this torch-fl-ascend has no {COLLECTIVE_LIBRARY.name}"
        return "hccl", None

    def collective_library_path(self) -> str | None:
        name, unavailable = self.collective_library()
        return None if unavailable else str(COLLECTIVE_LIBRARY)


vendor = AscendVendor()
