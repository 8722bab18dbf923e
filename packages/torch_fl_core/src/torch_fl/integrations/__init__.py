"""Adapters that make libraries treat ``flagos`` as they treat CUDA.

Each adapter is installed the moment its library's module is imported (post-import hooks, as the
Dynamo and Inductor registration is), never by importing the library itself. An adapter checks
that the library's internals it touches have the shape it was written against, and otherwise
installs nothing and says so once (a warning naming the library, its version and what is missing).
Installed, it changes behaviour only while ``flagos`` is the process's accelerator
(``torch.accelerator.current_accelerator()``); with another accelerator, on a CPU run or with
``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` (torch_fl not imported) the library runs unchanged.

``FLAGOS_DISABLE_INTEGRATIONS=all`` (or a comma-separated list of names: ``transformers``,
``hub_kernels``, ``accelerate``, ``flex_attention``, ``lightning``) installs none (those). docs/ecosystem.md says what each does,
with which versions it was tested, and the upstream change that would make it unnecessary.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from types import ModuleType

from torch_fl.integrations._support import IntegrationWarning, flagos_is_the_accelerator

__all__ = [
    "ADAPTERS",
    "DISABLE_VAR",
    "IntegrationWarning",
    "disabled",
    "flagos_is_the_accelerator",
    "install",
    "status",
]

DISABLE_VAR = "FLAGOS_DISABLE_INTEGRATIONS"

#: name -> (module whose import installs it, "package.module:function" of the installer)
ADAPTERS: dict[str, tuple[str, str]] = {
    "transformers": ("transformers.training_args", "torch_fl.integrations.transformers:install"),
    "hub_kernels": (
        "transformers.integrations.hub_kernels",
        "torch_fl.integrations.hub_kernels:install",
    ),
    "accelerate": ("accelerate.state", "torch_fl.integrations.accelerate:install"),
    "flex_attention": (
        "torch.nn.attention.flex_attention",
        "torch_fl.integrations.flex_attention:install",
    ),
    "lightning": ("lightning.pytorch", "torch_fl.integrations.lightning:install"),
}

# name -> "installed" | "skipped: <why>" | "disabled"; names not yet imported are absent.
_status: dict[str, str] = {}


def disabled(environ: dict[str, str] | None = None) -> set[str]:
    """The adapters ``FLAGOS_DISABLE_INTEGRATIONS`` turns off."""
    value = (environ if environ is not None else os.environ).get(DISABLE_VAR, "")
    names = {n.strip() for n in value.split(",") if n.strip()}
    if "all" in names:
        return set(ADAPTERS)
    unknown = names - set(ADAPTERS)
    if unknown:
        warnings.warn(
            f"{DISABLE_VAR}={value}: unknown integration(s) {sorted(unknown)} ignored "
            f"(known: {', '.join(sorted(ADAPTERS))}, all)",
            IntegrationWarning,
            stacklevel=2,
        )
    return names & set(ADAPTERS)


def status() -> dict[str, str]:
    """What each adapter did so far: installed, skipped (why) or disabled."""
    return dict(_status)


def _runner(name: str, target: str) -> Callable[[ModuleType], None]:
    def run(module: ModuleType) -> None:
        import importlib

        path, _, func = target.partition(":")
        installer = getattr(importlib.import_module(path), func)
        try:
            why_not = installer(module)
        except Exception as exc:  # noqa: BLE001 - an adapter must never break the library's import
            why_not = f"{type(exc).__name__}: {exc}"
        if why_not:
            _status[name] = f"skipped: {why_not}"
            warnings.warn(
                f"flagos: the {name} integration is not installed ({why_not}); {name} runs "
                f"unchanged, without flagos support (docs/ecosystem.md)",
                IntegrationWarning,
                stacklevel=2,
            )
        else:
            _status[name] = "installed"

    return run


def install() -> None:
    """Arm every adapter not disabled (run when ``torch_fl`` is imported)."""
    from torch_fl.compile import _import_hooks

    off = disabled()
    for name, (module, target) in ADAPTERS.items():
        if name in off:
            _status[name] = "disabled"
            continue
        _import_hooks.when_imported(module, _runner(name, target))
