"""flagos tensors on torch's own gloo process groups: ``init_process_group("gloo")``.

torch expands a backend name to the device types in ``Backend.backend_capability[name]`` and, for
``"gloo"``, registers one ProcessGroupGloo for all of them (cpu and cuda: gloo stages CUDA tensors
itself). :func:`register` adds ``flagos`` to that list, so ``"gloo"``, ``new_group(backend=
"gloo")`` and ``"cpu:gloo,flagos:gloo"`` give torch's plain ProcessGroup with one gloo backend
that also stands for flagos, as it does for CUDA.

ProcessGroupGloo only takes CPU and CUDA tensors, and torch offers no way to write a C++ backend
in Python, so the flagos part sits one level up. A C++ process group runs every collective through
a ``c10d::*`` dispatcher op, which dispatches on the tensors' device to a kernel calling the
group's backend for that device. :func:`register` replaces torch's PrivateUse1 (flagos) kernels of
those ops: each one converts the call's flagos tensors the way the gloo tiers do (CPU alias views
where flagos memory is host memory, pinned host copies elsewhere;
:mod:`~torch_fl.distributed.transport`), runs the same op on them (so the CPU kernel and the
group's gloo backend do the work, options included), and returns a work whose future yields the
flagos tensors once every result is in place, copies back included (DDP's reducer reads that
future). The tier is chosen among :data:`~torch_fl.distributed.tiers.GLOO_TIERS`:
:func:`torch_fl.distributed.tier` reports it for such a group.

CPU tensors never reach these kernels: a process that only uses CPU tensors runs the same kernels
and the same ProcessGroupGloo as without torch-fl.
"""

from __future__ import annotations

import os
import threading
import warnings
import weakref
from typing import Any

import torch
import torch.distributed as dist

from torch_fl.distributed import log, tiers
from torch_fl.distributed.tiers import TierChoice
from torch_fl.distributed.transport import Call, _tensors

__all__ = ["register", "tier_of"]

_c10d = torch._C._distributed_c10d
_FLAGOS = "flagos"
# Where the kernel library is kept: dropping a torch.library.Library unregisters its kernels, and
# a class attribute survives torch_fl being imported afresh (which must not register twice).
_MARK = "_torch_fl_gloo_kernels"

# How a collective uses each tensor argument: read (copied in when staged), written (copied back),
# both, read on the root rank and written elsewhere (broadcast), or only there to pick the
# dispatch key (barrier).
R, W, RW, ROOT, DUMMY = "r", "w", "rw", "root", "dummy"
_OPS: dict[str, tuple[str, dict[str, str]]] = {
    # c10d op: (the torch.distributed name users know, {argument: use})
    "allreduce_": ("all_reduce", {"tensors": RW}),
    "allreduce_coalesced_": ("all_reduce_coalesced", {"tensors": RW}),
    "reduce_": ("reduce", {"tensors": RW}),
    "broadcast_": ("broadcast", {"tensors": ROOT}),
    "allgather_": ("all_gather", {"output_tensors": W, "input_tensors": R}),
    "_allgather_base_": ("all_gather_into_tensor", {"output_tensor": W, "input_tensor": R}),
    "allgather_coalesced_": ("all_gather_coalesced", {"output_lists": W, "input_list": R}),
    "allgather_into_tensor_coalesced_": (
        "all_gather_into_tensor_coalesced",
        {"outputs": W, "inputs": R},
    ),
    "reduce_scatter_": ("reduce_scatter", {"output_tensors": W, "input_tensors": R}),
    "_reduce_scatter_base_": ("reduce_scatter_tensor", {"output_tensor": W, "input_tensor": R}),
    "reduce_scatter_tensor_coalesced_": (
        "reduce_scatter_tensor_coalesced",
        {"outputs": W, "inputs": R},
    ),
    "alltoall_": ("all_to_all", {"output_tensors": W, "input_tensors": R}),
    "alltoall_base_": ("all_to_all_single", {"output": W, "input": R}),
    "gather_": ("gather", {"output_tensors": W, "input_tensors": R}),
    "scatter_": ("scatter", {"output_tensors": W, "input_tensors": R}),
    "send": ("send", {"tensors": R}),
    "recv_": ("recv", {"tensors": W}),
    "recv_any_source_": ("recv", {"tensors": W}),
    "barrier": ("barrier", {"tensor": DUMMY}),
}

