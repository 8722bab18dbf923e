"""Entry point of PyTorch's device-backend autoload (group ``torch.backends``), and how a
configuration mistake found while ``flagos`` is set up is shown.

``import torch`` loads this entry point at the end of ``torch/__init__.py``. Loading it imports the
``torch_fl`` package, whose import sets up the ``flagos`` device; :func:`autoload` itself then has
nothing left to do. PyTorch wraps any failure as "Failed to load the backend extension: flagos.
You can disable extension auto-loading with TORCH_DEVICE_BACKEND_AUTOLOAD=0." and chains ours, so
``torch_fl`` raises :func:`autoload_error` there: what failed, and how to get ``import torch`` back.

A configuration mistake (:func:`configuration_error`: ``FLAGOS_VENDOR`` naming no installed vendor,
a vendor package that fails to load, a route table or ``FLAGOS_OP_*`` variable that does not
validate, a vendor whose runtime library or SDK does not load, packages of versions that do not
work together) is still raised as an exception, so
programs can catch it. When nothing catches it, the interpreter would print the whole chain (about
50 lines ending in torch's generic message); :func:`install_excepthook` makes it print the
message alone instead, which names the variable or file and the fix. ``python -X dev`` prints the
full traceback as usual.
"""

from __future__ import annotations

import sys
import types

__all__ = [
    "autoload",
    "autoload_error",
    "configuration_error",
    "install_excepthook",
    "short_message",
]


class AutoloadError(RuntimeError):
    """Setting up ``flagos`` failed while ``import torch`` autoloaded it (``__cause__`` says why)."""


def autoload_error(exc: BaseException) -> RuntimeError:
    """The error ``import torch`` shows when setting up ``flagos`` failed with ``exc``."""
    return AutoloadError(
        f"torch-fl could not set up the 'flagos' device while `import torch` autoloaded it: "
        f"{type(exc).__name__}: {exc}\n"
        f"To import torch without the flagos device, set TORCH_DEVICE_BACKEND_AUTOLOAD=0 "
        f"(or uninstall torch-fl-core); `import torch_fl` afterwards shows the same error."
    )


def _configuration_types() -> tuple[type[BaseException], ...]:
    types_: list[type[BaseException]] = []
    for module, name in (
        ("torch_fl.vendors.discovery", "VendorSelectionError"),
        ("torch_fl.vendors", "VendorActivationError"),
        ("torch_fl.routing.route_table", "RouteTableError"),
        ("torch_fl.routing.environment", "VariableError"),
        ("torch_fl.versions", "VersionMismatchError"),
    ):
        found = getattr(sys.modules.get(module), name, None)
        if isinstance(found, type):
            types_.append(found)
    return tuple(types_)


def configuration_error(exc: BaseException | None) -> BaseException | None:
    """The configuration mistake ``exc`` is, or was raised from (its ``__cause__`` chain), or
    None when it is something else (a bug: its traceback matters)."""
    kinds = _configuration_types()
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen and kinds:
        seen.add(id(exc))
        if isinstance(exc, kinds):
            return exc
        exc = exc.__cause__
    return None


def short_message(exc: BaseException, via_import_torch: bool = False) -> str:
    """What an uncaught configuration mistake prints: its message, and how ``import torch``
    gets by without flagos when that is where it happened."""
    text = str(exc).strip()
    for prefix in ("torch_fl: ", "torch-fl: "):
        text = text.removeprefix(prefix)
    lines = text.splitlines() or [type(exc).__name__]
    route_types = [t for t in _configuration_types() if t.__name__ == "RouteTableError"]
    if route_types and isinstance(exc, route_types[0]):
        if len(lines) == 1:
            out = [f"torch-fl: cannot load the route table: {lines[0]}"]
        else:
            out = [f"torch-fl: cannot load the route table ({len(lines)} problems):"]
            out += [f"  {line}" for line in lines]
    else:
        out = [f"torch-fl: {lines[0]}", *lines[1:]]
    if via_import_torch:
        out.append(
            "(`import torch` stopped while setting up the flagos device; "
            "TORCH_DEVICE_BACKEND_AUTOLOAD=0 imports torch without it)"
        )
    return "\n".join(out) + "\n"


def _excepthook(
    kind: type[BaseException], value: BaseException, tb: types.TracebackType | None
) -> None:
    found = configuration_error(value)
    if found is None or sys.flags.dev_mode:
        _previous(kind, value, tb)
        return
    via_torch = False
    link: BaseException | None = value
    while link is not None and link is not found:
        via_torch = via_torch or isinstance(link, AutoloadError)
        link = link.__cause__
    try:
        sys.stderr.write(short_message(found, via_import_torch=via_torch))
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - fall back to the usual report
        _previous(kind, value, tb)


_previous = sys.excepthook


def install_excepthook() -> None:
    """Show uncaught configuration mistakes as their message alone (idempotent)."""
    global _previous
    if getattr(sys.excepthook, "__torch_fl_hook__", False):
        return
    _previous = sys.excepthook
    sys.excepthook = _excepthook


_excepthook.__torch_fl_hook__ = True  # type: ignore[attr-defined]


def autoload() -> None:
    """Import ``torch_fl``: sets up the ``flagos`` device during ``import torch``."""
    # torch is only partly imported here. When `import torch_fl` itself started this
    # `import torch`, this finds the partly imported torch_fl and returns; torch_fl then finishes
    # its own setup once torch is done.
    try:
        import torch_fl  # noqa: F401
    except Exception as exc:
        if isinstance(exc, AutoloadError):
            raise
        install_excepthook()
        raise autoload_error(exc) from exc
