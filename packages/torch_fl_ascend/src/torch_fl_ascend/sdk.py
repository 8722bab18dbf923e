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

from collections.abc import Mapping

from torch_fl.vendors.sdk import LoadedSdk, SdkLoader, SdkNotFoundError, SdkSpec

__all__ = ["ENV_VARS", "LIBRARIES", "SPEC", "SdkNotFoundError", "load", "loaded", "search_dirs"]

ENV_VARS = ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME")
LIBRARIES = ("libascendcl.so", "libnnopbase.so", "libopapi.so")
SPEC = SdkSpec(
    product="CANN toolkit",
    env_vars=ENV_VARS,
    default_home="/usr/local/Ascend/ascend-toolkit/latest",
    libraries=LIBRARIES,
    lib_dirs=("lib64", "lib"),
)
_LOADER = SdkLoader(SPEC)


def _built() -> str:
    from torch_fl_ascend import sdk_info

    info = sdk_info()
    if not info.get("cann_home"):
        return ""
    kind = "the CANN emulator" if info.get("emulator", "").upper() == "TRUE" else "a toolkit"
    return f"{kind} at {info['cann_home']}"


def load(environ: Mapping[str, str] | None = None) -> LoadedSdk:
    """Load the toolkit once per process (a failure is retried on the next call)."""
    return _LOADER.load(environ, built=_built())


def loaded() -> LoadedSdk | None:
    return _LOADER.loaded()


def search_dirs(environ: Mapping[str, str] | None = None):
    return _LOADER.search_dirs(environ)
