"""Sharing ``flagos`` tensors between processes (``torch.multiprocessing``).

torch.multiprocessing pickles tensors and storages for another process with reducers registered on
``multiprocessing.reduction.ForkingPickler`` (``torch/multiprocessing/reductions.py``): a CPU
storage moves to shared memory, a CUDA tensor travels as a CUDA IPC handle. Any other device takes
the CPU path and fails there, which on a ``Queue`` happens in its feeder thread: ``put()`` returns
and the data never arrives. :func:`install` (run by ``import torch_fl``) wraps torch's tensor and
storage reducers; tensors and storages not on ``flagos`` go to torch's reducers unchanged.

- Where the runtime exports device memory itself (its ``ipc_get_handle``/``ipc_open_handle``,
  runtime ABI v1.1; ``sim``: memfd-backed allocations), a flagos tensor travels as the runtime's
  handle of its storage (``torch.ops.torch_fl.ipc_export``) and the receiver maps the same memory
  (``torch.ops.torch_fl.ipc_open``) and rebuilds the tensor over it, shape, strides, offset,
  dtype, ``requires_grad`` and class included. Exporting gives the storage an allocation of its
  own first (as ``share_memory_()`` does for CPU storages), so the receiver's mapping outlives the
  sender's tensor and never shows another tensor's bytes. As with CUDA's IPC, the sender keeps
  each sent storage until its receiver has opened it (``q.put(x * 2)`` drops the only reference
  right after the queue's feeder thread pickles it): every send carries the path of a one-byte
  flag file (in ``/dev/shm``) that the receiver sets once it has mapped the memory; the sender lets go of opened ones
  at its next send or at :func:`ipc_collect` (``torch.flagos.ipc_collect()``, as
  ``torch.cuda.ipc_collect()``). A receiver that opens the handle after the sender exited (or
  after the sender collected it once it was opened) gets an error saying so. A tensor sent back
  to its sender arrives over the sender's own memory.
- Where the vendor declares :attr:`~torch_fl.vendors.Vendor.shares_memory_between_processes` and
  the runtime mirrors CUDA (``delegate:cuda``: flagos memory is CUDA caching-allocator memory), a
  flagos tensor travels as its CUDA alias (``torch.ops.torch_fl.alias_as``) through torch's own
  CUDA IPC reduction and the receiver adopts it onto the same flagos device
  (``torch.ops.torch_fl.adopt``), with its shape, strides, storage offset, dtype, ``requires_grad``
  and class (``Parameter``): the memory is shared, as with CUDA tensors. A flagos storage travels
  as a byte tensor over it.
- Elsewhere (a runtime without IPC) the memory is private to the process: pickling a flagos tensor or storage for another
  process raises :class:`SharingError`, naming the device, the runtime and the way out
  (``.cpu()``). ``multiprocessing.queues.Queue.put`` (and ``JoinableQueue.put``), which only
  buffers the object for the feeder thread, first checks it (:func:`check_shareable`), so
  ``put()`` itself raises. ``SimpleQueue``, ``Pipe`` connections and ``Process`` arguments pickle
  in the caller and raise there.

Plain ``pickle`` and ``torch.save`` do not use these reducers and are unchanged.
"""

from __future__ import annotations

import atexit
import contextlib
import copyreg
import functools
import itertools
import os
import pickle
import sys
import tempfile
import threading
from collections.abc import Callable
from typing import Any

import torch

from torch_fl import _C

__all__ = [
    "SharingError",
    "can_share",
    "check_shareable",
    "install",
    "ipc_collect",
    "mechanism",
]

_BACKEND = "flagos"
# Set on every wrapper this module installs: the function it wraps (re-imports unwrap first).
_ORIGINAL = "__torch_fl_original__"
# The torch device types whose memory torch's own reducers share between processes.
_IPC_TYPES = ("cuda",)


class SharingError(RuntimeError):
    """A flagos tensor or storage cannot be sent to another process on this runtime."""


# How flagos tensors travel: the mirrored device type whose IPC carries them ("cuda"), _RUNTIME
# (the runtime's own IPC handles), or None where they cannot travel; decided once the vendor is
# active (the vendor is fixed for the life of a process).
_RUNTIME = "runtime"
_UNDECIDED = object()
_sharing: Any = _UNDECIDED