_choices: dict[str, TierChoice] = {}
_logged: set[str] = set()
# A group whose asynchronous flagos collective failed -> the error (see _Finish).
_failed: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def register() -> None:
    """Let gloo groups take flagos tensors (idempotent; a torch without the hooks is left alone)."""
    if not (dist.is_available() and dist.is_gloo_available()):
        return
    if getattr(dist.Backend, _MARK, None) is None:
        if not hasattr(_c10d, "_create_work_from_future"):
            return  # no way to hand back a work of our own: leave flagos out of gloo's devices
        lib = torch.library.Library("c10d", "IMPL")
        with warnings.catch_warnings():
            # torch warns once that a kernel registered in C++ is overridden: that is the point.
            warnings.simplefilter("ignore")
            for op, (shown, uses) in _OPS.items():
                packet = getattr(torch.ops.c10d, op, None)
                if packet is None:
                    continue
                names = [a.name for a in packet.default._schema.arguments]
                lib.impl(op, _kernel(op, shown, uses, names), "PrivateUse1")
        setattr(dist.Backend, _MARK, lib)
    capability = getattr(dist.Backend, "backend_capability", None)
    devices = capability.get(dist.Backend.GLOO) if isinstance(capability, dict) else None
    if isinstance(devices, list) and _FLAGOS not in devices:
        devices.append(_FLAGOS)


def _choice(env: dict[str, str] | None = None) -> TierChoice:
    forced = (os.environ if env is None else env).get(tiers.ENV_VAR, "")
    choice = _choices.get(forced)
    if choice is None:
        choice = _choices[forced] = tiers.choose(env, within=tiers.GLOO_TIERS)
    return choice


def _is_gloo(backend: Any) -> bool:
    wrapper = getattr(_c10d, "_ProcessGroupWrapper", None)
    while wrapper is not None and isinstance(backend, wrapper):  # TORCH_DISTRIBUTED_DEBUG=DETAIL
        backend = backend.wrapped_pg
    return isinstance(backend, dist.ProcessGroupGloo)


def _backend(group: dist.ProcessGroup, device: str) -> Any:
    try:
        return group._get_backend(torch.device(device))
    except RuntimeError:
        return None


def tier_of(group: dist.ProcessGroup) -> TierChoice | None:
    """The tier flagos tensors take on ``group`` when its backend is gloo, else None."""
    if _is_gloo(_backend(group, "cpu")) or _is_gloo(_backend(group, _FLAGOS)):
        return _choice()
    return None


def _group_choice(group: dist.ProcessGroup) -> TierChoice:
    from torch_fl.distributed.process_group import ProcessGroupFlagos

    if isinstance(group, ProcessGroupFlagos) and group.tier.name in tiers.GLOO_TIERS:
        return group.tier
    return _choice()


def _prepare(group: dist.ProcessGroup, where: str) -> None:
    """Check that ``group`` can run flagos tensors on gloo; give it gloo for CPU if it lacks one."""
    from torch_fl.distributed.process_group import ProcessGroupFlagos

    cpu, flagos = _backend(group, "cpu"), _backend(group, _FLAGOS)
    if flagos is not None and not _is_gloo(flagos) and not isinstance(group, ProcessGroupFlagos):
        raise RuntimeError(
            f"{where}: the group's flagos backend is {flagos.name()!r}; torch-fl runs flagos "
            f"tensors of torch's own process groups on their gloo backend (use backend 'gloo', "
            f"'cpu:gloo,flagos:gloo' or 'flagos')"
        )
    if _is_gloo(cpu):
        return
    if cpu is None and flagos is not None:
        # "flagos:gloo" alone: the flagos tensors go through gloo's CPU path, so it serves CPU too.
        group._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.GLOO, flagos)
        return
    devices = ", ".join(d.type for d in group._device_types) or "none"
    raise RuntimeError(
        f"{where}: the process group has no gloo backend to run flagos tensors on (its devices: "
        f"{devices}); create it with backend 'gloo' or 'flagos'"
    )


def _kernel(op: str, shown: str, uses: dict[str, str], names: list[str]):
    def kernel(*args: Any) -> Any:
        return _run(op, shown, uses, names, list(args))

    kernel.__name__ = kernel.__qualname__ = f"flagos_on_gloo_{op}"
    return kernel


