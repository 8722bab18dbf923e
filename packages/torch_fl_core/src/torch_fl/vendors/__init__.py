"""Vendors: who provides the runtime under the ``flagos`` device.

A vendor package (``torch-fl-gcu``, ``torch-fl-ascend``, ...) declares one entry point in the
``torch_fl.vendors`` group naming a :class:`Vendor` instance (or a zero-argument callable returning
one)::

    [project.entry-points."torch_fl.vendors"]
    gcu = "torch_fl_gcu:vendor"

Core finds it with :mod:`torch_fl.vendors.discovery`, chooses one vendor per process and activates
it here: the vendor's runtime library is loaded into ``torch_fl._C`` and then the vendor's
:meth:`Vendor.activate` hook runs. Core never names a vendor; the built-in ``sim`` vendor is found
the same way as any other.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from torch.autograd import ProfilerActivity

__all__ = [
    "Vendor",
    "Selection",
    "VendorActivationError",
    "activate",
    "active",
    "active_vendor",
]


class VendorActivationError(RuntimeError):
    """The chosen vendor could not be activated: its runtime library does not load (its SDK is
    missing) or its activate() hook failed. The message names the vendor, why it was chosen, and
    the fix."""


def _brief(exc: BaseException) -> str:
    """``exc``'s message without the C++ backtrace c10 errors append."""
    text = str(exc)
    cut = text.find("\nException raised from ")
    return (text[:cut] if cut != -1 else text).strip()


