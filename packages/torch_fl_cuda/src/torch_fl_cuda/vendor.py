"""The ``cuda`` vendor object core discovers through the ``torch_fl.vendors`` entry point."""

from __future__ import annotations

import os
from pathlib import Path

from torch.autograd import ProfilerActivity
from torch_fl.vendors import Vendor

__all__ = ["CudaVendor", "FLAGGEMS_ROUTE_TABLE", "ROUTE_TABLE", "vendor"]

#: The generated route tables (``python -m torch_fl_cuda.routing.generate``): box:cuda only, and the
#: one with the surveyed FlagGems routes that includes it.
ROUTE_TABLE = Path(__file__).resolve().parent / "routes" / "cuda.conf"
FLAGGEMS_ROUTE_TABLE = ROUTE_TABLE.with_name("cuda-flaggems.conf")
#: The collective library over NCCL's C API (csrc/nccl_collective.cpp), in the wheel's lib/.
NCCL_LIBRARY_NAME = "libtorch_fl_cuda_nccl.so"
NCCL_LIBRARY: Path | None = Path(__file__).resolve().parent / "lib" / NCCL_LIBRARY_NAME


class CudaVendor(Vendor):
    name = "cuda"
    description = "NVIDIA GPUs through torch's CUDA backend (delegate runtime, box:cuda, FlagGems)"
    #: torch.compile: Inductor's Triton scheduling, launched on the flagos (= CUDA) stream.
    compile_scheduling = "triton"
    #: Triton compiles for the CUDA target of the same index (flagos:i is cuda:i).
    triton_target = "cuda"
    #: mode="reduce-overhead" and torch.flagos.graph: flagos work is CUDA work on CUDA streams, so
    #: it is captured as CUDA graphs (docs/compile.md).
    compile_graphs = True
    #: torch.profiler: boxed ops launch CUDA kernels, which CUPTI traces (docs/profiler.md).
    profiler_activity = ProfilerActivity.CUDA
    #: torch.multiprocessing: flagos memory is CUDA memory, so flagos tensors travel by CUDA IPC.
    shares_memory_between_processes = True

    def _torch_cuda(self):
        import torch

        return torch

    def is_present(self) -> bool:
        torch = self._torch_cuda()
        # DTK's hipified torch also answers torch.cuda: that is the dcu vendor's platform.
        if torch.version.cuda is None or getattr(torch.version, "hip", None):
            return False
        try:
            return torch.cuda.device_count() > 0
        except Exception:
            return False

    def why_absent(self) -> str:
        torch = self._torch_cuda()
        if getattr(torch.version, "hip", None):
            return (
                f"this torch is a ROCm/DTK build (torch.version.hip={torch.version.hip}); "
                "install torch-fl-dcu for Hygon DCUs"
            )
        if torch.version.cuda is None:
            return (
                f"the installed torch {torch.__version__} is a CPU-only build; the cuda vendor needs "
                "a CUDA build of torch (pip install torch --index-url "
                "https://download.pytorch.org/whl/cu130)"
            )
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        hint = f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""
        return f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device{hint}"

    def runtime_library(self) -> str:
        # Not a shared library: core's delegate runtime mirroring torch's CUDA backend.
        return "delegate:cuda"

    _flaggems_on = False

    def activate(self) -> None:
        from torch_fl_cuda import flaggems

        self._flaggems_on = flaggems.register_backend()

    def collective_profile(self) -> str:
        # torch.distributed reaches flagos memory as CUDA tensors over it: NCCL.
        return "cuda-abi"

    def collective_library(self) -> tuple[str, str | None]:
        import torch
        import torch.distributed as dist

        if NCCL_LIBRARY is None or not NCCL_LIBRARY.is_file():
            return ("nccl", f"this torch-fl-cuda has no {NCCL_LIBRARY_NAME} (a build without it)")
        if not dist.is_available() or not dist.is_nccl_available():
            return ("nccl", f"torch {torch.__version__} is built without NCCL")
        return ("nccl", None)

    def collective_library_path(self) -> str | None:
        # NCCL through core's collective seat: the vendor tier, after the nccl tier
        # (ProcessGroupNCCL on CUDA alias views); FLAGOS_DIST_TIER=vendor chooses it.
        return str(NCCL_LIBRARY) if NCCL_LIBRARY is not None and NCCL_LIBRARY.is_file() else None

    def lazy_init(self) -> None:
        # flagos:i is cuda:i: torch.cuda must be initialised from Python too, so the calls it
        # queued before (torch.manual_seed's CUDA seeds) run now, not after flagos drew numbers.
        import torch

        torch.cuda._lazy_init()

    def route_table(self) -> Path:
        # FlagGems routes only when the backend they name exists in this process.
        if self._flaggems_on and FLAGGEMS_ROUTE_TABLE.exists():
            return FLAGGEMS_ROUTE_TABLE
        return ROUTE_TABLE


vendor = CudaVendor()
