"""The built-in ``sim`` vendor: virtual devices in host memory, always present."""

from __future__ import annotations

from torch_fl.vendors import Vendor

__all__ = ["SimVendor", "vendor"]


class SimVendor(Vendor):
    name = "sim"
    description = "simulated devices in host memory, built into torch-fl-core"

    def is_present(self) -> bool:
        return True

    def runtime_library(self) -> str:
        from torch_fl.runtimes import sim

        return sim.library_path()


vendor = SimVendor()