class Vendor:
    """What a vendor package gives core. Subclass it and override the methods.

    ``name`` is the short name users put in ``FLAGOS_VENDOR`` and must equal the entry-point name.
    Methods must not touch the ``flagos`` device (it is not set up when they run) and should be
    cheap: :meth:`is_present` runs at ``import torch`` time for every installed vendor.
    """

    #: Short name, e.g. ``"gcu"``; equal to the entry-point name.
    name: str = ""
    #: The vendor API level (:data:`torch_fl.versions.API_LEVEL`) this vendor is written for: a
    #: core that does not serve it refuses the vendor with an error naming both levels.
    api_level: int = 1
    #: One line for ``python -m torch_fl``, e.g. ``"Enflame GCU (topsrt runtime)"``.
    description: str = ""
    #: How Inductor compiles flagos graphs: ``"cpp"`` (C++ kernels on host-addressable memory),
    #: ``"triton"`` (with :attr:`triton_target`), or None to decide by capability (host-addressable
    #: memory means ``"cpp"``). See docs/compile.md and :mod:`torch_fl.compile.choice`.
    compile_scheduling: str | None = None
    #: The Triton backend a ``"triton"`` vendor's kernels compile for, e.g. ``"cuda"``; the vendor
    #: guarantees that the flagos current stream is that device's current stream.
    triton_target: str | None = None
    #: Whether ``torch.compile(mode="reduce-overhead")`` captures device graphs on this vendor.
    compile_graphs: bool = False
    #: The ``torch.profiler.ProfilerActivity`` whose tracer already sees this vendor's device work,
    #: or None. The cuda vendor's boxed kernels are CUDA kernels, so CUPTI (``CUDA``) times them.
    #: When torch supports it, every Kineto profile of ``flagos`` records it too (kernel rows
    #: linked to the op rows that launched them) and core's own runtime-event timing is switched
    #: off so no call is counted twice. None: core times routed calls with runtime events. See
    #: docs/profiler.md and :mod:`torch_fl.profiler_activity`.
    profiler_activity: ProfilerActivity | None = None
    #: Whether the route table serves every operator the CPU has a kernel for on a backend of this
    #: vendor's (short of those core serves itself or that cannot run on flagos memory), so no call
    #: of an ordinary workload reaches ATen's CPU fallback (``sim``: ``box:cpu``). The contract
    #: suites then require an empty fallback census (optimizer steps, models, math-bit operands,
    #: ``python -m torch_fl.census``); where it is False the census only has to agree with the
    #: routes. See docs/contracts.md.
    no_cpu_fallback: bool = False
    #: The module with the runtime's test-only fault injection, or None where it has none. It has
    #: :mod:`torch_fl.runtimes.sim`'s interface (``fault``, ``inject_fault``, ``clear_faults``,
    #: ``call_count``, ``live_bytes``, ``live_allocations``) and acts on the loaded runtime. The
    #: contract suites' injected-failure tests use it and skip, naming the vendor, without one.
    fault_injection: str | None = None
    #: What emulates this vendor's devices when they are not the hardware (a vendor package built
    #: against an SDK emulator), as a phrase for ``python -m torch_fl``, or None for real devices.
    #: A subclass may make it a property: it is read when ``torch_fl.info()`` runs.
    emulated: str | None = None
    #: Whether flagos tensors sent to another process (a ``torch.multiprocessing`` queue, a pipe,
    #: ``Process`` arguments) share their memory through torch's CUDA IPC, as CUDA tensors do.
    #: Declare it only where the runtime mirrors CUDA (flagos memory is torch's CUDA
    #: caching-allocator memory). A library runtime shares memory through its own IPC functions
    #: instead (runtime ABI v1.1, ``ipc_get_handle``/``ipc_open_handle``), whatever this says;
    #: where neither holds, sending a flagos tensor raises an error naming the device and the way
    #: out (``.cpu()``), in the sender, at ``put()``. See docs/device.md and
    #: :mod:`torch_fl.multiprocessing`.
    shares_memory_between_processes: bool = False
    #: The vendor's own ``FLAGOS_<NAME>_*`` environment variables (``("FLAGOS_DCU_PRELOAD",
    #: ...)``), its family beside core's. Core learns them from here: a ``FLAGOS_*`` variable that
    #: neither core nor an installed vendor reads warns once at import as a likely misspelling
    #: (:mod:`torch_fl.routing.environment`). Document each in the vendor package's
    #: ``environment.md`` rows (tools/vendor_table.py copies them into docs/environment.md).
    environment: tuple[str, ...] = ()

    def is_present(self) -> bool:
        """Whether this machine has at least one device of this vendor (driver loaded, device seen).

        Must not raise for a missing driver or SDK: return False and explain in :meth:`why_absent`.
        """
        raise NotImplementedError(f"vendor {self.name!r} does not implement is_present()")

    def runtime_library(self) -> str:
        """Absolute path of the runtime shared library implementing ``torch_fl/runtime.h``."""
        raise NotImplementedError(f"vendor {self.name!r} does not implement runtime_library()")

    def activate(self) -> None:
        """Called once the vendor's runtime is the active one (kernels, routes, preloads).

        It may run again if ``torch_fl`` is re-imported in the same process: keep it idempotent.
        """

    def lazy_init(self) -> None:
        """Called once when the ``flagos`` device module initialises (the first tensor created
        from Python, ``torch.flagos._lazy_init()``), before the calls queued until then run.

        A vendor whose runtime mirrors another torch backend initialises that backend's Python
        module here (``torch.cuda._lazy_init()``), so its own queued calls run now and not later.
        """

    def why_absent(self) -> str:
        """Why :meth:`is_present` returned False, for error messages (driver, SDK, device nodes)."""
        return "the vendor reported that no device is present"

    def route_table(self) -> Path | None:
        """This vendor's route table (``<vendor>.conf``, shipped in its package), or None.

        Loaded and validated when the vendor activates, after :meth:`activate` (which is where a
        vendor registers its Python backends); ``FLAGOS_BACKEND_CONFIG`` replaces it. See
        docs/routing.md.
        """
        legacy = self.routes()
        return Path(legacy) if legacy else None

    def collective_profile(self) -> str:
        """How ``torch.distributed`` reaches this vendor's memory (docs/distributed.md).

        ``"cuda-abi"``: flagos memory is CUDA memory (the runtime mirrors CUDA): NCCL/RCCL on
        CUDA alias views. ``"host-memory"``: flagos memory is host memory: gloo on CPU alias
        views. ``"host-staged"`` (the default): gloo on pinned host copies, until the vendor's
        own collective library is wired. FlagCX is tried before all of them where importable.
        """
        return "host-staged"

    def collective_library(self) -> tuple[str, str | None] | None:
        """The vendor's own collective library, as ``(name, why it cannot run here or None)``
        (``("hccl", "no torch_npu-free HCCL bindings are installed")``), or None when it has
        none. Reported by the ``vendor`` tier (``FLAGOS_LOG=dist``); see docs/distributed.md."""
        return None

    def collective_library_path(self) -> str | None:
        """The shared library exporting ``tfl_collective_get`` (include/torch_fl/collective.h)
        that the ``vendor`` tier runs flagos groups on, or None when there is none here. It may
        be the runtime library itself (sim's is). See docs/collective-abi.md."""
        return None

    def routes(self) -> str | None:
        """Deprecated spelling of :meth:`route_table` (still honoured)."""
        return None

    def runtime_load_fix(self, error: str) -> str:
        """What to do when :meth:`runtime_library` does not load or initialise (``error`` is why),
        as a sentence for the error message."""
        return "Install the vendor's SDK (or put its lib directory on LD_LIBRARY_PATH)"

    def more_devices(self, index: int) -> str | None:
        """How a process could have device ``flagos:<index>``, for the error of a use of an index
        this process does not have (``"set FLAGOS_SIM_DEVICES=4 ..."``), or None."""
        return None

    def device_count_setting(self) -> str | None:
        """What sets how many devices a process has, for core's invalid-ordinal errors (a
        tensor on ``flagos:99``), or None."""
        return None

    def __repr__(self) -> str:
        return f"<torch_fl vendor {self.name!r}>"


