"""torch-fl's NVIDIA vendor (``FLAGOS_VENDOR=cuda``).

``flagos:i`` is ``cuda:i``: the delegate runtime of torch-fl-core mirrors torch's own CUDA backend, so
flagos memory comes from torch's CUDA caching allocator, the flagos current stream is the CUDA current
stream and the flagos default generator is CUDA's. Operators are routed by ``routes/cuda.conf`` to
``box:cuda`` (torch's CUDA kernels on alias views) or, where the survey measured it correct and not
slower, to ``flaggems`` (FlagGems Triton kernels). See README.md.
"""

from __future__ import annotations

# torch_fl first: it discovers vendors through the entry point torch_fl_cuda.vendor:vendor, and
# that module must be importable completely while this package is still initialising.
import torch_fl  # noqa: F401

from torch_fl_cuda.vendor import CudaVendor, vendor

__all__ = ["CudaVendor", "vendor"]
