"""``ProcessGroupFlagos``: the process group ``init_process_group("flagos")`` returns.

A Python subclass of ``torch.distributed.ProcessGroup`` (PyTorch's supported way to add a backend
from Python; DDP's C++ reducer calls back into it). Every operation converts its flagos tensors for
the group's tier (:mod:`~torch_fl.distributed.transport`), runs the inner c10d backend
(:mod:`~torch_fl.distributed.inner`) and returns a :class:`~torch_fl.distributed.work.FlagosWork`.
CPU tensors go to the group's gloo backend unchanged.

Method names follow what ``torch.distributed`` calls on a group in torch 2.10-2.13: the 2.13 names
(``all_gather_single``, ``reduce_scatter_single``, ``all_to_all_single``, ...) and the older ones
(``_allgather_base``, ``_reduce_scatter_base``, ``alltoall_base``, ...) are both defined.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

from torch_fl.distributed import inner as inners
from torch_fl.distributed import log, shape_check, tiers
from torch_fl.distributed.tiers import TierChoice
from torch_fl.distributed.transport import Call, _tensors, device_kind
from torch_fl.distributed.work import FlagosWork, _rewrap

__all__ = ["BACKEND_NAME", "ProcessGroupFlagos"]

# Option structs live in the C extension; torch.distributed re-exports only some of them.
_c10d = torch._C._distributed_c10d

BACKEND_NAME = "flagos"

Body = Callable[[dist.Backend, Call], "dist.Work | Sequence[dist.Work]"]


def _blocking_wait() -> bool:
    return any(
        os.environ.get(k, "0").lower() in ("1", "true", "yes")
        for k in ("TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT")
    )


class _AsIs:
    """The conversion of a vendor-tier call: the library takes flagos tensors as they are."""

    @staticmethod
    def convert(structure: Any, *, read: bool = True, write: bool = False) -> Any:
        return structure


_AS_IS = _AsIs()


def _first_tensor(structures: Sequence[Any]) -> torch.Tensor | None:
    """The first tensor of a call's nested lists, without flattening them."""
    for s in structures:
        if isinstance(s, torch.Tensor):
            return s
        if isinstance(s, (list, tuple)):
            found = _first_tensor(s)
            if found is not None:
                return found
    return None