def _load_fix(vendor: Vendor, why: str) -> str:
    # Vendors need only name/is_present/runtime_library: one not derived from Vendor gets its text.
    hook = getattr(vendor, "runtime_load_fix", None)
    return hook(why) if hook is not None else Vendor.runtime_load_fix(vendor, why)


@dataclasses.dataclass(frozen=True)
class Selection:
    """The vendor chosen for this process and why."""

    vendor: Vendor
    #: Why this vendor was chosen, as a clause: "FLAGOS_VENDOR=gcu is set".
    reason: str
    #: Whether the vendor's device is present; a chosen but absent vendor reports 0 devices.
    present: bool
    #: Why no device was found (``Vendor.why_absent()``) when not present, else "".
    absent_reason: str
    #: Names of every installed vendor, sorted.
    installed: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.vendor.name


# The selection activated in this process (None until torch_fl's import has run activate()).
_active: Selection | None = None


def activate(selection: Selection) -> None:
    """Make ``selection`` the process's vendor: load its runtime and run its activate() hook.
    Its route table is loaded next by the caller (``torch_fl._setup``, through
    :mod:`torch_fl.routing.activation`), so vendors stay below routing.

    A vendor whose device is absent is recorded but not loaded (its SDK is often missing too):
    ``flagos`` then has 0 devices and its first use raises an error naming the vendor and why.
    Loading the same vendor again (a re-import) is a no-op in ``_C``; another one is an error.
    """
    global _active
    from torch_fl import _C

    if selection.present:
        from torch_fl.vendors.discovery import SIM

        where = f"vendor {selection.name!r} (chosen because {selection.reason})"
        others = [name for name in selection.installed if name != selection.name]
        if others:
            instead = f", or set FLAGOS_VENDOR to another installed vendor ({', '.join(others)})"
        else:  # the built-in sim has no package of its own to uninstall
            instead = "" if selection.name == SIM else ", or uninstall its package"
        try:
            path = selection.vendor.runtime_library()
        except Exception as exc:
            raise VendorActivationError(
                f"torch_fl: {where} could not name its runtime library: {_brief(exc)}. "
                f"Reinstall the vendor's package{instead}."
            ) from exc
        try:
            _C.activate_runtime(str(path))
        except Exception as exc:
            why = _brief(exc)
            raise VendorActivationError(
                f"torch_fl: {where} could not load its runtime library {path}: {why}. "
                f"{_load_fix(selection.vendor, why)}{instead}."
            ) from exc
        setting = getattr(selection.vendor, "device_count_setting", None)
        text = setting() if setting is not None else None
        if text:
            _C.set_device_count_setting(text)
        try:
            selection.vendor.activate()
        except Exception as exc:
            raise VendorActivationError(
                f"torch_fl: the activate() hook of {where} failed: {_brief(exc)}"
            ) from exc
    _active = selection


def active() -> Selection | None:
    """The selection activated in this process, or None before ``torch_fl`` finished importing."""
    return _active


def active_vendor() -> Vendor:
    """The active :class:`Vendor`; raises if ``torch_fl`` has not activated one."""
    if _active is None:
        raise RuntimeError("torch_fl: no vendor is active (import torch_fl first)")
    return _active.vendor
