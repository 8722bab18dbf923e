"""Entry point of PyTorch's device-backend autoload (group ``torch.backends``).

``import torch`` loads this entry point at the end of ``torch/__init__.py``. Loading it imports the
``torch_fl`` package, whose import sets up the ``flagos`` device; :func:`autoload` itself then has
nothing left to do. PyTorch wraps any failure as "Failed to load the backend extension: flagos.
You can disable extension auto-loading with TORCH_DEVICE_BACKEND_AUTOLOAD=0." and chains ours, so
``torch_fl`` raises :func:`autoload_error` there: what failed, and how to get ``import torch`` back.
"""

from __future__ import annotations

__all__ = ["autoload", "autoload_error"]


def autoload_error(exc: BaseException) -> RuntimeError:
    """The error ``import torch`` shows when setting up ``flagos`` failed with ``exc``."""
    return RuntimeError(
        f"torch-fl could not set up the 'flagos' device while `import torch` autoloaded it: "
        f"{type(exc).__name__}: {exc}\n"
        f"To import torch without the flagos device, set TORCH_DEVICE_BACKEND_AUTOLOAD=0 "
        f"(or uninstall torch-fl-core); `import torch_fl` afterwards shows the same error."
    )


def autoload() -> None:
    """Import ``torch_fl``: sets up the ``flagos`` device during ``import torch``."""
    # torch is only partly imported here. When `import torch_fl` itself started this
    # `import torch`, this finds the partly imported torch_fl and returns; torch_fl then finishes
    # its own setup once torch is done.
    try:
        import torch_fl  # noqa: F401
    except Exception as exc:
        raise autoload_error(exc) from exc
