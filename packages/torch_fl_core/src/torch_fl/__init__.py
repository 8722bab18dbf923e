"""torch-fl: one PyTorch device, ``flagos``, on every accelerator.

Importing this package (``import torch`` does it through PyTorch's device-backend autoload):

1. chooses the vendor for this process (``FLAGOS_VENDOR``, else the installed vendor whose device
   is present, else the built-in ``sim``; see :mod:`torch_fl.vendors.discovery`),
2. renames PyTorch's PrivateUse1 backend to ``flagos`` and loads ``torch_fl._C`` (whose static
   initialisers register the device guard, allocators, hooks and generator),
3. registers :mod:`torch_fl.device` as ``torch.flagos`` and generates ``Tensor.flagos()``,
   ``Tensor.is_flagos``, ``Module.flagos()`` and the storage/PackedSequence equivalents,
4. loads the chosen vendor's runtime library and runs its activate() hook (and, where the vendor
   declares a native profiler activity, makes flagos profiles record it:
   :mod:`torch_fl.profiler_activity`),
5. makes ``torch.multiprocessing`` share flagos tensors between processes where the runtime can,
   and refuse them with a clear error where it cannot (:mod:`torch_fl.multiprocessing`).

Every step is idempotent, so importing again (or after ``importlib.reload``) is safe.
When ``import torch`` autoloads this package, ``torch`` is not finished importing yet; only names
torch defines before calling the autoload hook are used at import time.
"""

from __future__ import annotations

import importlib.metadata
import sys
import types

import torch

__all__ = ["__version__", "info", "vendor"]

try:
    __version__: str = importlib.metadata.version("torch-fl-core")
except importlib.metadata.PackageNotFoundError:  # a source tree without installed metadata
    __version__ = "0.0.0+unknown"

_BACKEND = "flagos"
_UNRENAMED = "privateuseone"


def _rename_backend() -> None:
    current = torch._C._get_privateuse1_backend_name()
    if current not in (_UNRENAMED, _BACKEND):
        raise RuntimeError(
            f"torch_fl needs PyTorch's PrivateUse1 backend to be named {_BACKEND!r}, but another "
            f"extension already named it {current!r}. Only one PrivateUse1 backend can be used per "
            f"process: do not import both, or disable the other's autoload."
        )
    from torch.utils import backend_registration

    # The C++ name may already be set (by _C or an earlier import); the Python side (profiler and
    # autograd device-type aliases, torch.utils' cached name) is set by this call only.
    if getattr(backend_registration, "_privateuse1_backend_name", None) != _BACKEND:
        torch.utils.rename_privateuse1_backend(_BACKEND)


def _register_device_module(module: types.ModuleType) -> None:
    existing = getattr(torch, _BACKEND, None)
    if existing is module:
        return
    if existing is None:
        torch._register_device_module(_BACKEND, module)
        return
    if getattr(existing, "_TORCH_FL_DEVICE_MODULE", False):
        # torch_fl was imported afresh (its modules were dropped from sys.modules): rebind.
        setattr(torch, _BACKEND, module)
        sys.modules[f"torch.{_BACKEND}"] = module
        return
    raise RuntimeError(
        f"torch.{_BACKEND} is already registered to {existing!r}, which is not torch_fl's device "
        f"module"
    )


def _generate_methods() -> None:
    from torch.nn.utils.rnn import PackedSequence

    # PyTorch raises if a method is generated twice, so generate only what is missing.
    missing = {
        "for_tensor": not hasattr(torch.Tensor, f"is_{_BACKEND}"),
        "for_module": not hasattr(torch.nn.Module, _BACKEND),
        "for_packed_sequence": not hasattr(PackedSequence, f"is_{_BACKEND}"),
        "for_storage": not hasattr(torch.storage._StorageBase, f"is_{_BACKEND}"),
    }
    if any(missing.values()):
        torch.utils.generate_methods_for_privateuse1_backend(**missing)


def _build_info() -> types.ModuleType | None:
    try:
        import torch_fl._torch_build as build  # written by the build (the torch it is for)
    except ImportError:
        return None
    return build