def _decide() -> Any:
    from torch_fl import vendors

    selection = vendors.active()
    if selection is None:
        return _UNDECIDED
    if not selection.present:
        return None
    if _C.runtime_shares_memory():
        return _RUNTIME
    if not getattr(selection.vendor, "shares_memory_between_processes", False):
        return None
    runtime = str(_C.runtime_name())
    mirrored = runtime.split(":", 1)[1] if runtime.startswith("delegate:") else None
    return mirrored if mirrored in _IPC_TYPES else None


def _sharing_type() -> str | None:
    global _sharing
    if _sharing is _UNDECIDED:
        decided = _decide()
        if decided is _UNDECIDED:
            return None
        _sharing = decided
    return _sharing


def can_share() -> bool:
    """Whether flagos tensors sent to another process share their memory with it here."""
    return _sharing_type() is not None


def mechanism() -> str | None:
    """How flagos tensors reach another process here: ``"runtime"`` (the runtime's own IPC
    handles), the mirrored device type whose IPC carries them (``"cuda"``), or None (they
    cannot)."""
    return _sharing_type()


def _why_private() -> str:
    from torch_fl import vendors

    selection = vendors.active()
    if selection is not None and getattr(
        selection.vendor, "shares_memory_between_processes", False
    ):
        return (
            f"vendor {selection.name!r} declares shares_memory_between_processes, but the runtime "
            f"mirrors none of {', '.join(_IPC_TYPES)}, whose IPC would carry it"
        )
    minor = _abi_minor_of_table()
    if minor < 1:
        return (
            f"its memory is private to the process: its table is runtime ABI v1.{minor}, "
            f"without ipc_get_handle/ipc_open_handle (v1.1)"
        )
    return (
        "its memory is private to the process: the runtime does not implement "
        "ipc_get_handle/ipc_open_handle (runtime ABI v1.1)"
    )


def _abi_minor_of_table() -> int:
    """The newest v1.x whose functions the active runtime's table covers."""
    size = _C.runtime_struct_size()
    minor = 0
    for _name, field_minor, offset, field_size, _present in _C.runtime_fields():
        if offset + field_size <= size:
            minor = max(minor, field_minor)
    return minor


def _error(obj: Any, what: str, way_out: str) -> SharingError:
    return SharingError(
        f"{obj.device} {what} cannot be shared between processes on runtime "
        f"{str(_C.runtime_name())!r} ({_why_private()}); send {way_out} instead"
    )


def _tensor_error(tensor: torch.Tensor) -> SharingError:
    return _error(tensor, "tensors", "t.cpu() (or t.cpu().share_memory_())")


def _storage_error(storage: Any) -> SharingError:
    return _error(storage, "storages", "storage.cpu() (or a CPU tensor)")


# ---------------------------------------------------------------------------------------------
# reducers
# ---------------------------------------------------------------------------------------------

# torch's tensor reducer (torch.multiprocessing.reductions.reduce_tensor), set by install().
_torch_reduce_tensor: Callable[[torch.Tensor], Any] | None = None


def _reduce_flagos_tensor(tensor: torch.Tensor, torch_reduce: Callable[[torch.Tensor], Any]):
    mirrored = _sharing_type()
    if mirrored is None:
        raise _tensor_error(tensor)
    if tensor.layout != torch.strided or tensor.is_nested:
        # torch reduces the parts (indices, values) as tensors and their storages: each flagos
        # storage reaches the storage reducer below.
        return torch_reduce(tensor)
    if tensor.requires_grad and not tensor.is_leaf:
        return torch_reduce(tensor)  # torch's "Cowardly refusing to serialize non-leaf tensor"
    torch.utils.hooks.warn_if_has_hooks(tensor)
    if mirrored == _RUNTIME:
        return _reduce_runtime_tensor(tensor)
    with torch.no_grad():
        alias = torch.ops.torch_fl.alias_as(tensor.detach(), mirrored)
    rebuild, args = torch_reduce(alias)
    flags = (tensor.requires_grad, tensor.is_conj(), tensor.is_neg())
    return (_rebuild_tensor, (rebuild, args, type(tensor), tensor.device.index, *flags))


def _rebuild_tensor(rebuild, args, cls, index, requires_grad, conj, neg):
    """The receiver's side: torch rebuilds the mirrored tensor (``cuda:i``), flagos adopts it onto
    ``flagos:i`` (zero-copy: the same memory)."""
    alias = rebuild(*args)
    t = torch.ops.torch_fl.adopt(alias, torch.device(_BACKEND, index))
    return _finish(t, cls, requires_grad, conj, neg)


