"""The ``dcu`` vendor object core discovers through the ``torch_fl.vendors`` entry point.

Same machinery as the ``cuda`` vendor, unchanged: core's delegate runtime mirrors torch's CUDA
backend (on DCU that backend is DTK's HIP build registered as CUDA: flagos memory is its caching
allocator, the flagos stream its current stream) and ``box:cuda`` re-dispatches into its kernels.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

from torch.autograd import ProfilerActivity
from torch_fl.vendors import Vendor

# The package first: it loads the DTK bundle (or raises the reason it cannot). When torch imports
# this module through torch_fl's vendor discovery, the start-up hook has normally done it already.
import torch_fl_dcu

__all__ = ["ROUTE_TABLE", "FLAGGEMS_ROUTE_TABLE", "ENV_TEST_ON_CUDA", "DcuVendor", "vendor"]

ROUTE_TABLE = Path(__file__).resolve().parent / "routes" / "dcu.conf"
FLAGGEMS_ROUTE_TABLE = ROUTE_TABLE.with_name("dcu-flaggems.conf")
#: TEST ONLY: treat a CUDA build of torch as DTK's hipified torch, so this package's activation
#: path can run the contract suites on an NVIDIA GPU. It proves the dcu vendor's wiring (delegate
#: runtime, box:cuda, routes, FlagGems registration) over a CUDA-key backend; it proves nothing
#: about DTK, HIP or the bundle preload.
ENV_TEST_ON_CUDA = "FLAGOS_DCU_TEST_ON_CUDA_TORCH"

_HIP_RUNTIMES = ("libgalaxyhip.so.5", "libamdhip64.so.6", "libamdhip64.so")


def _hip_device_count() -> tuple[int, str]:
    """Devices the HIP runtime sees, for the bundle mode where the official torch's Python
    ``torch.cuda`` was built without a device runtime and always answers 0."""
    count = ctypes.c_int(0)
    libs = [ctypes.CDLL(None)]  # the bundle loaded libtorch_hip RTLD_GLOBAL, and its HIP runtime
    for soname in _HIP_RUNTIMES:
        try:
            libs.append(ctypes.CDLL(soname))
        except OSError:
            continue
    for lib in libs:
        fn = getattr(lib, "hipGetDeviceCount", None)
        if fn is None:
            continue
        status = fn(ctypes.byref(count))
        if status != 0:
            return (
                0,
                f"hipGetDeviceCount returned error {status} (driver not loaded, or no /dev/kfd)",
            )
        return count.value, ""
    return 0, f"no HIP runtime ({', '.join(_HIP_RUNTIMES)}) is loaded or loadable"


class DcuVendor(Vendor):
    name = "dcu"
    description = (
        "Hygon DCUs through DTK's CUDA-key HIP backend (delegate runtime, box:cuda, FlagGems)"
    )
    #: torch.compile: Inductor's Triton scheduling (FlagTree's hcu backend declares device "cuda").
    compile_scheduling = "triton"
    triton_target = "cuda"
    #: torch.profiler: boxed ops launch HIP kernels, which DTK's torch traces with roctracer under
    #: the CUDA activity. The official CPU wheel of bundle mode has no such tracer (CUDA is not in
    #: its supported activities), so there core's runtime events stay in use (docs/profiler.md).
    profiler_activity = ProfilerActivity.CUDA
    environment = (
        "FLAGOS_DCU_PRELOAD",
        "FLAGOS_DCU_SKIP_RUNTIME_CHECK",
        "FLAGOS_DCU_BUNDLE",
        "FLAGOS_DCU_TORCH_LIB",
        "FLAGOS_DCU_TEST_ON_CUDA_TORCH",
    )

    def platform(self) -> str:
        """ "native" (DTK's hipified torch), "bundle" (official torch + DTK bundle), "cuda-test"
        (the test-only switch on a CUDA torch), or "none"."""
        import torch

        st = torch_fl_dcu.state()
        if st is not None and st.status == "loaded":
            return "bundle"
        if getattr(torch.version, "hip", None):
            return "native"
        if os.environ.get(ENV_TEST_ON_CUDA) == "1" and torch.version.cuda is not None:
            return "cuda-test"
        return "none"

    def _device_count(self) -> tuple[int, str]:
        import torch

        where = self.platform()
        if where == "bundle":
            return _hip_device_count()
        if where in ("native", "cuda-test"):
            try:
                n = torch.cuda.device_count()
            except Exception as exc:
                return 0, f"torch.cuda.device_count() failed: {exc}"
            return n, "" if n else f"torch {torch.__version__} sees no DCU"
        return 0, ""

    def is_present(self) -> bool:
        return self._device_count()[0] > 0

    def why_absent(self) -> str:
        import torch

        where = self.platform()
        if where == "none":
            st = torch_fl_dcu.state()
            detail = st.detail if st is not None else "the bundle preload did not run"
            return (
                f"torch {torch.__version__} is not DTK's hipified torch (torch.version.hip is None) "
                f"and no DTK bundle is loaded ({detail}). Install DTK's torch wheel, or a "
                f"torch-fl-dcu wheel with the bundle staged (python -m torch_fl_dcu.tools.stage)"
            )
        _n, why = self._device_count()
        visible = os.environ.get("HIP_VISIBLE_DEVICES")
        hint = f" (HIP_VISIBLE_DEVICES={visible!r})" if visible is not None else ""
        return f"{why or 'no DCU found'}{hint}"

    def runtime_library(self) -> str:
        # Not a shared library: core's delegate runtime mirroring torch's CUDA(-key) backend.
        return "delegate:cuda"

    _flaggems_on = False

    def activate(self) -> None:
        if self.platform() == "bundle":
            from torch_fl_dcu import runtime_check

            runtime_check.verify()
        from torch_fl_dcu import flaggems

        self._flaggems_on = flaggems.register_backend()

    def lazy_init(self) -> None:
        import torch

        # DTK's own torch: its Python torch.cuda must initialise now so its queued calls
        # (torch.manual_seed's device seeds) run before flagos draws numbers. The official CPU
        # wheel's torch.cuda was compiled without a device runtime and cannot (it raises "Torch
        # not compiled with CUDA enabled"); there the delegate runtime reaches the backend
        # through c10 only.
        if hasattr(torch._C, "_cuda_init"):
            torch.cuda._lazy_init()

    def collective_profile(self) -> str:
        # flagos memory is CUDA-key memory: ProcessGroupNCCL, which on DTK is RCCL.
        return "cuda-abi"

    def route_table(self) -> Path:
        if self._flaggems_on and FLAGGEMS_ROUTE_TABLE.exists():
            return FLAGGEMS_ROUTE_TABLE
        return ROUTE_TABLE


def _check_loaded_bundle() -> None:
    # The post-import check: this module is imported by torch_fl at the end of `import torch`,
    # the first moment the dispatcher can be asked whether DTK's kernels registered.
    st = torch_fl_dcu.state()
    if st is not None and st.status == "loaded":
        from torch_fl_dcu import runtime_check

        runtime_check.verify(f"the DTK bundle at {st.bundle.root if st.bundle else '?'}")


_check_loaded_bundle()

vendor = DcuVendor()
