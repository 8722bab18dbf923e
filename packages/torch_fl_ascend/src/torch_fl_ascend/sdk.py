"""Finding and loading the CANN toolkit at run time.

The toolkit lives outside the wheel (``set_env.sh`` of a CANN install exports
``ASCEND_TOOLKIT_HOME``), so the package's libraries carry no path to it. Before core loads the
runtime library, :func:`load` loads ``libascendcl.so``, ``libnnopbase.so`` and ``libopapi.so``
(``RTLD_GLOBAL``) from ``$ASCEND_TOOLKIT_HOME/lib64``, else ``$ASCEND_HOME/lib64``, else
``/usr/local/Ascend/ascend-toolkit/latest/lib64``, else the loader path
(:mod:`torch_fl.vendors.sdk`). A missing library raises :class:`SdkNotFoundError` naming it, where
it was looked for and the variable to set.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch_fl.vendors.sdk import LoadedSdk, SdkLoader

__all__ = [
    "DEFAULT_HOME",
    "ENV_VARS",
    "LIBRARIES",
    "SdkNotFoundError",  # noqa: F822 -- provided by __getattr__ (core's class)
    "load",
    "loaded",
    "search_dirs",
]

ENV_VARS = ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME")
LIBRARIES = ("libascendcl.so", "libnnopbase.so", "libopapi.so")
DEFAULT_HOME = "/usr/local/Ascend/ascend-toolkit/latest"


# Core's loader is imported on first use, not at import: this module is imported while torch-fl
# sets up the device (the vendor's presence check), and importing torch_fl from here first would
# start that set-up while this module is still half imported.
@functools.cache
def _loader() -> SdkLoader:
    from torch_fl.vendors.sdk import SdkLoader, SdkSpec

    return SdkLoader(
        SdkSpec(
            product="CANN toolkit",
            env_vars=ENV_VARS,
            default_home=DEFAULT_HOME,
            libraries=LIBRARIES,
            lib_dirs=("lib64", "lib"),
        )
    )


def __getattr__(name: str):
    if name == "SdkNotFoundError":  # core's: what load() raises
        from torch_fl.vendors.sdk import SdkNotFoundError

        return SdkNotFoundError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _built_home() -> str:
    from torch_fl_ascend import sdk_info

    return str(sdk_info().get("cann_home") or "")


def _built() -> str:
    from torch_fl_ascend import sdk_info

    info = sdk_info()
    if not info.get("cann_home"):
        return ""
    kind = "the CANN emulator" if info.get("emulator", "").upper() == "TRUE" else "a toolkit"
    return f"{kind} at {info['cann_home']}"


def load(environ: Mapping[str, str] | None = None) -> LoadedSdk:
    """Load the toolkit once per process (a failure is retried on the next call)."""
    return _loader().load(environ, built=_built(), built_home=_built_home())


def loaded() -> LoadedSdk | None:
    return _loader().loaded()


def search_dirs(environ: Mapping[str, str] | None = None):
    return _loader().search_dirs(environ)
