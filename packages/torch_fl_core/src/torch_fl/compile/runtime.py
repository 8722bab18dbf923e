"""Functions the code Inductor generates for ``flagos`` calls at run time.

Kept tiny and import-light: every compiled graph imports this module.
"""

from __future__ import annotations

from torch_fl import _C

__all__ = ["get_raw_stream", "wait_stream"]


def wait_stream(device: int) -> None:
    """Block until the current stream of ``device`` has finished its queued work.

    Why: a C++ kernel compiled by Inductor runs on the calling thread and reads ``flagos`` memory
    directly (host-addressable devices only). It cannot be enqueued on the stream, so, like a
    boxed host kernel (which synchronizes the stream before it runs), it first waits for the
    stream's earlier work: an asynchronous copy or memset still writing one of its inputs.
    Emitted before every C++ kernel call, since extern kernels inside the same graph may enqueue
    such work.
    """
    _wait(device)


def get_raw_stream(device: int) -> int:
    """The native handle of the current stream Triton kernels launch on (Triton vendors only)."""
    from torch_fl.compile import choice as scheduling

    module = scheduling.triton_device_module()
    # A Triton vendor's flagos current stream *is* the target's current stream (declared by
    # compile_scheduling="triton"), so the target's handle is the flagos stream's handle.
    stream = module.current_stream(device)
    handle = getattr(stream, "cuda_stream", None)
    if handle is None:
        handle = stream.native_handle
    return int(handle)


def _wait_python(device: int) -> None:
    import torch

    torch.flagos.current_stream(None if device < 0 else device).synchronize()


# The C++ entry point (no Python stream objects, GIL released only when there is work to wait for).
_wait = getattr(_C, "wait_current_stream", _wait_python)
