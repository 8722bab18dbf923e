"""How one collective call hands its ``flagos`` tensors to the inner library.

- alias tiers (nccl, gloo-alias, flagcx): a zero-copy view of the same memory typed as the device
  the inner library understands (``torch.ops.torch_fl.alias_as``). Writes land in the flagos
  tensor directly. The CPU alias first synchronizes the flagos current stream, so gloo reads
  what earlier stream work wrote; the CUDA alias needs no synchronization because
  ProcessGroupNCCL orders itself after the CUDA current stream, which is the flagos one.
- gloo-staged: a pinned host copy made on the flagos current stream (inputs copied in), and,
  once the collective has completed, a copy back into every tensor the collective writes.

CPU tensors pass through unchanged (they go to the group's CPU backend).
"""

from __future__ import annotations

from typing import Any

import torch

from torch_fl.distributed.tiers import GLOO_STAGED, TierChoice

__all__ = ["Call", "device_kind", "staged_bytes"]

# Bytes copied between flagos memory and host buffers by staged collectives in this process, both
# ways (what the vendor tier must keep at 0; tests and FLAGOS_LOG=dist read it).
_staged_bytes = 0


def staged_bytes() -> int:
    """Bytes this process staged through host memory for collectives (copies in and back)."""
    return _staged_bytes


def _count_staged(t: torch.Tensor) -> None:
    global _staged_bytes
    _staged_bytes += t.numel() * t.element_size()


def _tensors(structure: Any) -> list[torch.Tensor]:
    if isinstance(structure, torch.Tensor):
        return [structure]
    if isinstance(structure, (list, tuple)):
        return [t for item in structure for t in _tensors(item)]
    return []


def device_kind(op: str, *structures: Any) -> str:
    """ "flagos" or "cpu": where every tensor of the call lives; mixed or other devices raise."""
    kinds = {t.device.type for s in structures for t in _tensors(s)}
    if not kinds or kinds == {"cpu"}:
        return "cpu"
    if kinds == {"flagos"}:
        return "flagos"
    raise ValueError(
        f"torch_fl.distributed: {op} got tensors on {sorted(kinds)}; a flagos process group "
        f"takes flagos tensors (or CPU tensors) and all tensors of one call on the same kind"
    )


def _pinned_empty_like(t: torch.Tensor) -> torch.Tensor:
    # Pinned memory lets the flagos copy engine move the bytes without a bounce buffer; where the
    # platform has none (or another accelerator owns pin_memory=True) pageable memory still works.
    try:
        return torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
    except RuntimeError:
        return torch.empty(t.shape, dtype=t.dtype)


class Call:
    """The inner-library view of one collective call's tensors (see the module docstring)."""

    def __init__(self, choice: TierChoice, op: str, kind: str) -> None:
        self.op = op
        self.kind = kind
        self._staged = kind == "flagos" and choice.name == GLOO_STAGED
        # The vendor tier's library takes flagos tensors themselves.
        self._direct = choice.view_device == "flagos"
        self._view = torch.device(choice.view_device)
        self._memo: dict[int, torch.Tensor] = {}
        self._copy_back: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._copied_in: set[int] = set()
        self._written: set[int] = set()
        self._origin: dict[int, torch.Tensor] = {}  # id(inner tensor) -> its flagos tensor
        # Keeps every flagos tensor and its view alive until the call has completed.
        self.keep: list[torch.Tensor] = []

    def _one(self, t: torch.Tensor, read: bool, write: bool) -> torch.Tensor:
        if t.device.type != "flagos" or self._direct:
            return t
        key = id(t)
        inner = self._memo.get(key)
        if inner is None:
            if self._staged:
                inner = _pinned_empty_like(t)
            else:
                inner = torch.ops.torch_fl.alias_as(t, self._view)
            self._memo[key] = inner
            self._origin[id(inner)] = t
            self.keep += [t, inner]
        if self._staged:
            # One host buffer per flagos tensor, copied in at most once (on the current stream,
            # blocking, so earlier stream work is done) and copied back once.
            if read and key not in self._copied_in:
                inner.copy_(t)
                _count_staged(t)
                self._copied_in.add(key)
            if write and key not in self._written:
                self._copy_back.append((t, inner))
                self._written.add(key)
        return inner

    def convert(self, structure: Any, *, read: bool = True, write: bool = False) -> Any:
        """``structure`` (a tensor or nested lists of tensors) with flagos tensors replaced."""
        if isinstance(structure, torch.Tensor):
            return self._one(structure, read, write)
        if isinstance(structure, (list, tuple)):
            return [self.convert(s, read=read, write=write) for s in structure]
        return structure

    @property
    def copies_back(self) -> bool:
        """Whether :meth:`finish` has results to copy into flagos tensors (staged writes)."""
        return bool(self._copy_back)

    def restore(self, structure: Any) -> Any:
        """``structure`` with this call's inner tensors replaced by the flagos tensors they stand
        for (a result the inner library hands back, e.g. its future's value); others unchanged."""
        if isinstance(structure, torch.Tensor):
            return self._origin.get(id(structure), structure)
        if isinstance(structure, (list, tuple)):
            return [self.restore(s) for s in structure]
        return structure

    def finish(self) -> None:
        """After the collective completed: copy staged results back into the flagos tensors.

        Runs on the thread that completes the collective; the copies go on that thread's current
        flagos stream and are waited for here, so the result is in place when the work completes.
        """
        streams = {}
        for dst, host in self._copy_back:
            dst.copy_(host, non_blocking=True)
            _count_staged(dst)
            streams.setdefault(dst.device, torch.flagos.current_stream(dst.device))
        for stream in streams.values():
            stream.synchronize()
