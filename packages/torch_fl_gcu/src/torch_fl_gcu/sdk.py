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
how to fix it (set ``TOPS_HOME``). ``load()`` returns core's ``LoadedSdk`` (``runtime``,
``paths``, ``source``, ``lib_dir``); ``loaded()`` is it once loaded, else None.
"""

from __future__ import annotations

from torch_fl_gcu import sdk_info

__all__ = [  # noqa: F822 -- load, loaded, search_dirs, SdkNotFoundError: core's, by __getattr__
    "DEFAULT_HOME",
    "ENV_VAR",
    "LIBRARIES",
    "SPEC",
    "SdkNotFoundError",
    "load",
    "loaded",
    "search_dirs",
]

#: The environment variable naming the TopsRider install.
ENV_VAR = "TOPS_HOME"
#: Where TopsRider installs by default, looked in when TOPS_HOME is unset.
DEFAULT_HOME = "/opt/tops"
#: The SDK's libraries, in load order (topsaten needs topsrt).
LIBRARIES = ("libtopsrt.so", "libtopsaten.so")

#: Core's :class:`torch_fl.vendors.sdk.SdkSpec` fields: a plain dict, so that importing this module
#: imports neither torch nor torch_fl (it is imported while torch-fl sets up the device).
SPEC = {
    "product": "TopsRider SDK",
    "env_vars": (ENV_VAR,),
    "default_home": DEFAULT_HOME,
    "libraries": LIBRARIES,
    "lib_dirs": ("lib", "lib64"),
    "example": "/path/to/tops",
    "built_home_key": "tops_home",
    "emulator": "the TopsRider emulator",
    "real": "an SDK",
}


def __getattr__(name: str):
    from torch_fl.vendors.sdk import module_attribute

    return module_attribute(__name__, SPEC, sdk_info, name)