def _finish(t: torch.Tensor, cls, requires_grad: bool, conj: bool, neg: bool) -> torch.Tensor:
    """The received tensor's math bits, class and ``requires_grad``, as the sender's."""
    if conj and not t.is_conj():
        t = t.conj()
    if neg and not t.is_neg():
        t = torch._neg_view(t)
    if cls is torch.nn.Parameter:
        # Integer tensors must get requires_grad=False through the constructor (as torch does).
        return torch.nn.Parameter(t, requires_grad=requires_grad)
    if requires_grad:
        t.requires_grad_(True)
    return t


# Storages sent to another process, each with the path of a one-byte flag file its receiver
# writes once it has opened it: kept alive here until then. A file, not a shared CPU tensor: a
# payload may be unpickled more than once (a tensor sent back, a retry), and a shared tensor's
# descriptor can be received only once.
_sent: list[tuple[Any, str, int]] = []  # (storage, flag path, flag descriptor)
_sent_lock = threading.Lock()
_sent_count = itertools.count()
_FLAG_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


def _release(path: str, fd: int) -> None:
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(path)


def ipc_collect() -> int:
    """Let go of sent storages whose receivers have opened them; returns how many are still
    waiting for their receiver (``torch.flagos.ipc_collect()``, as ``torch.cuda.ipc_collect()``).
    """
    with _sent_lock:
        waiting = []
        for entry in _sent:
            _, path, fd = entry
            if os.pread(fd, 1, 0) == b"\x01":
                _release(path, fd)
            else:
                waiting.append(entry)
        _sent[:] = waiting
        return len(_sent)


def _forget_sent() -> None:
    with _sent_lock:
        for _, path, fd in _sent:
            _release(path, fd)
        _sent.clear()


_exit_hooked = False


def _hook_exit() -> None:
    """Flag files go at exit: atexit in a main process; multiprocessing's children leave through
    os._exit after their finalizers, so a finalizer there."""
    global _exit_hooked
    if _exit_hooked:
        return
    _exit_hooked = True
    import multiprocessing.util

    atexit.register(_forget_sent)
    multiprocessing.util.Finalize(None, _forget_sent, exitpriority=0)


def _keep_until_opened(storage: Any) -> str:
    _hook_exit()
    ipc_collect()
    path = os.path.join(_FLAG_DIR, f"torch_fl_sent_{os.getpid()}_{next(_sent_count)}")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.pwrite(fd, b"\x00", 0)
    with _sent_lock:
        _sent.append((storage, path, fd))
    return path