def _setup() -> None:
    from torch_fl import conflicts, versions

    # Another PrivateUse1 extension (torch_npu) loaded or loading: fail before registering
    # anything, naming both; and refuse it if it is imported later.
    conflicts.check_not_claimed()
    conflicts.install()
    # Before anything loads _C: under another torch minor it would fail with an undefined symbol.
    versions.check_torch_build("torch-fl-core", _build_info())
    from torch_fl import vendors
    from torch_fl.routing import environment
    from torch_fl.vendors import discovery

    # A misspelled variable (FLAGOS_VENDER) would otherwise be silently ignored.
    environment.warn_unknown_variables()
    # Checked before anything is set up: a bad value is a configuration error naming the variable.
    budget = environment.fallback_budget()
    # Choose first: a configuration error (unknown FLAGOS_VENDOR) leaves torch untouched.
    selection = discovery.select()
    _rename_backend()
    # Loading _C runs its static initialisers: the PrivateUse1 device guard, allocators, hooks.
    import torch_fl._C  # noqa: F401
    from torch_fl import device

    _register_device_module(device)
    # torch.accelerator.Graph (torch >= 2.12): flagos's graphs, keyed by the renamed backend.
    torch_fl._C.register_accelerator_graph()
    _generate_methods()
    # Which operands may stay on the CPU beside flagos tensors: CUDA's rule, before any op runs.
    from torch_fl.routing import cpu_arguments

    cpu_arguments.install()
    vendors.activate(selection)
    if selection.present:
        # The route table: validated now (errors name file:line; a RouteTableError propagates
        # unwrapped), installed in the router, after activate() registered the vendor's backends.
        from torch_fl.routing import activation

        activation.activate(selection.vendor)
    # torch.multiprocessing: flagos tensors sent to another process share their memory where the
    # runtime can (CUDA IPC on the delegate runtime), else raise at pickling / Queue.put time.
    from torch_fl import multiprocessing as _multiprocessing

    _multiprocessing.install(selection)
    if selection.present:
        # torch.profiler: the vendor's native activity (CUPTI on cuda) in flagos profiles.
        from torch_fl import profiler_activity

        declared = getattr(selection.vendor, "profiler_activity", None)
        profiler_activity.install(declared, vendor=selection.name)
    # torch.compile: Dynamo's device interface and Inductor's codegen for flagos, completed when
    # Dynamo/Inductor are imported (importing them here would slow every `import torch`).
    from torch_fl import compile as _compile

    _compile.register()
    # Libraries that know no flagos (transformers' Trainer, Accelerate under torchrun,
    # flex_attention): adapters installed when each is imported (torch_fl.integrations).
    from torch_fl import integrations as _integrations

    _integrations.install()

    # torch.distributed is imported by torch/__init__ before the backend autoload runs, so the
    # flagos c10d backend can be registered here too (builds without distributed skip it).
    if torch.distributed.is_available():
        from torch_fl import distributed

        distributed.register()
    from torch_fl import _shutdown

    _shutdown.register()
    if budget is not None:
        # Registered after the autograd hook, so it runs before it (atexit is last in, first out)
        # and counts only the program's calls.
        _shutdown.register_fallback_budget(budget)


def _torch_is_importing() -> bool:
    # True while torch/__init__.py runs, i.e. when its backend autoload imported us.
    return bool(getattr(getattr(torch, "__spec__", None), "_initializing", False))


try:
    _setup()
except Exception as _exc:
    from torch_fl import _autoload

    # Raised as it is (programs catch it); if nothing does, a configuration mistake prints as
    # its message alone, not the whole chain (torch_fl._autoload).
    _autoload.install_excepthook()
    if _torch_is_importing():
        raise _autoload.autoload_error(_exc) from _exc
    raise

from torch_fl.info import info  # noqa: E402
from torch_fl.vendors import Vendor  # noqa: E402


def vendor() -> Vendor:
    """The vendor under ``flagos`` in this process (see ``info()`` for why it was chosen)."""
    from torch_fl import vendors

    return vendors.active_vendor()
