"""Finding and loading the MUSA SDK at run time.

The SDK lives outside the wheel, wherever the user installed it, so the package's libraries carry
no path to it (their rpath is ``$ORIGIN``-relative only). Before core loads the runtime library,
:func:`load` loads the SDK's ``libmusart.so`` and ``libmudnn.so`` (``RTLD_GLOBAL``); the dynamic
loader then satisfies the runtime's and kernels' ``DT_NEEDED`` entries with them. Each library is
looked for in ``$MUSA_HOME/lib`` and ``lib64`` when ``MUSA_HOME`` is set, else in the MUSA default
install location ``/usr/local/musa``, then on the dynamic loader path (core's
:mod:`torch_fl.vendors.sdk` does the looking and raises :class:`SdkNotFoundError`, naming the
library, where it looked and how to fix it).
"""

from __future__ import annotations

from torch_fl_musa import sdk_info

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

#: The environment variable naming the MUSA install.
ENV_VAR = "MUSA_HOME"
#: Where the MUSA toolkit installs by default, looked in when MUSA_HOME is unset.
DEFAULT_HOME = "/usr/local/musa"
#: The SDK's libraries, in load order (muDNN needs the runtime).
LIBRARIES = ("libmusart.so", "libmudnn.so")

#: Core's :class:`torch_fl.vendors.sdk.SdkSpec` fields: a plain dict, so that importing this module
#: imports neither torch nor torch_fl (it is imported while torch-fl sets up the device).
SPEC = {
    "product": "MUSA SDK",
    "env_vars": (ENV_VAR,),
    "default_home": DEFAULT_HOME,
    "libraries": LIBRARIES,
    "lib_dirs": ("lib", "lib64"),
    "example": "/path/to/musa",
    "built_home_key": "musa_home",
    "emulator": "the MUSA emulator",
    "real": "an SDK",
}


def __getattr__(name: str):
    from torch_fl.vendors.sdk import module_attribute

    return module_attribute(__name__, SPEC, sdk_info, name)