class _AlwaysWork:
    """The inner device backend, called with ``opts.asyncOp = True`` (with blocking wait only).

    ProcessGroupNCCL (torch 2.11) returns no work for a non-async collective: it is only enqueued.
    With ``TORCH_NCCL_BLOCKING_WAIT=1`` the user asked for a host wait that raises after the
    group's timeout; without a work to wait on, a survivor of a dead or hung peer blocked forever
    in its next synchronize instead (H200). So there every call gets a work and the flagos work
    waits on it. Without blocking wait the default path is kept: on the H200 the full collective
    scenario failed when every call was made async (not understood yet; docs/distributed.md)."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._backend, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            for arg in (*args, *kwargs.values()):
                if hasattr(arg, "asyncOp"):
                    arg.asyncOp = True
            return attr(*args, **kwargs)

        return call


class ProcessGroupFlagos(dist.ProcessGroup):
    """A process group over flagos tensors that delegates to the inner library of its tier."""

    def __init__(
        self,
        store: dist.Store,
        rank: int,
        size: int,
        timeout: datetime.timedelta,
        choice: TierChoice | None = None,
        group_name: str = "",
        global_ranks: list[int] | None = None,
    ) -> None:
        super().__init__(rank, size)
        self._choice = choice if choice is not None else tiers.choose()
        self._timeout = timeout
        self._inner = inners.create(
            self._choice, store, rank, size, timeout, group_name, global_ranks
        )
        # Registered so torch's own lookups work: init_process_group(device_id=flagos:i) asks
        # _get_backend(flagos) whether it can split, object collectives and barrier() read
        # _device_types (cpu among them -> objects travel as CPU tensors, no device copies).
        # init_process_group(device_id=flagos:i) then calls eager_connect_single_device(flagos:i)
        # on the backend registered for flagos if it supports splitting, and ProcessGroupNCCL
        # rejects a flagos device there (CUDAGuardImpl, seen on the H200). On the NCCL tier the
        # host gloo backend (whose eager connect is a no-op) answers those lookups instead;
        # collectives always go through this class's methods.
        lookups = self._inner.cpu if self._choice.name == tiers.NCCL else self._inner.device
        self._register_backend(
            torch.device(BACKEND_NAME), dist.ProcessGroup.BackendType.CUSTOM, lookups
        )
        self._register_backend(
            torch.device("cpu"), dist.ProcessGroup.BackendType.GLOO, self._inner.cpu
        )
        self._check_shapes = shape_check.enabled(self._choice.name)
        # Direct calls skip the Python machinery where nothing of it applies (see _run).
        self._vendor_direct = self._choice.name == tiers.VENDOR and not (
            self._check_shapes and size > 1
        )
        log.log(f"group rank {rank}/{size}: {self._choice.describe()}")

    # ---- identity ------------------------------------------------------------------------
    def getBackendName(self) -> str:  # noqa: N802 - the name the C++ trampoline looks up
        return BACKEND_NAME

    def name(self) -> str:
        return BACKEND_NAME

    @property
    def tier(self) -> TierChoice:
        """The chosen tier and the reasons earlier tiers were skipped."""
        return self._choice

    def __repr__(self) -> str:
        return f"<ProcessGroupFlagos rank {self.rank()}/{self.size()} tier {self._choice.name}>"

    # ---- machinery -----------------------------------------------------------------------
    def _where(self, op: str, kind: str, tensors: list[torch.Tensor]) -> str:
        devices = sorted({str(t.device) for t in tensors}) or [kind]
        return (
            f"flagos {op} on {','.join(devices)} (vendor {self._choice.vendor!r}, tier "
            f"{self._choice.name if kind == 'flagos' else 'gloo (cpu tensors)'}, rank "
            f"{self.rank()}/{self.size()})"
        )

    def _run(
        self,
        op: str,
        structures: Sequence[Any],
        body: Body,
        value: Any,
        post: Callable[[], None] | None = None,
        agree: Sequence[torch.Tensor] = (),
        direct: bool = False,
    ) -> dist.Work:
        """Run ``body`` on the inner backend for this call's tensors and wrap its work.

        ``agree``: tensors whose dtype and shape must be the same on every rank (checked across
        ranks first when :mod:`~torch_fl.distributed.shape_check` is enabled for the tier).
        ``direct``: the call's value is the inner operation's outputs as they are; on the vendor
        tier its work is then returned unwrapped (see below).
        """
        if direct and post is None and self._vendor_direct:
            # The vendor tier with flagos tensors: core's C++ backend as it is (it checks that
            # every tensor is on its one flagos device, and its errors and works name op, device,
            # vendor, tier and rank), without the per-call conversion and wrapping below.
            first = _first_tensor(structures)
            if first is not None and first.device.type == "flagos":
                try:
                    works = body(self._inner.device, _AS_IS)
                except Exception as exc:
                    raise _rewrap(exc, self._where(op, "flagos", [first])) from exc
                if isinstance(works, dist.Work):
                    return works
        kind = device_kind(op, *structures)

        def where() -> str:  # worded only where a message or a wrapper needs it
            return self._where(op, kind, [t for s in structures for t in _tensors(s)])

        if agree and self.size() > 1 and self._check_shapes:
            try:
                shape_check.check(self._inner.cpu, self.size(), op, list(agree), where())
            except ValueError:
                raise  # already names op, device, vendor and every rank's shapes
            except Exception as exc:  # a lost or hung peer shows up here first
                raise _rewrap(exc, where()) from exc
        call = Call(self._choice, op, kind)
        vendor = kind == "flagos" and self._choice.name == tiers.VENDOR
        device_async = vendor or (
            kind == "flagos" and self._choice.name in (tiers.NCCL, tiers.FLAGCX)
        )
        backend = self._inner.device if kind == "flagos" else self._inner.cpu
        if device_async and not vendor and _blocking_wait():
            backend = _AlwaysWork(backend)
        try:
            works = body(backend, call)
        except Exception as exc:
            raise _rewrap(exc, where()) from exc
        if vendor and direct and post is None and isinstance(works, dist.Work):
            # Core's vendor backend already answers as the flagos group would: its work's
            # future holds these flagos tensors and completes on the communicator's stream,
            # wait() orders the current stream (or, with blocking wait, raises within the
            # timeout), and its errors name op, device, vendor, tier and rank. No Python
            # wrapper and future per collective (the per-call cost on the H200).
            return works
        if works is None:
            # A backend may finish a non-async collective "at the C++ level" and return no work
            # (ProcessGroupNCCL with opts.asyncOp=False on torch 2.11: it enqueued on the current
            # stream, which is the flagos one); torch's own callers accept None the same way.
            works = []
        elif isinstance(works, dist.Work):
            works = [works]
        return FlagosWork(where(), works, call, value, post, device_async=device_async)

    def _per_pair(
        self,
        op: str,
        method: str,
        outputs: list[torch.Tensor],
        inputs: list[torch.Tensor],
        opts: Any,
    ) -> FlagosWork:
        """A coalesced op as one inner ``method`` call per (output, input) pair, one work."""

        def body(b: dist.Backend, c: Call) -> list[dist.Work]:
            return [
                getattr(b, method)(c.convert(o, read=False, write=True), c.convert(i), opts)
                for o, i in zip(outputs, inputs, strict=True)
            ]

        return self._run(op, [outputs, inputs], body, outputs, agree=inputs)

    def _check(self, cond: bool, op: str, tensors: Sequence[torch.Tensor], message: str) -> None:
        """Local argument checks, before anything is sent: ValueError naming op/device/vendor."""
        if not cond:
            kind = "flagos" if any(t.device.type == "flagos" for t in tensors) else "cpu"
            raise ValueError(f"{self._where(op, kind, list(tensors))}: {message}")

    # ---- all-reduce --------------------------------------------------------------------
    def allreduce(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        opts = opts if opts is not None else _c10d.AllreduceOptions()

        def body(b: dist.Backend, c: Call) -> dist.Work:
            return b.allreduce(c.convert(tensors, read=True, write=True), opts)

        return self._run("all_reduce", [tensors], body, tensors, agree=tensors, direct=True)

    def allreduce_coalesced(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        opts = opts if opts is not None else _c10d.AllreduceCoalescedOptions()

        def body(b: dist.Backend, c: Call) -> dist.Work:
            return b.allreduce_coalesced(c.convert(tensors, read=True, write=True), opts)

        return self._run(
            "all_reduce_coalesced", [tensors], body, tensors, agree=tensors, direct=True
        )

    def reduce(self, tensors: list[torch.Tensor], opts: Any) -> dist.Work:
        def body(b: dist.Backend, c: Call) -> dist.Work:
            return b.reduce(c.convert(tensors, read=True, write=True), opts)

        return self._run("reduce", [tensors], body, tensors, agree=tensors, direct=True)

    # ---- broadcast -----------------------------------------------------------------------
    def broadcast(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        opts = opts if opts is not None else _c10d.BroadcastOptions()
        is_root = opts.rootRank == self.rank()

        def body(b: dist.Backend, c: Call) -> dist.Work:
            return b.broadcast(c.convert(tensors, read=is_root, write=not is_root), opts)

        return self._run("broadcast", [tensors], body, tensors, agree=tensors, direct=True)

    # ---- all-gather ----------------------------------------------------------------------
    def allgather(
        self,
        output_tensors: list[list[torch.Tensor]],
        input_tensors: list[torch.Tensor],
        opts: Any = None,
    ) -> dist.Work:
        opts = opts if opts is not None else _c10d.AllgatherOptions()

        def body(b: dist.Backend, c: Call) -> dist.Work:
            ins = c.convert(input_tensors, read=True)
            return b.allgather(c.convert(output_tensors, read=False, write=True), ins, opts)

        return self._run(
            "all_gather", [output_tensors, input_tensors], body, output_tensors, agree=input_tensors
        )

    def all_gather_single(
        self, output: torch.Tensor, input: torch.Tensor, opts: Any = None
    ) -> dist.Work:
        opts = opts if opts is not None else _c10d.AllgatherOptions()
        op = "all_gather_into_tensor"
        self._check(
            output.numel() == input.numel() * self.size(),
            op,
            [output, input],
            f"output has {output.numel()} elements but the input has {input.numel()} and the "
            f"group {self.size()} ranks (output must be world_size x input)",
        )
        self._check(
            output.dtype == input.dtype,
            op,
            [output, input],
            f"dtypes differ: {output.dtype} vs {input.dtype}",
        )

        def body(b: dist.Backend, c: Call) -> dist.Work:
            ins = c.convert(input, read=True)
            return b._allgather_base(c.convert(output, read=False, write=True), ins, opts)

        return self._run(op, [output, input], body, [output], agree=[input], direct=True)

    _allgather_base = all_gather_single

    def allgather_coalesced(
        self,
        output_lists: list[list[torch.Tensor]],
        input_list: list[torch.Tensor],
        opts: Any = None,
    ) -> dist.Work:
        opts = opts if opts is not None else _c10d.AllgatherOptions()

        def body(b: dist.Backend, c: Call) -> dist.Work:
            ins = c.convert(input_list, read=True)
            return b.allgather_coalesced(c.convert(output_lists, read=False, write=True), ins, opts)

        return self._run("all_gather_coalesced", [output_lists, input_list], body, output_lists)

    def all_gather_single_coalesced(
        self, outputs: list[torch.Tensor], inputs: list[torch.Tensor], opts: Any = None
    ) -> dist.Work:
        # gloo has no coalesced form: one inner all-gather per pair, one Work for all of them.
        opts = opts if opts is not None else _c10d.AllgatherOptions()
        return self._per_pair(
            "all_gather_into_tensor_coalesced", "_allgather_base", outputs, inputs, opts
        )

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    # ---- reduce-scatter ------------------------------------------------------------------
    def reduce_scatter(
        self,
        output_tensors: list[torch.Tensor],
        input_tensors: list[list[torch.Tensor]],
        opts: Any = None,
    ) -> dist.Work:
        opts = opts if opts is not None else _c10d.ReduceScatterOptions()

        def body(b: dist.Backend, c: Call) -> dist.Work:
            ins = c.convert(input_tensors, read=True)
            return b.reduce_scatter(c.convert(output_tensors, read=False, write=True), ins, opts)

        return self._run(
            "reduce_scatter",
            [output_tensors, input_tensors],
            body,
            output_tensors,
            agree=output_tensors,
        )

    def reduce_scatter_single(
        self, output: torch.Tensor, input: torch.Tensor, opts: Any = None
    ) -> dist.Work:
        opts = opts if opts is not None else _c10d.ReduceScatterOptions()
        op = "reduce_scatter_tensor"
        self._check(
            input.numel() == output.numel() * self.size(),
            op,
            [output, input],
            f"input has {input.numel()} elements but the output has {output.numel()} and the "
            f"group {self.size()} ranks (input must be world_size x output)",
        )
        self._check(
            output.dtype == input.dtype,
            op,
            [output, input],
            f"dtypes differ: {output.dtype} vs {input.dtype}",
        )

        def body(b: dist.Backend, c: Call) -> dist.Work:
            ins = c.convert(input, read=True)
            return b._reduce_scatter_base(c.convert(output, read=False, write=True), ins, opts)

        return self._run(op, [output, input], body, [output], agree=[input], direct=True)

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter_single_coalesced(
        self, outputs: list[torch.Tensor], inputs: list[torch.Tensor], opts: Any = None
    ) -> dist.Work:
        opts = opts if opts is not None else _c10d.ReduceScatterOptions()
        return self._per_pair(
            "reduce_scatter_tensor_coalesced", "_reduce_scatter_base", outputs, inputs, opts
        )

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    # ---- all-to-all ----------------------------------------------------------------------
    def all_to_all_single(
        self,
        output: torch.Tensor,
        input: torch.Tensor,
        output_split_sizes: list[int],
        input_split_sizes: list[int],
        opts: Any = None,
    ) -> dist.Work:
        opts = opts if opts is not None else _c10d.AllToAllOptions()
        op = "all_to_all_single"
        for name, t, splits in (
            ("output", output, output_split_sizes),
            ("input", input, input_split_sizes),
        ):
            if splits:
                self._check(
                    len(splits) == self.size() and sum(splits) == t.size(0),
                    op,
                    [t],
                    f"{name} split sizes {list(splits)} do not split its first dimension "
                    f"{t.size(0)} into {self.size()} parts",
                )
            else:
                self._check(
                    t.size(0) % self.size() == 0,
                    op,
                    [t],
                    f"{name} first dimension {t.size(0)} is not divisible by the group size "
                    f"{self.size()}",
                )

        def body(b: dist.Backend, c: Call) -> dist.Work:
            ins = c.convert(input, read=True)
            out = c.convert(output, read=False, write=True)
            return b.alltoall_base(
                out, ins, list(output_split_sizes), list(input_split_sizes), opts
            )

        return self._run(op, [output, input], body, [output], direct=True)

    alltoall_base = all_to_all_single

    def alltoall(
        self,
        output_tensors: list[torch.Tensor],
        input_tensors: list[torch.Tensor],
        opts: Any = None,
    ) -> dist.Work:
        # gloo has only the single-buffer form: pack the lists into one buffer on flagos, run
        # all_to_all_single with per-rank splits, unpack into the outputs once it completed.
        opts = opts if opts is not None else _c10d.AllToAllOptions()
        op = "all_to_all"
        self._check(
            len(output_tensors) == self.size() and len(input_tensors) == self.size(),
            op,
            [*output_tensors, *input_tensors],
            f"needs {self.size()} input and output tensors, got {len(input_tensors)} and "
            f"{len(output_tensors)}",
        )
        dtypes = {t.dtype for t in [*output_tensors, *input_tensors]}
        self._check(
            len(dtypes) == 1,
            op,
            [*output_tensors, *input_tensors],
            f"all tensors must have one dtype, got {sorted(map(str, dtypes))}",
        )
        packed_in = torch.cat([t.reshape(-1) for t in input_tensors])
        packed_out = packed_in.new_empty(sum(t.numel() for t in output_tensors))
        in_splits = [t.numel() for t in input_tensors]
        out_splits = [t.numel() for t in output_tensors]

        def body(b: dist.Backend, c: Call) -> dist.Work:
            ins = c.convert(packed_in, read=True)
            out = c.convert(packed_out, read=False, write=True)
            return b.alltoall_base(out, ins, out_splits, in_splits, opts)

        def unpack() -> None:
            for dst, part in zip(output_tensors, packed_out.split(out_splits), strict=True):
                dst.copy_(part.view(dst.shape))

        return self._run(op, [output_tensors, input_tensors], body, output_tensors, post=unpack)

    # ---- gather / scatter ----------------------------------------------------------------
    def gather(
        self, output_tensors: list[list[torch.Tensor]], input_tensors: list[torch.Tensor], opts: Any
    ) -> dist.Work:
        def body(b: dist.Backend, c: Call) -> dist.Work:
            ins = c.convert(input_tensors, read=True)
            return b.gather(c.convert(output_tensors, read=False, write=True), ins, opts)

        return self._run("gather", [output_tensors, input_tensors], body, output_tensors)

    def scatter(
        self, output_tensors: list[torch.Tensor], input_tensors: list[list[torch.Tensor]], opts: Any
    ) -> dist.Work:
        def body(b: dist.Backend, c: Call) -> dist.Work:
            ins = c.convert(input_tensors, read=True)
            return b.scatter(c.convert(output_tensors, read=False, write=True), ins, opts)

        return self._run("scatter", [output_tensors, input_tensors], body, output_tensors)

    # ---- point to point ------------------------------------------------------------------
    def send(self, tensors: list[torch.Tensor], dst: int, tag: int = 0) -> dist.Work:
        def body(b: dist.Backend, c: Call) -> dist.Work:
            return b.send(c.convert(tensors, read=True), dst, tag)

        return self._run("send", [tensors], body, tensors, direct=True)

    def recv(self, tensors: list[torch.Tensor], src: int, tag: int = 0) -> dist.Work:
        def body(b: dist.Backend, c: Call) -> dist.Work:
            return b.recv(c.convert(tensors, read=False, write=True), src, tag)

        return self._run("recv", [tensors], body, tensors, direct=True)

    def recv_anysource(self, tensors: list[torch.Tensor], tag: int = 0) -> dist.Work:
        def body(b: dist.Backend, c: Call) -> dist.Work:
            return b.recv_anysource(c.convert(tensors, read=False, write=True), tag)

        return self._run("recv_anysource", [tensors], body, tensors)

    # ---- barriers ------------------------------------------------------------------------
    def barrier(self, opts: Any = None) -> dist.Work:
        device = getattr(opts, "device", None) if opts is not None else None
        if (
            self._inner.device is not self._inner.cpu
            and device is not None
            and device.type == "flagos"
        ):
            # As ProcessGroupNCCL does: an all-reduce of one element on the device, so the
            # barrier is also ordered on the device's stream.
            work = self.allreduce([torch.zeros(1, device=device)])
            work.wait()
            # A barrier also blocks the host, as ProcessGroupNCCL's does.
            torch.flagos.current_stream(device).synchronize()
            return work
        if torch.flagos.is_available():
            # Host barrier on the gloo tiers: everything this rank enqueued on flagos first.
            index = device.index if device is not None and device.type == "flagos" else None
            torch.flagos.synchronize(index)
        barrier_opts = _c10d.BarrierOptions()
        if opts is not None and getattr(opts, "timeout", None) is not None:
            barrier_opts.timeout = opts.timeout

        def body(b: dist.Backend, c: Call) -> dist.Work:
            return b.barrier(barrier_opts)

        return self._run("barrier", [], body, [])

    def monitored_barrier(
        self, timeout: datetime.timedelta | None = None, wait_all_ranks: bool = False
    ) -> None:
        self._inner.cpu.monitored_barrier(timeout or self._timeout, wait_all_ranks)

    # ---- lifetime ------------------------------------------------------------------------
    def shutdown(self) -> None:
        for backend in {id(b): b for b in (self._inner.device, self._inner.cpu)}.values():
            stop = getattr(backend, "shutdown", None)
            if stop is not None:
                stop()

    def abort(self) -> None:
        for backend in {id(b): b for b in (self._inner.device, self._inner.cpu)}.values():
            stop = getattr(backend, "abort", None)
            if stop is not None:
                stop()