def _run(op: str, shown: str, uses: dict[str, str], names: list[str], args: list[Any]) -> Any:
    from torch_fl.distributed.work import _rewrap

    group = dist.ProcessGroup.unbox(args[names.index("process_group")])
    choice = _group_choice(group)
    devices = sorted({str(t.device) for a in args for t in _tensors(a) if t.device.type == _FLAGOS})
    where = (
        f"flagos {shown} on {','.join(devices)} (vendor {choice.vendor!r}, backend gloo, tier "
        f"{choice.name}, rank {group.rank()}/{group.size()})"
    )
    failed = _failed.get(group)
    if failed is not None:
        raise RuntimeError(
            f"{where}: an earlier collective of this group failed, and a gloo group does not "
            f"recover: {failed}"
        )
    _prepare(group, where)
    name = str(getattr(group, "group_name", "") or "")
    if name not in _logged:
        _logged.add(name)
        log.log(f"gloo group {name!r} rank {group.rank()}/{group.size()}: {choice.describe()}")
    call = Call(choice, op, _FLAGOS)
    written: Any = None
    blocking = False
    for i, arg_name in enumerate(names[: len(args)]):
        if arg_name in ("async_op", "asyncOp"):  # named asyncOp before torch 2.13
            blocking = args[i] is False
        use = uses.get(arg_name)
        if use is None:
            continue
        if use == DUMMY:
            # A host barrier: this rank's flagos work first, as the flagos group's barrier does.
            device = args[i].device
            if device.type == _FLAGOS:
                torch.flagos.synchronize(device.index)
            args[i] = torch.empty(args[i].shape, dtype=args[i].dtype)
            continue
        if use == ROOT:
            root = args[names.index("root_rank")] == group.rank()
            read, write = root, not root
        else:
            read, write = use in (R, RW), use in (W, RW)
        if write and written is None:
            written = args[i]
        args[i] = call.convert(args[i], read=read, write=write)
    if any(t.device.type == _FLAGOS for a in args for t in _tensors(a)):
        raise RuntimeError(f"{where}: an argument torch-fl does not convert holds a flagos tensor")
    try:
        result = getattr(torch.ops.c10d, op).default(*args)
    except Exception as exc:
        raise _rewrap(exc, where) from exc
    finish = _Finish(op, call, where, group, written, blocking)
    if isinstance(result, tuple):
        return tuple(finish.work(r) if _is_work(r) else call.restore(r) for r in result)
    return finish.work(result) if _is_work(result) else result


def _is_work(value: Any) -> bool:
    return isinstance(value, torch.ScriptObject)


class _Finish:
    """Turns the gloo work of one call into the work its caller gets: done once the results are
    in the flagos tensors, its future yielding the flagos tensors.

    torch's work over a future (``_create_work_from_future``) is the only one Python can give a
    future of its own, but its ``wait()`` returns normally when the future failed. So calls made
    with ``async_op=False`` are finished here, and raise from gloo's own wait; an asynchronous
    call that fails raises from its future (what DDP waits on), and the group's next flagos
    collective raises it too.
    """

    def __init__(
        self, op: str, call: Call, where: str, group: Any, written: Any, blocking: bool
    ) -> None:
        self.op, self.call, self.where, self.group = op, call, where, group
        self.written, self.blocking = written, blocking
        self._lock = threading.Lock()
        self._done = False

    def work(self, boxed: Any) -> Any:
        call = self.call
        if not call.keep:
            return boxed  # barrier: nothing of flagos to finish
        inner = dist.Work.unbox(boxed)
        try:
            future = inner.get_future()
        except RuntimeError:  # gloo's send/recv works have no future
            future = None
        if future is None and not call.copies_back:
            return boxed  # sent, or received straight into flagos memory through an alias view
        # recv from any source: its work must answer _source_rank(), which only gloo's can.
        if self.blocking or (future is None and self.op == "recv_any_source_"):
            self.wait_inner(inner)
            return boxed
        if future is not None:
            return _c10d._create_work_from_future(future.then(self.finished)).boxed()
        # A staged receive: copied back once gloo has it, and irecv must not block.
        waiter = getattr(_c10d, "PythonCallbackWork", None)
        if waiter is not None:
            return waiter(lambda timeout: self.wait_inner(inner, timeout)).boxed()
        return _c10d._create_work_from_future(self.by_thread(inner)).boxed()

    def wait_inner(self, inner: dist.Work, timeout: Any = None) -> bool:
        with self._lock:  # a second wait() must not wait for gloo a second time
            if self._done:
                return True
            try:
                inner.wait(timeout) if timeout else inner.wait()
                self.call.finish()
            except Exception as exc:
                raise self.fail(exc) from exc
            self._done = True
        return True

    def fail(self, exc: Exception) -> Exception:
        from torch_fl.distributed.work import _rewrap

        error = _rewrap(exc, self.where)
        _failed[self.group] = error
        return error

    def finished(self, done: torch.futures.Future) -> Any:
        # On the thread that completed the gloo work (gloo's worker): copy back, then the value.
        try:
            value = done.value()
            self.call.finish()
        except Exception as exc:
            raise self.fail(exc) from exc
        return self.call.restore(value)

    def by_thread(self, inner: dist.Work) -> torch.futures.Future:
        future: torch.futures.Future = torch.futures.Future()

        def run() -> None:
            try:
                inner.wait()
                self.call.finish()
            except Exception as exc:
                future.set_exception(self.fail(exc))
                return
            future.set_result(self.call.restore(self.written))

        threading.Thread(target=run, name="flagos-gloo-recv", daemon=True).start()
        return future