def _mark_opened(path: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:  # the sender let go already (or exited)
        return
    try:
        os.pwrite(fd, b"\x01", 0)
    finally:
        os.close(fd)


def _export_storage(storage: Any) -> tuple[bytes, int, int, str]:
    """(handle, offset in its allocation, bytes, opened flag's path) of a flagos storage for
    another process; the storage is kept here until the flag says its receiver opened it."""
    with torch.no_grad():
        whole = torch.empty(0, dtype=torch.uint8, device=storage.device)
        whole.set_(storage, 0, (storage.nbytes(),), (1,))
        handle, offset = torch.ops.torch_fl.ipc_export(whole)
    opened = _keep_until_opened(whole.untyped_storage())
    return bytes(handle.tolist()), int(offset), int(storage.nbytes()), opened


def _open_storage(
    index: int, handle: bytes | None, offset: int, nbytes: int, opened: str | None
) -> Any:
    if handle is None:  # an empty storage has no memory to share
        return torch.UntypedStorage(0, device=torch.device(_BACKEND, index))
    try:
        raw = torch.ops.torch_fl.ipc_open(
            torch.tensor(list(handle), dtype=torch.uint8), offset, nbytes
        )
    finally:
        if opened is not None:
            _mark_opened(opened)  # mapped (or never will be): the sender may let go
    return raw.untyped_storage()


def _reduce_runtime_tensor(tensor: torch.Tensor):
    """A strided leaf tensor as the runtime's handle of its storage, plus its geometry."""
    storage = tensor.untyped_storage()
    shared = _export_storage(storage) if storage.nbytes() else (None, 0, 0, None)
    meta = (tensor.dtype, tuple(tensor.shape), tuple(tensor.stride()), tensor.storage_offset())
    flags = (tensor.requires_grad, tensor.is_conj(), tensor.is_neg())
    return (_rebuild_runtime_tensor, (tensor.device.index, *shared, meta, type(tensor), *flags))


def _rebuild_runtime_tensor(
    index, handle, offset, nbytes, opened, meta, cls, requires_grad, conj, neg
):
    """The receiver's side: the runtime maps the sender's allocation, the tensor is rebuilt over
    it."""
    dtype, shape, stride, storage_offset = meta
    storage = _open_storage(index, handle, offset, nbytes, opened)
    t = torch.empty(0, dtype=dtype, device=storage.device)
    with torch.no_grad():
        t.set_(storage, storage_offset, shape, stride)
    return _finish(t, cls, requires_grad, conj, neg)


def _rebuild_runtime_storage(index, handle, offset, nbytes, opened):
    return _open_storage(index, handle, offset, nbytes, opened)


def _rebuild_storage(rebuild, args):
    return rebuild(*args).untyped_storage()


def _wrap_tensor_reducer(torch_reduce: Callable[[torch.Tensor], Any]):
    @functools.wraps(torch_reduce)
    def reduce_tensor(tensor):
        if tensor.device.type != _BACKEND:
            return torch_reduce(tensor)
        return _reduce_flagos_tensor(tensor, torch_reduce)

    setattr(reduce_tensor, _ORIGINAL, torch_reduce)
    return reduce_tensor


def _wrap_storage_reducer(torch_reduce: Callable[[Any], Any]):
    @functools.wraps(torch_reduce)
    def reduce_storage(storage):
        if storage.device.type != _BACKEND:
            return torch_reduce(storage)
        mode = _sharing_type()
        if mode == _RUNTIME:
            shared = _export_storage(storage) if storage.nbytes() else (None, 0, 0, None)
            return (_rebuild_runtime_storage, (storage.device.index, *shared))
        if mode is None or _torch_reduce_tensor is None:
            raise _storage_error(storage)
        # As a byte tensor over the whole storage (torch pickles no CUDA storage on its own).
        with torch.no_grad():
            t = torch.empty(0, dtype=torch.uint8, device=storage.device)
            t.set_(storage, 0, (storage.nbytes(),), (1,))
        rebuild, args = _reduce_flagos_tensor(t, _torch_reduce_tensor)
        return (_rebuild_storage, (rebuild, args))

    setattr(reduce_storage, _ORIGINAL, torch_reduce)
    return reduce_storage


def _install_reducers() -> None:
    global _torch_reduce_tensor
    from multiprocessing import reduction

    # Importing torch.multiprocessing registers torch's reducers (torch's import already did).
    from torch.multiprocessing import reductions

    registered = reduction.ForkingPickler._extra_reducers
    # Every type torch registered its tensor or storage reducer for (Tensor, Parameter, the
    # legacy tensor classes, UntypedStorage), and the two that matter if it registered none.
    registered.setdefault(torch.Tensor, reductions.reduce_tensor)
    registered.setdefault(torch.UntypedStorage, reductions.reduce_storage)
    for cls, reducer in list(registered.items()):
        original = getattr(reducer, _ORIGINAL, reducer)
        if original is reductions.reduce_tensor:
            reduction.ForkingPickler.register(cls, _wrap_tensor_reducer(original))
        elif original is reductions.reduce_storage:
            reduction.ForkingPickler.register(cls, _wrap_storage_reducer(original))
    _torch_reduce_tensor = reductions.reduce_tensor


# ---------------------------------------------------------------------------------------------
# the check before a Queue buffers an object
# ---------------------------------------------------------------------------------------------

_ATOMS = frozenset(
    {str, bytes, bytearray, int, float, complex, bool, type(None), range, slice, type(...)}
)
_CONTAINERS = frozenset({list, tuple, set, frozenset, dict})
_STORAGES = (torch.UntypedStorage, torch.TypedStorage)
_PLACEHOLDER = (int, ())


def _check_tensor(t: torch.Tensor) -> None:
    if not t.is_cpu and t.device.type == _BACKEND:
        raise _tensor_error(t)


def _check_storage(s: Any) -> None:
    if s.device.type == _BACKEND:
        raise _storage_error(s)


def _placeholder(obj: Any):
    return _PLACEHOLDER


class _Sink:
    __slots__ = ()

    def write(self, data) -> int:
        return len(data)


_SINK = _Sink()


class _Probe(pickle.Pickler):
    """Pickles into nothing to find flagos tensors inside objects of any type: tensors, storages
    and whatever ForkingPickler has its own reducer for (sockets, connections: reducing those
    duplicates descriptors) are not reduced at all, and CPU arrays' data is skipped."""

    def __init__(self) -> None:
        from multiprocessing import reduction

        super().__init__(_SINK)
        table = copyreg.dispatch_table.copy()
        table.update(dict.fromkeys(reduction.ForkingPickler._extra_reducers, _placeholder))
        self.dispatch_table = table

    def reducer_override(self, obj):
        if isinstance(obj, torch.Tensor):
            _check_tensor(obj)
            return _PLACEHOLDER
        if isinstance(obj, _STORAGES):
            _check_storage(obj)
            return _PLACEHOLDER
        np = sys.modules.get("numpy")
        if np is not None and isinstance(obj, np.ndarray) and not obj.dtype.hasobject:
            return _PLACEHOLDER
        return NotImplemented


def _probe(obj: Any) -> None:
    try:
        _Probe().dump(obj)
    except SharingError:
        raise
    except Exception:
        # Not picklable for another reason: the queue reports it as it always has.
        pass


def check_shareable(obj: Any) -> None:
    """Raise :class:`SharingError` if ``obj`` holds a flagos tensor or storage that this runtime
    cannot share with another process (nothing to check where it can).

    Tensors, storages and the builtin containers are walked directly; an object of any other type
    is pickled into nothing (tensors' and arrays' data skipped) to find the tensors inside it.
    """
    if _sharing_type() is not None:
        return
    stack = [obj]
    seen: set[int] = set()
    while stack:
        o = stack.pop()
        cls = type(o)
        if cls in _ATOMS:
            continue
        if isinstance(o, torch.Tensor):
            _check_tensor(o)
        elif isinstance(o, _STORAGES):
            _check_storage(o)
        elif cls in _CONTAINERS:
            if id(o) in seen:
                continue
            seen.add(id(o))
            if cls is dict:
                stack.extend(o.keys())
                stack.extend(o.values())
            else:
                stack.extend(o)
        else:
            _probe(o)


def _dataloader_error(obj: Any, exc: SharingError) -> Any:
    """A DataLoader worker's ``(index, batch)`` whose batch cannot travel, as the worker's error
    for the main process to raise (DataLoader re-raises an ``ExceptionWrapper`` it receives); an
    exception in the worker would only kill it ("DataLoader worker exited unexpectedly"). None
    for anything else."""
    from torch.utils.data import get_worker_info

    info = get_worker_info()
    if info is None or not (isinstance(obj, tuple) and len(obj) == 2):
        return None
    from torch._utils import ExceptionWrapper

    try:
        raise SharingError(
            f"{exc}. A DataLoader worker's batch is sent to the main process: return CPU tensors "
            "from the dataset and move each batch to flagos in the main process (pin_memory=True "
            "with .to('flagos', non_blocking=True)), or use num_workers=0"
        ) from exc
    except SharingError:
        return (obj[0], ExceptionWrapper(where=f"in DataLoader worker process {info.id}"))


def _checked_put(put: Callable[..., None]):
    @functools.wraps(put)
    def checked_put(self, obj, block=True, timeout=None):
        # The feeder thread pickles later, where an error only prints a traceback: check now.
        try:
            check_shareable(obj)
        except SharingError as exc:
            obj = _dataloader_error(obj, exc)
            if obj is None:
                raise
        return put(self, obj, block, timeout)

    setattr(checked_put, _ORIGINAL, put)
    return checked_put


def _install_put_checks() -> None:
    import multiprocessing.queues

    for cls in (multiprocessing.queues.Queue, multiprocessing.queues.JoinableQueue):
        put = cls.__dict__.get("put")
        if put is not None:
            cls.put = _checked_put(getattr(put, _ORIGINAL, put))


def install(selection) -> None:
    """Install the reducers, and where flagos tensors exist but cannot be shared, the check in
    ``Queue.put``. Idempotent (a re-import replaces the wrappers of an earlier one)."""
    global _sharing
    _sharing = _UNDECIDED
    _install_reducers()
    if selection.present and not can_share():
        _install_put_checks()
