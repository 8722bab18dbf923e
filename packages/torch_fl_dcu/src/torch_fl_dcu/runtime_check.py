"""The post-import check of a loaded DTK bundle: DTK's kernels really are under the CUDA key.

If ``libtorch_hip.so`` did not load, or loaded RTLD_LOCAL, or a torch of another build was
imported, the operators below have no CUDA kernel and every ``box:cuda`` route would fail at its
first call with "Could not run 'aten::mm' with arguments from the 'CUDA' backend". Checked once,
right after ``import torch``; ``FLAGOS_DCU_SKIP_RUNTIME_CHECK=1`` bypasses it (for deliberately
testing a non-matching pair).
"""

from __future__ import annotations

import os

import torch

from torch_fl_dcu._preload import DcuBundleError

__all__ = ["ENV_SKIP", "REQUIRED_CUDA_KERNELS", "missing_cuda_kernels", "verify"]

ENV_SKIP = "FLAGOS_DCU_SKIP_RUNTIME_CHECK"
REQUIRED_CUDA_KERNELS = ("aten::mm", "aten::add.Tensor", "aten::_softmax", "aten::bmm")


def missing_cuda_kernels() -> list[str]:
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    return [op for op in REQUIRED_CUDA_KERNELS if not has(op, "CUDA")]


def verify(where: str = "the DTK bundle") -> None:
    """Raise :class:`DcuBundleError` if a required CUDA-key kernel is missing."""
    if os.environ.get(ENV_SKIP) == "1":
        return
    missing = missing_cuda_kernels()
    if missing:
        raise DcuBundleError(
            f"torch-fl-dcu: after loading {where}, torch {torch.__version__} has no CUDA-key "
            f"kernel for {', '.join(missing)}: DTK's libtorch_hip.so did not register its "
            f"kernels in this process (not loaded, loaded RTLD_LOCAL, or loaded after torch). "
            f"Import torch_fl_dcu before torch in a fresh process and check the bundle "
            f"(python -m torch_fl_dcu.tools.stage --verify); {ENV_SKIP}=1 skips this check."
        )
