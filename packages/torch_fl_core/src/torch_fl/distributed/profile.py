"""Collective profiles: how torch.distributed can reach a vendor's ``flagos`` memory.

Each vendor declares one on its :class:`~torch_fl.vendors.Vendor` (``collective_profile()``);
core never guesses it from the vendor's name. The profile decides which tiers
(:mod:`torch_fl.distributed.tiers`) are candidates:

- ``cuda-abi``: flagos memory *is* CUDA memory (the delegate runtime mirrors CUDA; cuda, dcu).
  Collectives run in ProcessGroupNCCL (RCCL on DTK) on zero-copy CUDA alias views.
- ``host-memory``: flagos memory is host memory (sim). gloo runs on zero-copy CPU alias views.
- ``host-staged``: anything else, until the vendor's own collective library is wired: gloo on
  pinned host copies (copy in, collective, copy back).
"""

from __future__ import annotations

__all__ = ["CUDA_ABI", "HOST_MEMORY", "HOST_STAGED", "PROFILES", "vendor_profile"]

CUDA_ABI = "cuda-abi"
HOST_MEMORY = "host-memory"
HOST_STAGED = "host-staged"
PROFILES = (CUDA_ABI, HOST_MEMORY, HOST_STAGED)


def vendor_profile() -> tuple[str, str]:
    """(vendor name, its declared profile); raises naming the vendor for an unknown profile."""
    import torch_fl

    vendor = torch_fl.vendor()
    declare = getattr(vendor, "collective_profile", None)
    profile = declare() if callable(declare) else HOST_STAGED
    if profile not in PROFILES:
        raise ValueError(
            f"torch_fl.distributed: vendor {vendor.name!r} declares collective profile "
            f"{profile!r}; known profiles: {', '.join(PROFILES)}"
        )
    return str(vendor.name), str(profile)
