"""Finding and loading the TopsRider SDK at run time.

The SDK lives outside the wheel, wherever the user installed it, so the package's libraries carry
no path to it (their rpath is ``$ORIGIN``-relative only). Before core loads the runtime library,
:func:`load` loads the SDK's ``libtopsrt.so`` and ``libtopsaten.so`` (``RTLD_GLOBAL``); the
dynamic loader then satisfies the runtime's and kernels' ``DT_NEEDED`` entries with them. Each
library is looked for in, in order (core's :mod:`torch_fl.vendors.sdk` does the looking):

1. ``$TOPS_HOME/lib`` and ``$TOPS_HOME/lib64`` when ``TOPS_HOME`` is set, else the TopsRider default
   install location ``/opt/tops/lib`` and ``/opt/tops/lib64``;
2. the dynamic loader path (``LD_LIBRARY_PATH``, the ``ldconfig`` cache, the system directories).

When one is not found, :class:`SdkNotFoundError` says which library, where it was looked for and
how to fix it (set ``TOPS_HOME``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch_fl.vendors.sdk import SdkLoader

__all__ = [
    "ATEN_LIBRARY",
    "DEFAULT_HOME",
    "ENV_VAR",
    "LOADER_PATH",
    "RUNTIME_LIBRARY",
    "Sdk",
    "SdkNotFoundError",  # noqa: F822 -- provided by __getattr__ (core's class)
    "load",
    "loaded",
    "search_dirs",
]

#: The environment variable naming the TopsRider install.
ENV_VAR = "TOPS_HOME"
#: Where TopsRider installs by default, looked in when TOPS_HOME is unset.
DEFAULT_HOME = "/opt/tops"
#: The SDK's libraries, in load order (topsaten needs topsrt).
RUNTIME_LIBRARY = "libtopsrt.so"
ATEN_LIBRARY = "libtopsaten.so"

LOADER_PATH = "the dynamic loader path"


# Core's loader is imported on first use, not at import: this module is imported while torch-fl
# sets up the device (the vendor's presence check), and importing torch_fl from here first would
# start that set-up while this module is still half imported.
@functools.cache
def _loader() -> SdkLoader:
    from torch_fl.vendors.sdk import SdkLoader, SdkSpec

    return SdkLoader(
        SdkSpec(
            product="TopsRider SDK",
            env_vars=(ENV_VAR,),
            default_home=DEFAULT_HOME,
            libraries=(RUNTIME_LIBRARY, ATEN_LIBRARY),
            lib_dirs=("lib", "lib64"),
            example="/path/to/tops",
        )
    )


def __getattr__(name: str):
    if name == "SdkNotFoundError":  # core's: what load() raises
        from torch_fl.vendors.sdk import SdkNotFoundError

        return SdkNotFoundError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclasses.dataclass(frozen=True)
class Sdk:
    """The TopsRider SDK this process loaded."""

    #: ``libtopsrt.so`` as loaded (the path the loader reports).
    runtime: str
    #: ``libtopsaten.so`` as loaded.
    aten: str
    #: Where it came from, as a phrase: ``TOPS_HOME=/opt/tops``, ``/opt/tops (the TopsRider SDK's
    #: default install location)``, ``the dynamic loader path``.
    source: str

    @property
    def lib_dir(self) -> str:
        return str(Path(self.runtime).parent)


def search_dirs(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The directories looked in before the loader path: ``<home>/lib``, ``<home>/lib64``."""
    return _loader().search_dirs(environ)


def _built_home() -> str:
    from torch_fl_gcu import sdk_info

    return str(sdk_info().get("tops_home") or "")


def _built() -> str:
    from torch_fl_gcu import sdk_info

    info = sdk_info()
    if not info.get("tops_home"):
        return ""
    kind = "the TopsRider emulator" if info.get("emulator", "").upper() == "TRUE" else "an SDK"
    return f"{kind} at {info['tops_home']}"


def load(environ: Mapping[str, str] | None = None) -> Sdk:
    """Load the SDK (once per process; a failure is retried on the next call). Raises
    :class:`SdkNotFoundError` with the message users see when it is missing."""
    found = _loader().load(environ, built=_built(), built_home=_built_home())
    return Sdk(
        runtime=found.paths[RUNTIME_LIBRARY], aten=found.paths[ATEN_LIBRARY], source=found.source
    )


def loaded() -> Sdk | None:
    """The SDK :func:`load` loaded in this process, or None."""
    return load() if _loader().loaded() is not None else None
